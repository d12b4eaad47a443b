"""Figures of rollout plans: the predicted throughput speedup of the shipped policy (K per
concurrency) and of one fixed K, with the recommended K against batch size, and the predicted P99
and P50 ITL per token with and without the policy.

Plans that ship one policy (:func:`same_policy`) or predict the same latencies (:func:`same_itl`)
share one chart; a bench of the plans' deployment (:func:`~alphagate.report.charts.where.
same_deployment`) is drawn on the speedup axis.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from alphagate.bench.records import BenchResult
from alphagate.plan.records import Plan
from alphagate.report.charts.spec import (
    BREAK_EVEN,
    ITL_LABEL,
    K_LABEL,
    RATIO_LABEL,
    Chart,
    HLine,
    Line,
    Panel,
    few,
    load_axis,
    or_nan,
    tick_labels,
    with_band,
)
from alphagate.report.charts.where import and_list, same_deployment

__all__ = [
    "BOTH_SIDES_PLAN",
    "as_plans",
    "group_plans",
    "k_at_target",
    "plan_itl_chart",
    "plan_speedup_chart",
    "plans_at",
    "same_itl",
    "same_policy",
]

BOTH_SIDES_PLAN = (
    "Baseline: the same requests with speculation off (black); candidate: the plan's policy"
)


def k_at_target(p: Plan) -> int:
    """The K the plan runs at its target concurrency (its gate's or fixed K where it runs none)."""
    k = next((row.k for row in p.rows if row.concurrency == p.concurrency), 0)
    return k if k > 0 else (p.gate.k if p.gate is not None else p.fixed_k)


def _concurrencies(p: Plan) -> tuple[float, ...]:
    return tuple(float(row.concurrency) for row in p.rows)


def as_plans(p: Plan | Sequence[Plan]) -> tuple[Plan, ...]:
    return (p,) if isinstance(p, Plan) else tuple(p)


def _policy_key(p: Plan) -> tuple[object, ...]:
    """What a plan ships: its deployment, the engine's K schedule and the K at each concurrency."""
    return (
        p.deployment,
        tuple(tuple(r) for r in p.batch_schedule),
        tuple((row.concurrency, row.k) for row in p.rows),
    )


def _itl_key(p: Plan) -> tuple[object, ...]:
    rows = tuple(
        (row.itl_p50_off_ms, row.itl_p99_off_ms, row.itl_p50_on_ms, row.itl_p99_on_ms)
        for row in p.rows
    )
    return (*_policy_key(p), rows, p.slo_p99_itl_ms)


def group_plans(plans: Sequence[Plan], key: Callable[[Plan], object]) -> list[tuple[Plan, ...]]:
    """The plans grouped by ``key``, groups and plans in their order."""
    out: dict[object, list[Plan]] = {}
    for p in plans:
        out.setdefault(key(p), []).append(p)
    return [tuple(g) for g in out.values()]


def same_policy(plans: Sequence[Plan]) -> list[tuple[Plan, ...]]:
    """The plans grouped by the policy they ship (deployment, K schedule, K per concurrency), in
    order: plans of one group draw one speedup chart and one recommended-K panel."""
    return group_plans(plans, _policy_key)


def same_itl(plans: Sequence[Plan]) -> list[tuple[Plan, ...]]:
    """The plans grouped by the latencies they predict: the same policy and the same figures."""
    return group_plans(plans, _itl_key)


def plans_at(plans: Sequence[Plan], *, article: bool = True) -> str:
    """'the plan at concurrency 64' or 'the plans at concurrency 64 and 256' (without 'the'
    when ``article`` is false)."""
    cs = and_list([str(p.concurrency) for p in plans])
    words = f"plan{'s' if len(plans) > 1 else ''} at concurrency {cs}"
    return f"the {words}" if article else words


def _verdicts(plans: Sequence[Plan]) -> str:
    if len({p.verdict for p in plans}) == 1:
        return f"{'plans' if len(plans) > 1 else 'plan'} {plans[0].verdict.upper()}"
    return "; ".join(f"plan at {p.concurrency}: {p.verdict.upper()}" for p in plans)


# ---------------------------------------------------------------- speedup
def _measured_speedup_line(b: BenchResult) -> Line | None:
    """A bench's throughput speedup at its closed-loop levels, for the plan's concurrency axis."""
    by_level = {lv.level: lv.concurrency for lv in b.levels if lv.rate is None}
    pts = sorted(
        (float(c), or_nan(cmp.speedups.throughput_speedup))
        for cmp in b.comparisons
        if (c := by_level.get(cmp.level)) is not None
    )
    if not pts:
        return None
    xs = tuple(x for x, _ in pts)
    return Line(
        label=f"measured throughput, bench run {b.run_id}",
        x=xs,
        y=tuple(y for _, y in pts),
        role="measured",
        group=f"measured {b.run_id}",
        points=few(xs),
    )


def _policy_lines(ps: tuple[Plan, ...]) -> list[Line]:
    """One line per distinct predicted policy speedup, with its range; the first labels its K."""
    p = ps[0]
    xs = _concurrencies(p)
    policies = list(dict.fromkeys(tuple(row.throughput_speedup for row in q.rows) for q in ps))
    lines = []
    for i, ys in enumerate(policies):
        owners = [q for q in ps if tuple(row.throughput_speedup for row in q.rows) == ys]
        suffix = "" if len(policies) == 1 else f" ({plans_at(owners)})"
        line = Line(
            label=f"policy (K per concurrency){suffix}",
            x=xs,
            y=ys,
            point_labels=tuple(f"K={row.k}" for row in p.rows) if i == 0 else None,
            group=f"policy {i}",
        )
        lines.append(with_band(line, [row.throughput_speedup_interval for row in owners[0].rows]))
    return lines


def _fixed_k_lines(ps: tuple[Plan, ...]) -> list[Line]:
    """One dashed line per distinct fixed K the plans compare their policy with."""
    xs = _concurrencies(ps[0])
    fixed = list(dict.fromkeys((q.fixed_k, tuple(r.fixed_k_speedup for r in q.rows)) for q in ps))
    lines = []
    for k, ys in fixed:
        owners = [q for q in ps if q.fixed_k == k]
        suffix = "" if len(ps) == 1 else f" ({plans_at(owners, article=False)})"
        lines.append(
            Line(
                label=f"one fixed K = {k}{suffix}",
                x=xs,
                y=ys,
                role="fixed_k",
                dashed=True,
                group=f"fixed {k}",
            )
        )
    return lines


def _speedup_panel(ps: tuple[Plan, ...], lines: list[Line]) -> Panel:
    all_x = tuple(sorted({x for line in lines for x in line.x}))
    return Panel(
        title=f"predicted, concurrency {and_list([str(q.concurrency) for q in ps])} "
        f"(peak {ps[0].peak_concurrency})",
        x_label=load_axis(open_loop=False),
        y_label=RATIO_LABEL,
        lines=tuple(lines),
        refs=(BREAK_EVEN,),
        x_ticks=all_x,
        x_tick_labels=tick_labels(all_x),
        x_log=True,
        y_ratio=True,
    )


def _schedule_line(p: Plan) -> Line:
    """The K the plan runs: the engine's schedule by batch size where it has one (steps that
    change at each range's first batch size, closed at the last one), else K per concurrency."""
    if not p.batch_schedule:
        ks = tuple(float(row.k) for row in p.rows)
        return Line("K per concurrency", _concurrencies(p), ks, role="schedule", steps=True)
    last_hi, last_k = p.batch_schedule[-1][1:]
    return Line(
        label="K by batch size (engine schedule)",
        x=(*(float(lo) for lo, _, _ in p.batch_schedule), float(last_hi)),
        y=(*(float(k) for _, _, k in p.batch_schedule), float(last_k)),
        role="schedule",
        steps=True,
    )


def _k_panel(ps: tuple[Plan, ...]) -> Panel:
    sched = _schedule_line(ps[0])
    xs = _concurrencies(ps[0])
    at = and_list([str(q.concurrency) for q in ps])
    shared = f"\none policy for the plans at {at}" if len(ps) > 1 else ""
    return Panel(
        title=f"recommended K{shared}",
        x_label="batch size = concurrency (sequences)",
        y_label=K_LABEL,
        lines=(sched,),
        x_ticks=xs,
        x_tick_labels=tick_labels(xs),
        x_log=True,
        y_range=(-0.3, float(max([*sched.y, 1.0])) + 0.5),
    )


def _speedup_caption(ps: tuple[Plan, ...], mine: Sequence[BenchResult]) -> str:
    p = ps[0]
    shared = (
        f" {plans_at(ps).capitalize()} ship the same policy: it is drawn once and applies to "
        f"{'both' if len(ps) == 2 else 'all of them'}."
        if len(ps) > 1
        else ""
    )
    on_axis = (
        f" Measured on the plan's deployment (model {p.served_model}): "
        + ", ".join(f"bench run {b.run_id}" for b in mine)
        + ", wall clock."
        if mine
        else ""
    )
    return (
        f"{p.deployment}. Policy: {p.policy}.{shared} {BOTH_SIDES_PLAN} (K per concurrency), "
        "dashed: one fixed K; speedup = candidate ÷ baseline throughput in paired simulations, "
        f"model time.{on_axis}"
    )


def plan_speedup_chart(plans: Plan | Sequence[Plan], measured: Sequence[BenchResult] = ()) -> Chart:
    """Predicted speedup of the shipped policy (K per concurrency) and of one fixed K, with the
    1× break-even; beside it, the policy's K against batch size.

    ``plans`` ship one policy (:func:`same_policy`): its line and its K panel are drawn once, with
    each plan's fixed K. A bench in ``measured`` of the plans' deployment
    (:func:`~alphagate.report.charts.where.same_deployment`) is drawn on the same axis; any other
    is left out.
    """
    ps = as_plans(plans)
    if len({_policy_key(p) for p in ps}) != 1:
        raise ValueError("plan_speedup_chart: the plans ship different policies")
    mine = [b for b in measured if same_deployment(ps[0], b)]
    overlay = [line for b in mine if (line := _measured_speedup_line(b)) is not None]
    lines = [*_policy_lines(ps), *_fixed_k_lines(ps), *overlay]
    return Chart(
        key="speedup_vs_concurrency",
        title=f"Predicted speedup against concurrency — {_verdicts(ps)}",
        caption=_speedup_caption(ps, mine),
        panels=(_speedup_panel(ps, lines), _k_panel(ps)),
    )


# ---------------------------------------------------------------- latency
def _itl_lines(p: Plan) -> tuple[Line, ...]:
    """P99 (solid) and P50 (dashed) ITL per token, off (black) and with the policy."""
    xs, rows = _concurrencies(p), p.rows
    return (
        Line("P99 off (baseline)", xs, tuple(r.itl_p99_off_ms for r in rows), role="baseline"),
        Line(
            "P50 off (baseline)",
            xs,
            tuple(r.itl_p50_off_ms for r in rows),
            role="baseline",
            dashed=True,
        ),
        Line("P99 with the policy", xs, tuple(r.itl_p99_on_ms for r in rows), group="on"),
        Line(
            "P50 with the policy",
            xs,
            tuple(r.itl_p50_on_ms for r in rows),
            dashed=True,
            group="on",
        ),
    )


def plan_itl_chart(plans: Plan | Sequence[Plan]) -> Chart:
    """Predicted P50 and P99 ITL per token, with and without the policy, per concurrency; plans
    that predict the same figures (:func:`same_itl`) share one chart."""
    ps = as_plans(plans)
    if len({_itl_key(p) for p in ps}) != 1:
        raise ValueError("plan_itl_chart: the plans predict different latencies")
    p = ps[0]
    xs = _concurrencies(p)
    refs = (HLine(p.slo_p99_itl_ms, "P99 SLO"),) if p.slo_p99_itl_ms else ()
    shared = (
        f" One chart for {plans_at(ps)}: the same policy, the same figures." if len(ps) > 1 else ""
    )
    return Chart(
        key="itl_per_token",
        title="Predicted P99 and P50 ITL per token, with and without speculation",
        caption=f"{p.deployment}. {BOTH_SIDES_PLAN}; solid P99, dashed P50. ITL per token = chunk "
        f"gap ÷ tokens in the chunk.{shared}",
        panels=(
            Panel(
                title=f"predicted, policy of {plans_at(ps, article=False)}",
                x_label=load_axis(open_loop=False),
                y_label=ITL_LABEL,
                lines=_itl_lines(p),
                refs=refs,
                x_ticks=xs,
                x_tick_labels=tick_labels(xs),
                x_log=True,
                y_log=True,
            ),
        ),
    )
