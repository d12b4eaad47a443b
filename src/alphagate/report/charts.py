"""What each plot shows, as data: typed results in, :class:`Chart` specifications out.

A chart is a list of panels; a panel is lines (or grouped bars) with their labels, reference lines
(the 1× break-even, a gate, an SLO) and the x ticks to show — the loads actually run, never a
power-of-two grid. :mod:`alphagate.report.plots` draws a chart (PNG for ``--plot``, inline SVG for
the HTML report); keeping the numbers here lets the tests check them without reading pixels.

Latency accounting is the one stated in the bench and simulator records: ITL per token = the gap
before a streamed chunk ÷ the tokens in it, one sample per token. Acceptance by position follows
vLLM's counters (``vllm/v1/spec_decode/metrics.py``): accepted at position i counts drafts whose
first i tokens were all accepted, so the conditional α_i is accepted_i ÷ accepted_{i−1} (drafts
for i = 1), a binomial proportion with a Wilson interval (:func:`alphagate.theory.wilson_interval`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from alphagate import theory
from alphagate.bench.chunks import chunk_acceptance, itl_per_token_samples
from alphagate.bench.records import BenchResult, LevelSummary, RequestRecord
from alphagate.core.records import Interval
from alphagate.measure.estimate import AcceptanceEstimate, estimate
from alphagate.measure.results import MeasureResult
from alphagate.plan.records import ClassRow, Plan
from alphagate.sim.results import CDF_LEVELS, weighted_quantiles
from alphagate.sim.sweep import SweepCell, SweepResult
from alphagate.theory.answers import TableAnswer

__all__ = [
    "Chart",
    "HLine",
    "Line",
    "MeasuredAlpha",
    "Panel",
    "bench_acceptance_length_chart",
    "bench_alpha_chart",
    "bench_charts",
    "bench_itl_cdf_chart",
    "bench_itl_chart",
    "bench_model",
    "bench_sides",
    "bench_speedup_chart",
    "bench_where",
    "elsewhere",
    "measure_acceptance_length_chart",
    "measure_alpha_chart",
    "plan_acceptance_length_chart",
    "plan_alpha_chart",
    "plan_charts",
    "plan_deployment_name",
    "plan_itl_chart",
    "plan_speedup_chart",
    "same_classes",
    "same_deployment",
    "same_itl",
    "same_policy",
    "sweep_acceptance_length_chart",
    "sweep_alpha_chart",
    "sweep_charts",
    "sweep_itl_cdf_chart",
    "sweep_itl_chart",
    "sweep_speedup_chart",
    "table_speedup_chart",
]

NAN = math.nan
RATIO_LABEL = "throughput speedup (×, speculative ÷ off)"
ITL_LABEL = "ITL per token (ms)"
ALPHA_LABEL = "conditional α (probability)"
TAU_LABEL = "tokens per target pass (τ, incl. bonus)"
SHARE_LABEL = "share of target passes"
K_LABEL = "K (draft tokens per step)"


@dataclass(frozen=True)
class Line:
    """One series. ``baseline`` lines (no speculation) are black; lines that share ``group`` share
    a colour (a class's P50 and P99). ``low``/``high`` draw an interval around each point (a
    shaded band under the curve with ``band``: a prediction's range over the step-time
    constants); ``points`` draws markers only (a measurement at one or two loads is not a
    curve)."""

    label: str
    x: tuple[float, ...]
    y: tuple[float, ...]
    baseline: bool = False
    dashed: bool = False
    group: str | None = None
    low: tuple[float, ...] | None = None
    high: tuple[float, ...] | None = None
    point_labels: tuple[str, ...] | None = None
    steps: bool = False
    points: bool = False
    band: bool = False


@dataclass(frozen=True)
class HLine:
    """A horizontal reference: the 1× break-even, a gate threshold, an SLO."""

    y: float
    label: str


@dataclass(frozen=True)
class Panel:
    title: str
    x_label: str
    y_label: str
    lines: tuple[Line, ...]
    refs: tuple[HLine, ...] = ()
    x_ticks: tuple[float, ...] = ()
    x_tick_labels: tuple[str, ...] = ()
    x_log: bool = False
    y_log: bool = False
    y_ratio: bool = False
    y_range: tuple[float, float] | None = None
    bars: bool = False


@dataclass(frozen=True)
class Chart:
    """One figure: ``key`` names its PNG file and its anchor in the report."""

    key: str
    title: str
    caption: str
    panels: tuple[Panel, ...]
    share_y: bool = False
    notes: tuple[str, ...] = field(default=())


def _f(x: float | None) -> float:
    return NAN if x is None else float(x)


def _load_name(x: float) -> str:
    return f"{x:g}"


def _load_axis(kind: str) -> str:
    return "concurrency (users)" if kind == "concurrency" else kind


# ---------------------------------------------------------------- acceptance by position
def _positions(k: int) -> tuple[float, ...]:
    return tuple(float(i) for i in range(1, k + 1))


def _alpha_line(label: str, est: AcceptanceEstimate, group: str | None = None) -> Line:
    """Conditional α per position with its 95% Wilson interval (from the estimate's counts)."""
    cis = est.alpha_by_pos_ci
    return Line(
        label=label,
        x=_positions(len(est.alpha_by_pos)),
        y=tuple(_f(a) for a in est.alpha_by_pos),
        low=tuple(NAN if ci is None else ci.low for ci in cis),
        high=tuple(NAN if ci is None else ci.high for ci in cis),
        group=group,
    )


def _alpha_panel(title: str, lines: list[Line], refs: tuple[HLine, ...] = ()) -> Panel:
    k = max((len(line.x) for line in lines), default=1)
    return Panel(
        title=title,
        x_label="draft position (1 = first draft)",
        y_label=ALPHA_LABEL,
        lines=tuple(lines),
        refs=refs,
        x_ticks=_positions(k),
        x_tick_labels=tuple(str(i) for i in range(1, k + 1)),
        y_range=(0.0, 1.0),
    )


def _histogram_line(label: str, est: AcceptanceEstimate, group: str | None = None) -> Line | None:
    """Share of steps emitting j = 1..K+1 tokens, from the estimate's histogram of accepted drafts."""
    h = est.acceptance_histogram
    total = sum(h)
    if not h or total <= 0:
        return None
    return _pmf_line(label, [x / total for x in h], group)


def _pmf_line(label: str, pmf: Sequence[float], group: str | None = None) -> Line:
    return Line(
        label=label,
        x=tuple(float(j) for j in range(1, len(pmf) + 1)),
        y=tuple(float(p) for p in pmf),
        group=group,
    )


def _pmf_panel(title: str, lines: list[Line]) -> Panel:
    n = max((len(line.x) for line in lines), default=1)
    return Panel(
        title=title,
        x_label=TAU_LABEL,
        y_label=SHARE_LABEL,
        lines=tuple(lines),
        x_ticks=tuple(float(j) for j in range(1, n + 1)),
        x_tick_labels=tuple(str(j) for j in range(1, n + 1)),
        y_range=(0.0, 1.0),
        bars=True,
    )


# ---------------------------------------------------------------- simulate sweeps
BOTH_SIDES_SWEEP = (
    "Baseline: the same requests with speculation off (black); candidate: speculation at each "
    "acceptance setting"
)


def _sweep_loads(r: SweepResult) -> tuple[tuple[float, ...], str]:
    loads = tuple(row.load for row in r.rows)
    return loads, r.rows[0].load_kind if r.rows else "load"


def _sweep_series(r: SweepResult, k: int, mix: str, value: str) -> tuple[list[float], list[float]]:
    xs, ys = [], []
    for c in r.cells:
        if c.k == k and c.mix == mix:
            xs.append(c.load)
            if value == "speedup":
                ys.append(_f(c.speedup.throughput_speedup))
            else:
                ys.append(_f(getattr(c.spec.itl_per_token_ms, value)))
    return xs, ys


def _band(intervals: Sequence[Interval | None]) -> dict[str, Any]:
    """``low``/``high``/``band`` for a predicted line whose every point has a closed range."""
    if not intervals or any(iv is None or iv.low is None or iv.high is None for iv in intervals):
        return {}
    return {
        "low": tuple(_f(iv.low) for iv in intervals if iv),
        "high": tuple(_f(iv.high) for iv in intervals if iv),
        "band": True,
    }


def sweep_speedup_chart(r: SweepResult) -> Chart:
    """Throughput speedup against load, one panel per K, one line per acceptance setting."""
    loads, kind = _sweep_loads(r)
    panels = []
    for k in r.ks:
        lines = []
        for m in r.mixes:
            xs, ys = _sweep_series(r, k, m, "speedup")
            ivs = [c.throughput_speedup_interval for c in r.cells if c.k == k and c.mix == m]
            lines.append(Line(label=m, x=tuple(xs), y=tuple(ys), group=m, **_band(ivs)))
        panels.append(
            Panel(
                title=f"simulated, K = {k}",
                x_label=_load_axis(kind),
                y_label=RATIO_LABEL,
                lines=tuple(lines),
                refs=(HLine(1.0, "break-even (1×)"),),
                x_ticks=loads,
                x_tick_labels=tuple(_load_name(x) for x in loads),
                x_log=True,
                y_ratio=True,
            )
        )
    return Chart(
        key="speedup_vs_load",
        title="Simulated throughput speedup against load",
        caption=f"{r.deployment}. {BOTH_SIDES_SWEEP}; speedup = candidate ÷ baseline throughput "
        "in paired simulations. Below 1× speculation loses."
        + (" Shaded: the range over the step-time constants' ranges." if r.ranges_origin else ""),
        panels=tuple(panels),
        share_y=True,
    )


def _sweep_itl_panels(r: SweepResult, pct: str) -> list[Panel]:
    loads, kind = _sweep_loads(r)
    base = tuple(_f(getattr(row.baseline.itl_per_token_ms, pct)) for row in r.rows)
    panels = []
    for k in r.ks:
        lines = [Line(label="off (no speculation)", x=loads, y=base, baseline=True)]
        for m in r.mixes:
            xs, ys = _sweep_series(r, k, m, pct)
            lines.append(Line(label=m, x=tuple(xs), y=tuple(ys), group=m))
        panels.append(
            Panel(
                title=f"{pct.upper()} ITL per token, K = {k}",
                x_label=_load_axis(kind),
                y_label=ITL_LABEL,
                lines=tuple(lines),
                x_ticks=loads,
                x_tick_labels=tuple(_load_name(x) for x in loads),
                x_log=True,
                y_log=True,
            )
        )
    return panels


def sweep_itl_chart(r: SweepResult, percentiles: tuple[str, ...] = ("p99", "p50")) -> Chart:
    """P99 (and P50) ITL per token against load: off vs each acceptance setting, per K."""
    panels = [p for pct in percentiles for p in _sweep_itl_panels(r, pct)]
    names = " and ".join(p.upper() for p in percentiles)
    return Chart(
        key="p99_itl_per_token" if percentiles == ("p99",) else "itl_per_token",
        title=f"Simulated {names} ITL per token, with and without speculation",
        caption=f"{r.deployment}. {BOTH_SIDES_SWEEP}. ITL per token = chunk gap ÷ tokens in the "
        "chunk.",
        panels=tuple(panels),
        share_y=True,
    )


def sweep_itl_cdf_chart(r: SweepResult, k: int | None = None) -> Chart:
    """Per-token ITL CDF at the lowest and highest load: off vs each acceptance setting."""
    kk = k if k is not None else max(r.ks)
    picks = [r.rows[0], r.rows[-1]] if len(r.rows) > 1 else list(r.rows)
    levels = tuple(CDF_LEVELS)
    panels = []
    for row in picks:
        lines = [
            Line(
                label="off (no speculation)",
                x=tuple(row.baseline.itl_per_token_cdf_ms),
                y=levels,
                baseline=True,
            )
        ]
        for c in r.cells:
            if c.load == row.load and c.k == kk:
                lines.append(
                    Line(label=c.mix, x=tuple(c.spec.itl_per_token_cdf_ms), y=levels, group=c.mix)
                )
        panels.append(
            Panel(
                title=f"{row.load_kind} {row.load:g}, K = {kk}",
                x_label=ITL_LABEL,
                y_label="fraction of tokens",
                lines=tuple(lines),
                x_log=True,
                y_range=(0.0, 1.0),
            )
        )
    return Chart(
        key="itl_per_token_cdf",
        title="Simulated ITL per token, cumulative distribution",
        caption=f"{r.deployment}. {BOTH_SIDES_SWEEP}. A curve to the left is faster; the top "
        "right shows the tail.",
        panels=tuple(panels),
    )


def _cell_estimate(c: SweepCell) -> AcceptanceEstimate | None:
    """The simulator's counters of one cell, as vLLM would count them, with intervals."""
    s = c.spec
    if not s.num_drafts or not s.num_accepted_per_pos:
        return None
    per_pos = [float(x) for x in s.num_accepted_per_pos]
    return estimate(
        float(s.num_drafts), float(s.num_draft_tokens), float(s.num_accepted_tokens), per_pos, k=c.k
    )


def _sweep_estimates(r: SweepResult) -> tuple[str, list[tuple[str, AcceptanceEstimate]]]:
    """(where, [(mix, estimate)]) at the lowest load and the largest K."""
    load, k = r.rows[0].load, max(r.ks)
    out = []
    for m in r.mixes:
        c = r.cell(load, k, m)
        est = _cell_estimate(c) if c is not None else None
        if est is not None:
            out.append((m, est))
    return f"{r.rows[0].load_kind} {load:g}, K = {k}", out


def sweep_alpha_chart(r: SweepResult) -> Chart | None:
    """Realised α by position per acceptance setting at the lowest load and largest K."""
    where, ests = _sweep_estimates(r)
    if not ests:
        return None
    return Chart(
        key="alpha_by_position",
        title="Simulated α by draft position",
        caption=f"{r.deployment}, {where}. Realised in the simulator's acceptance draws, with 95% "
        "Wilson intervals over its drafts.",
        panels=(_alpha_panel(f"simulated, {where}", [_alpha_line(m, e, m) for m, e in ests]),),
    )


def sweep_acceptance_length_chart(r: SweepResult) -> Chart | None:
    """Tokens per target pass (1..K+1) per acceptance setting at the lowest load and largest K."""
    where, ests = _sweep_estimates(r)
    lines = [line for m, e in ests if (line := _histogram_line(m, e, m)) is not None]
    if not lines:
        return None
    return Chart(
        key="acceptance_length",
        title="Simulated acceptance length",
        caption=f"{r.deployment}, {where}: how many tokens each verify pass emits (1 = the first "
        "draft was rejected).",
        panels=(_pmf_panel(f"simulated, {where}", lines),),
    )


# ---------------------------------------------------------------- rollout plans
BOTH_SIDES_PLAN = (
    "Baseline: the same requests with speculation off (black); candidate: the plan's policy"
)


def _plan_k_at_target(p: Plan) -> int:
    k = next((row.k for row in p.rows if row.concurrency == p.concurrency), 0)
    return k if k > 0 else (p.gate.k if p.gate is not None else p.fixed_k)


def _plan_x(p: Plan) -> tuple[tuple[float, ...], tuple[str, ...]]:
    xs = tuple(float(row.concurrency) for row in p.rows)
    return xs, tuple(_load_name(x) for x in xs)


def _as_plans(p: Plan | Sequence[Plan]) -> tuple[Plan, ...]:
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


def _groups(plans: Sequence[Plan], key: Callable[[Plan], object]) -> list[tuple[Plan, ...]]:
    out: dict[object, list[Plan]] = {}
    for p in plans:
        out.setdefault(key(p), []).append(p)
    return [tuple(g) for g in out.values()]


def same_policy(plans: Sequence[Plan]) -> list[tuple[Plan, ...]]:
    """The plans grouped by the policy they ship (deployment, K schedule, K per concurrency), in
    order: plans of one group draw one speedup chart and one recommended-K panel."""
    return _groups(plans, _policy_key)


def same_itl(plans: Sequence[Plan]) -> list[tuple[Plan, ...]]:
    """The plans grouped by the latencies they predict: the same policy and the same figures."""
    return _groups(plans, _itl_key)


def _and(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _at(plans: Sequence[Plan]) -> str:
    """'the plan at concurrency 64' or 'the plans at concurrency 64 and 256'."""
    cs = _and([str(p.concurrency) for p in plans])
    return f"the plan{'s' if len(plans) > 1 else ''} at concurrency {cs}"


def _verdicts(plans: Sequence[Plan]) -> str:
    if len({p.verdict for p in plans}) == 1:
        return f"{'plans' if len(plans) > 1 else 'plan'} {plans[0].verdict.upper()}"
    return "; ".join(f"plan at {p.concurrency}: {p.verdict.upper()}" for p in plans)


def plan_deployment_name(p: Plan) -> str:
    """The plan's deployment in a few words: model, dtype, GPUs."""
    d = p.deployment_detail
    return f"{d.model} {d.weight_dtype} on {d.tp}× {d.gpu}"


def same_deployment(p: Plan, b: BenchResult) -> bool:
    """Whether a bench measured the plan's deployment: it sent the plan's served model name (the
    rule ``gate`` applies; a bench that sent no model name is not known to be the plan's)."""
    return bench_model(b) == p.served_model


def _measured_speedup_line(b: BenchResult) -> Line | None:
    """A bench's throughput speedup at its closed-loop levels, for the plan's concurrency axis."""
    by_level = {lv.level: lv.concurrency for lv in b.levels if lv.rate is None}
    pts = [
        (float(c), _f(cmp.speedups.throughput_speedup))
        for cmp in b.comparisons
        if (c := by_level.get(cmp.level)) is not None
    ]
    if not pts:
        return None
    pts.sort()
    xs = tuple(x for x, _ in pts)
    return Line(
        label=f"measured throughput, bench run {b.run_id}",
        x=xs,
        y=tuple(y for _, y in pts),
        group=f"measured {b.run_id}",
        points=_few(xs),
    )


def plan_speedup_chart(plans: Plan | Sequence[Plan], measured: Sequence[BenchResult] = ()) -> Chart:
    """Predicted speedup of the shipped policy (K per concurrency) and of one fixed K, with the
    1× break-even; beside it, the policy's K against batch size.

    ``plans`` ship one policy (:func:`same_policy`): its line and its K panel are drawn once, with
    each plan's fixed K. A bench in ``measured`` of the plans' deployment
    (:func:`same_deployment`) is drawn on the same axis; any other is left out.
    """
    ps = _as_plans(plans)
    if len({_policy_key(p) for p in ps}) != 1:
        raise ValueError("plan_speedup_chart: the plans ship different policies")
    p = ps[0]
    xs, ticks = _plan_x(p)
    policies = list(dict.fromkeys(tuple(row.throughput_speedup for row in q.rows) for q in ps))
    lines: list[Line] = []
    for i, ys in enumerate(policies):
        owners = [q for q in ps if tuple(row.throughput_speedup for row in q.rows) == ys]
        suffix = "" if len(policies) == 1 else f" ({_at(owners)})"
        lines.append(
            Line(
                label=f"policy (K per concurrency){suffix}",
                x=xs,
                y=ys,
                point_labels=tuple(f"K={row.k}" for row in p.rows) if i == 0 else None,
                group=f"policy {i}",
                **_band([row.throughput_speedup_interval for row in owners[0].rows]),
            )
        )
    fixed = list(dict.fromkeys((q.fixed_k, tuple(r.fixed_k_speedup for r in q.rows)) for q in ps))
    for k, ys in fixed:
        owners = [q for q in ps if q.fixed_k == k]
        suffix = "" if len(ps) == 1 else f" ({_at(owners).removeprefix('the ')})"
        lines.append(
            Line(label=f"one fixed K = {k}{suffix}", x=xs, y=ys, dashed=True, group=f"fixed {k}")
        )
    mine = [b for b in measured if same_deployment(p, b)]
    lines += [line for b in mine if (line := _measured_speedup_line(b)) is not None]
    all_x = tuple(sorted({x for line in lines for x in line.x}))
    targets = _and([str(q.concurrency) for q in ps])
    speed = Panel(
        title=f"predicted, concurrency {targets} (peak {p.peak_concurrency})",
        x_label="concurrency (users)",
        y_label=RATIO_LABEL,
        lines=tuple(lines),
        refs=(HLine(1.0, "break-even (1×)"),),
        x_ticks=all_x,
        x_tick_labels=tuple(_load_name(x) for x in all_x),
        x_log=True,
        y_ratio=True,
    )
    if p.batch_schedule:
        # drawn as steps that change at each range's first batch size, closed at the last one
        last_hi, last_k = p.batch_schedule[-1][1:]
        sched = Line(
            label="K by batch size (engine schedule)",
            x=(*(float(lo) for lo, _, _ in p.batch_schedule), float(last_hi)),
            y=(*(float(k) for _, _, k in p.batch_schedule), float(last_k)),
            steps=True,
        )
    else:
        sched = Line(
            label="K per concurrency",
            x=xs,
            y=tuple(float(row.k) for row in p.rows),
            steps=True,
        )
    k_panel = Panel(
        title="recommended K"
        + (
            f"\none policy for the plans at {_and([str(q.concurrency) for q in ps])}"
            if len(ps) > 1
            else ""
        ),
        x_label="batch size = concurrency (sequences)",
        y_label=K_LABEL,
        lines=(sched,),
        x_ticks=xs,
        x_tick_labels=ticks,
        x_log=True,
        y_range=(-0.3, float(max([*sched.y, 1.0])) + 0.5),
    )
    shared = (
        f" {_at(ps).capitalize()} ship the same policy: it is drawn once and applies to "
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
    return Chart(
        key="speedup_vs_concurrency",
        title=f"Predicted speedup against concurrency — {_verdicts(ps)}",
        caption=f"{p.deployment}. Policy: {p.policy}.{shared} {BOTH_SIDES_PLAN} (K per "
        "concurrency), dashed: one fixed K; speedup = candidate ÷ baseline throughput in paired "
        f"simulations, model time.{on_axis}",
        panels=(speed, k_panel),
    )


def plan_itl_chart(plans: Plan | Sequence[Plan]) -> Chart:
    """Predicted P50 and P99 ITL per token, with and without the policy, per concurrency; plans
    that predict the same figures (:func:`same_itl`) share one chart."""
    ps = _as_plans(plans)
    if len({_itl_key(p) for p in ps}) != 1:
        raise ValueError("plan_itl_chart: the plans predict different latencies")
    p = ps[0]
    xs, ticks = _plan_x(p)
    rows = p.rows
    lines = (
        Line("P99 off (baseline)", xs, tuple(r.itl_p99_off_ms for r in rows), baseline=True),
        Line(
            "P50 off (baseline)",
            xs,
            tuple(r.itl_p50_off_ms for r in rows),
            baseline=True,
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
    refs = (HLine(p.slo_p99_itl_ms, "P99 SLO"),) if p.slo_p99_itl_ms else ()
    shared = f" One chart for {_at(ps)}: the same policy, the same figures." if len(ps) > 1 else ""
    return Chart(
        key="itl_per_token",
        title="Predicted P99 and P50 ITL per token, with and without speculation",
        caption=f"{p.deployment}. {BOTH_SIDES_PLAN}; solid P99, dashed P50. ITL per token = chunk "
        f"gap ÷ tokens in the chunk.{shared}",
        panels=(
            Panel(
                title=f"predicted, policy of {_at(ps).removeprefix('the ')}",
                x_label="concurrency (users)",
                y_label=ITL_LABEL,
                lines=lines,
                refs=refs,
                x_ticks=xs,
                x_tick_labels=ticks,
                x_log=True,
                y_log=True,
            ),
        ),
    )


def _class_conditional(c: ClassRow, k: int) -> list[float]:
    """A class's conditional α at positions 1..k: the per-position α given (its last value
    repeated past its end), else its one α."""
    if c.alpha_by_pos:
        a = list(c.alpha_by_pos)
        return (a + [a[-1]] * k)[:k]
    return [c.alpha] * k


def _informative(c: ClassRow) -> bool:
    """Whether a class's planned α says more than one number: per position, or a prior's range."""
    return bool(c.alpha_by_pos) or c.alpha_low != c.alpha_high


def _classes_key(p: Plan) -> tuple[object, ...]:
    return tuple(
        (c.name, c.alpha, c.alpha_by_pos, c.alpha_low, c.alpha_high, c.alpha_source)
        for c in p.classes
    )


def same_classes(plans: Sequence[Plan]) -> list[tuple[Plan, ...]]:
    """The plans grouped by the α they assume per class: one α chart per group."""
    return _groups(plans, _classes_key)


@dataclass(frozen=True)
class MeasuredAlpha:
    """A measured α by position to draw beside the plan's: of a class (None: all traffic), from
    a source in a few words (a bench run, a measure verb); ``elsewhere`` says where it was
    measured when that is not shown to be the plan's deployment (:func:`elsewhere`)."""

    cls: str | None
    source: str
    estimate: AcceptanceEstimate
    elsewhere: str | None = None


def plan_alpha_chart(
    plans: Plan | Sequence[Plan], measured: Sequence[MeasuredAlpha] = ()
) -> Chart | None:
    """α by position per class as the plan assumes it — the values given per position, or a
    prior's range — beside the α measured by position (``measured``), with 95% intervals.

    None when there is nothing to read in it: every class has one α with no range and nothing
    measured is given (the α sources table says the same).
    """
    ps = _as_plans(plans)
    if len({_classes_key(p) for p in ps}) != 1:
        raise ValueError("plan_alpha_chart: the plans assume different α")
    p = ps[0]
    series = [m for m in measured if m.estimate.num_drafts > 0 and m.estimate.alpha_by_pos]
    if not series and not any(_informative(c) for c in p.classes):
        return None
    k = max(
        [*(_plan_k_at_target(q) for q in ps), *(len(m.estimate.alpha_by_pos) for m in series), 1]
    )
    lines = []
    for c in p.classes:
        ranged = c.alpha_source == "prior"
        lines.append(
            Line(
                label=f"{c.name} planned ({c.alpha_source}{', prior range' if ranged else ''})",
                x=_positions(k),
                y=tuple(_class_conditional(c, k)),
                low=(c.alpha_low,) * k if ranged else None,
                high=(c.alpha_high,) * k if ranged else None,
                dashed=True,
                group=c.name,
            )
        )
    for m in series:
        name = m.cls or "all traffic"
        lines.append(_alpha_line(f"{name} measured ({m.source})", m.estimate, name))
    gates = list(dict.fromkeys(q.gate.alpha_min for q in ps if q.gate is not None))
    refs = tuple(HLine(g, f"gate α ≥ {g:.2f}") for g in gates)
    gate = " The gate line is the α each class must clear." if gates else ""
    others = list(dict.fromkeys(m.elsewhere for m in series if m.elsewhere))
    where = (
        " " + "; ".join(others) + ": compare the shape by position, not the level."
        if others
        else ""
    )
    measured_note = (
        " Measured: by position with 95% Wilson intervals over the drafts that reached it." + where
        if series
        else ""
    )
    return Chart(
        key="alpha_by_position",
        title="α by position per class — " + ("planned and measured" if series else "as planned"),
        caption="Planned (dashed): the α given per position, one α repeated at every position, "
        "or a prior with its documented range." + measured_note + gate,
        panels=(
            _alpha_panel(
                f"{_at(ps).removeprefix('the ')}, K = {_and([str(_plan_k_at_target(q)) for q in ps])}",
                lines,
                refs,
            ),
        ),
    )


def plan_acceptance_length_chart(p: Plan) -> Chart:
    """Predicted tokens per target pass per class at the K run at the target."""
    k = _plan_k_at_target(p)
    lines = []
    for c in p.classes:
        per_pos = theory.unconditional_from_conditional(_class_conditional(c, k))
        lines.append(_pmf_line(c.name, list(theory.acceptance_length_pmf(per_pos)), group=c.name))
    return Chart(
        key="acceptance_length",
        title="Acceptance length per class — predicted",
        caption=f"K = {k}; P(j tokens) = α_1…α_(j−1)·(1 − α_j), all K accepted + bonus = K + 1.",
        panels=(_pmf_panel(f"predicted from α, K = {k}", lines),),
    )


# ---------------------------------------------------------------- bench A/B runs
def _bench_x(levels: Iterable[LevelSummary]) -> dict[str, float]:
    """A level's x: its concurrency (closed loop) or its rate; in level order."""
    out: dict[str, float] = {}
    for lv in levels:
        if lv.level not in out:
            out[lv.level] = float(lv.rate if lv.rate is not None else lv.concurrency or 0)
    return out


def _bench_axis(b: BenchResult) -> str:
    closed = all(lv.rate is None for lv in b.levels)
    return "concurrency (users)" if closed else "request rate (req/s)"


def _bench_name(b: BenchResult) -> str:
    urls = {lv.target: lv.url for lv in b.levels}
    if "candidate" in urls:
        return f"measured: {urls['candidate']} vs {urls.get('baseline', '?')}"
    return f"measured: {next(iter(urls.values()), '?')}"


def _few(xs: Sequence[float]) -> bool:
    """One or two loads: points to read, not a curve to follow."""
    return len(set(xs)) <= 2


def bench_model(b: BenchResult) -> str | None:
    """The model name the bench's requests carried, None when they named none."""
    return b.model or None


def _drafts(b: BenchResult, target: str) -> bool:
    return any(
        lv.acceptance is not None and lv.acceptance.num_drafts > 0
        for lv in b.levels
        if lv.target == target
    )


def bench_sides(b: BenchResult) -> str:
    """Which server is the baseline (speculation off) and which the candidate, in words."""
    urls = {lv.target: lv.url for lv in b.levels}
    if "candidate" not in urls:
        return f"One server, {next(iter(urls.values()), '?')}: no baseline to compare with"
    base = "its counters show drafts" if _drafts(b, "baseline") else "speculation off"
    cand = "speculative" if _drafts(b, "candidate") else "speculative; no drafts counted"
    return (
        f"Baseline: {urls.get('baseline', '?')} ({base}, black); candidate: "
        f"{urls['candidate']} ({cand})"
    )


def bench_where(b: BenchResult) -> str:
    """Where a bench measured: the model it sent, else its candidate's (or only) server."""
    model = bench_model(b)
    urls = {lv.target: lv.url for lv in b.levels}
    url = urls.get("candidate", next(iter(urls.values()), "?"))
    return f"model {model} at {url}" if model else f"{url} (model not recorded)"


def elsewhere(b: BenchResult, plans: Sequence[Plan]) -> str | None:
    """The clause that says a bench is not the deployment of the plans beside it ("Measured on
    …, not the plan's deployment (…)"); None when it is one plan's, or when there is no plan."""
    if not plans or any(same_deployment(p, b) for p in plans):
        return None
    deps = _and(list(dict.fromkeys(plan_deployment_name(p) for p in plans)))
    known = "not" if bench_model(b) else "not known to be"
    return f"Measured on {bench_where(b)}, {known} the plan's deployment ({deps})"


def _where_note(b: BenchResult, plans: Sequence[Plan]) -> str:
    other = elsewhere(b, plans)
    if other is not None:
        return f" {other}: compare its shape with the prediction, not its values."
    if plans:
        return f" Measured on the plan's deployment (model {bench_model(b)})."
    return ""


def bench_speedup_chart(b: BenchResult, plans: Sequence[Plan] = ()) -> Chart | None:
    """Measured candidate ÷ baseline at each level: throughput and TPOT, with the 1× line. With
    ``plans`` (the plans on the same page), a bench of another deployment says so in its panel
    title and caption."""
    if not b.comparisons:
        return None
    xmap = _bench_x(b.levels)
    comps = [c for c in b.comparisons if c.level in xmap]
    xs = tuple(xmap[c.level] for c in comps)
    few = _few(xs)
    lines = (
        Line(
            "throughput (candidate ÷ baseline)",
            xs,
            tuple(_f(c.speedups.throughput_speedup) for c in comps),
            group="throughput",
            points=few,
        ),
        Line(
            "TPOT (baseline ÷ candidate)",
            xs,
            tuple(_f(c.speedups.tpot_mean_speedup) for c in comps),
            dashed=True,
            group="tpot",
            points=few,
        ),
        Line(
            "P99 ITL per token (baseline ÷ candidate)",
            xs,
            tuple(_f(c.speedups.itl_per_token_p99_speedup) for c in comps),
            dashed=True,
            group="p99",
            points=few,
        ),
    )
    other = "\nnot the plan's deployment" if elsewhere(b, plans) else ""
    return Chart(
        key="speedup_measured",
        title="Measured speedup against concurrency",
        caption=f"{bench_sides(b)}. Run {b.run_id}, wall clock; above 1× the candidate is "
        f"better.{_where_note(b, plans)}",
        panels=(
            Panel(
                title=f"measured (bench A/B, run {b.run_id}){other}",
                x_label=_bench_axis(b),
                y_label="candidate vs baseline (×, higher = better)",
                lines=lines,
                refs=(HLine(1.0, "break-even (1×)"),),
                x_ticks=xs,
                x_tick_labels=tuple(_load_name(x) for x in xs),
                x_log=len(set(xs)) > 1 and min(xs) > 0,
                y_ratio=True,
            ),
        ),
    )


def bench_itl_chart(b: BenchResult, plans: Sequence[Plan] = ()) -> Chart | None:
    """Measured P50 and P99 ITL per token per level, for each target."""
    xmap = _bench_x(b.levels)
    lines = []
    for target in dict.fromkeys(lv.target for lv in b.levels):
        lvs = [lv for lv in b.levels if lv.target == target and lv.overall.completed]
        xs = tuple(xmap[lv.level] for lv in lvs)
        base = target == "baseline"
        for pct in ("p99", "p50"):
            lines.append(
                Line(
                    label=f"{pct.upper()} {target}",
                    x=xs,
                    y=tuple(_f(getattr(lv.overall.itl_per_token_ms, pct)) for lv in lvs),
                    baseline=base,
                    dashed=pct == "p50",
                    group=target,
                    points=_few(xs),
                )
            )
    if not any(line.x for line in lines):
        return None
    xs_all = tuple(xmap.values())
    other = "\nnot the plan's deployment" if elsewhere(b, plans) else ""
    return Chart(
        key="itl_per_token_measured",
        title="Measured P99 and P50 ITL per token, with and without speculation",
        caption=f"{bench_sides(b)}. ITL per token = chunk gap ÷ tokens in the chunk."
        f"{_where_note(b, plans)}",
        panels=(
            Panel(
                title=f"measured (bench, run {b.run_id}){other}",
                x_label=_bench_axis(b),
                y_label=ITL_LABEL,
                lines=tuple(lines),
                x_ticks=xs_all,
                x_tick_labels=tuple(_load_name(x) for x in xs_all),
                x_log=len(set(xs_all)) > 1 and min(xs_all) > 0,
                y_log=True,
            ),
        ),
    )


def bench_itl_cdf_chart(
    b: BenchResult, records: Sequence[RequestRecord], plans: Sequence[Plan] = ()
) -> Chart | None:
    """Measured per-token ITL CDF per level: baseline vs candidate, from ``requests.jsonl``."""
    mine = [r for r in records if r.run_id == b.run_id]
    panels = []
    for level in dict.fromkeys(lv.level for lv in b.levels):
        lines = []
        for target in dict.fromkeys(lv.target for lv in b.levels):
            vals, w = itl_per_token_samples(
                r for r in mine if r.level == level and r.target == target
            )
            if vals.size == 0:
                continue
            q = weighted_quantiles(vals * 1e3, w, CDF_LEVELS)
            lines.append(
                Line(
                    label=target,
                    x=tuple(float(x) for x in q),
                    y=tuple(CDF_LEVELS),
                    baseline=target == "baseline",
                    group=target,
                )
            )
        if lines:
            panels.append(
                Panel(
                    title=f"measured, level {level}",
                    x_label=ITL_LABEL,
                    y_label="fraction of tokens",
                    lines=tuple(lines),
                    x_log=True,
                    y_range=(0.0, 1.0),
                )
            )
    if not panels:
        return None
    return Chart(
        key="itl_per_token_cdf_measured",
        title="Measured ITL per token, cumulative distribution",
        caption=f"{bench_sides(b)}; {len(mine)} request records of run {b.run_id}. A curve to "
        f"the left is faster.{_where_note(b, plans)}",
        panels=tuple(panels),
    )


def _measured_levels(b: BenchResult) -> list[tuple[LevelSummary, AcceptanceEstimate]]:
    return [
        (lv, lv.acceptance)
        for lv in b.levels
        if lv.acceptance is not None and lv.acceptance.num_drafts > 0 and lv.acceptance.alpha_by_pos
    ]


def _class_records(
    b: BenchResult, records: Sequence[RequestRecord], target: str
) -> dict[str, list[RequestRecord]]:
    out: dict[str, list[RequestRecord]] = {}
    for r in records:
        if r.run_id == b.run_id and r.target == target:
            out.setdefault(r.cls or "all requests", []).append(r)
    return out


def _spec_target(b: BenchResult) -> str:
    return "candidate" if any(lv.target == "candidate" for lv in b.levels) else "default"


def _chunk_estimates(
    b: BenchResult, records: Sequence[RequestRecord] | None, k: int
) -> tuple[list[tuple[str, AcceptanceEstimate]], list[str]]:
    out, notes = [], []
    for name, recs in _class_records(b, records or [], _spec_target(b)).items():
        est, skipped = chunk_acceptance(recs, k)
        if est.num_drafts > 0:
            out.append((name, est))
        if skipped:
            notes.append(
                f"{name}: {skipped} chunks with more than K + 1 = {k + 1} tokens left out "
                "(the server merged engine steps)"
            )
    return out, notes


CHUNK_NOTE = (
    "Server counters cover every class at once; the per-class figures count the streamed chunks "
    "(one chunk per engine step; each request's first and last chunk skipped). 95% Wilson "
    "intervals, counting steps as independent draws."
)


def bench_alpha_chart(b: BenchResult, records: Sequence[RequestRecord] | None) -> Chart | None:
    """Measured α by position: from the server's counters per level (all classes together), and
    per class from the sizes of the streamed chunks; each with 95% Wilson intervals."""
    measured = _measured_levels(b)
    if not measured:
        return None
    lines = [_alpha_line(f"{lv.level} (server counters)", a) for lv, a in measured]
    panels = [_alpha_panel("all traffic, from /metrics deltas", lines)]
    k = max(a.k or len(a.alpha_by_pos) for _, a in measured)
    per_class, notes = _chunk_estimates(b, records, k)
    if per_class:
        panels.append(
            _alpha_panel(
                "per class, from the streamed chunks",
                [_alpha_line(f"{name} (tokens per chunk)", e, name) for name, e in per_class],
            )
        )
    return Chart(
        key="alpha_by_position_measured",
        title="Measured α by position per class",
        caption=f"{_bench_name(b)}. {CHUNK_NOTE}",
        panels=tuple(panels),
        notes=tuple(notes),
    )


def bench_acceptance_length_chart(
    b: BenchResult, records: Sequence[RequestRecord] | None
) -> Chart | None:
    """Measured tokens per target pass: from the counters per level, and per class from chunks."""
    measured = _measured_levels(b)
    lines = [
        line
        for lv, a in measured
        if (line := _histogram_line(f"{lv.level} (server counters)", a)) is not None
    ]
    if not lines:
        return None
    panels = [_pmf_panel("all traffic, from /metrics deltas", lines)]
    k = max(a.k or len(a.alpha_by_pos) for _, a in measured)
    per_class, _ = _chunk_estimates(b, records, k)
    chunk_lines = [
        line
        for name, e in per_class
        if (line := _histogram_line(f"{name} (tokens per chunk)", e, name)) is not None
    ]
    if chunk_lines:
        panels.append(_pmf_panel("per class, from the streamed chunks", chunk_lines))
    return Chart(
        key="acceptance_length_measured",
        title="Measured acceptance length",
        caption=f"{_bench_name(b)}. Tokens each verify pass emitted, bonus token included.",
        panels=tuple(panels),
    )


# ---------------------------------------------------------------- alphagate measure
def _measure_estimates(m: MeasureResult) -> list[tuple[str, AcceptanceEstimate]]:
    out = [(name, e) for name, e in m.classes.items() if e.num_drafts > 0]
    if m.overall is not None and m.overall.num_drafts > 0:
        out.append(("all traffic", m.overall))
    return out


def measure_alpha_chart(m: MeasureResult) -> Chart | None:
    """α by position per class (and over all traffic) from one measurement, with intervals."""
    ests = [(n, e) for n, e in _measure_estimates(m) if e.alpha_by_pos]
    if not ests:
        return None
    return Chart(
        key="alpha_by_position_measure",
        title="Measured α by position per class",
        caption=f"{m.verb}: {m.source}. 95% Wilson intervals over the drafts that reached each "
        "position.",
        panels=(_alpha_panel(m.verb, [_alpha_line(n, e, n) for n, e in ests]),),
    )


def measure_acceptance_length_chart(m: MeasureResult) -> Chart | None:
    """Tokens per target pass per class (and over all traffic) from one measurement."""
    lines = [
        line for n, e in _measure_estimates(m) if (line := _histogram_line(n, e, n)) is not None
    ]
    if not lines:
        return None
    return Chart(
        key="acceptance_length_measure",
        title="Measured acceptance length",
        caption=f"{m.verb}: {m.source}.",
        panels=(_pmf_panel(m.verb, lines),),
    )


# ---------------------------------------------------------------- closed forms
def table_speedup_chart(t: TableAnswer) -> Chart:
    """The closed-form speedup grid: speedup against α, one line per K, per verify cost."""
    panels = []
    for vi, v in enumerate(t.verify_costs):
        lines = [
            Line(label=f"K = {k}", x=tuple(t.alphas), y=tuple(t.speedup[vi][ki]), group=str(k))
            for ki, k in enumerate(t.ks)
        ]
        panels.append(
            Panel(
                title=f"closed form, c = {t.draft_cost:g}, v = {v:g}",
                x_label="conditional α (probability)",
                y_label="speedup (×, per target-step time)",
                lines=tuple(lines),
                refs=(HLine(1.0, "break-even (1×)"),),
                x_ticks=tuple(t.alphas),
                x_tick_labels=tuple(f"{a:g}" for a in t.alphas),
                y_ratio=True,
            )
        )
    return Chart(
        key="closed_form_speedup",
        title="Closed-form speedup against α",
        caption="Candidate: K drafts per step; baseline: decoding without speculation (1×). "
        "E(α, K) / (K·c + v) (Leviathan et al. 2023, Eq. 1); no batching, no load.",
        panels=tuple(panels),
        share_y=True,
    )


# ---------------------------------------------------------------- what each verb's --plot writes
def sweep_charts(r: SweepResult) -> list[Chart]:
    """``simulate --plot``: speedup, P99 ITL, the ITL CDF, α by position, acceptance length."""
    extra = [sweep_alpha_chart(r), sweep_acceptance_length_chart(r)]
    return [
        sweep_speedup_chart(r),
        sweep_itl_chart(r, ("p99",)),
        sweep_itl_cdf_chart(r),
        *(c for c in extra if c is not None),
    ]


def plan_charts(p: Plan) -> list[Chart]:
    """``plan --plot``: speedup and K against concurrency, ITL, α by position (when the plan's α
    says more than one number per class), acceptance length."""
    charts = [
        plan_speedup_chart(p),
        plan_itl_chart(p),
        plan_alpha_chart(p),
        plan_acceptance_length_chart(p),
    ]
    return [c for c in charts if c is not None]


def bench_charts(b: BenchResult, records: Sequence[RequestRecord] | None) -> list[Chart]:
    """``bench --plot``: every measured chart the run has data for."""
    charts = [
        bench_speedup_chart(b),
        bench_itl_chart(b),
        bench_itl_cdf_chart(b, records) if records else None,
        bench_alpha_chart(b, records),
        bench_acceptance_length_chart(b, records),
    ]
    return [c for c in charts if c is not None]
