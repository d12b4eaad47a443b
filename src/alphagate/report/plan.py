"""Renderings of a rollout :class:`~alphagate.plan.records.Plan`: markdown for the file (a Jinja2
template beside this module) and a compact console view that reads at 80 columns."""

from __future__ import annotations

import json

import jinja2
from rich.console import Group, RenderableType
from rich.text import Text

from alphagate.core.fmt import num
from alphagate.plan.records import Plan
from alphagate.report._fmt import LOSS, fmt_bytes, fmt_interval, fmt_x, fmt_x_marked
from alphagate.report._tables import add_columns, new_table
from alphagate.report.commands import ShellCommand
from alphagate.report.cost import const_text
from alphagate.report.reasons import settle_text, worded

__all__ = ["render_plan_console", "render_plan_markdown"]


def _a2(x: float | None) -> str:
    return num(x)


def _f1(x: float | None) -> str:
    return num(x, ".1f")


def _cross(x: float | None, search_max: int) -> str:
    if x is None:
        return f"beyond {search_max} (pays at every batch this deployment can hold)"
    if x <= 1.0:
        return "never pays"
    return f"≈{x:.0f}"


def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("alphagate.report", "templates"),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters.update(
        a2=_a2,
        f3=lambda x: f"{x:.3f}",
        x2=fmt_x,
        f1=_f1,
        g=lambda x: f"{x:g}",
        cross=_cross,
        count=lambda n: f"{n / 1e9:.3f} B" if n >= 1e9 else f"{n / 1e6:.1f} M",
        gb=fmt_bytes,
        kb=fmt_bytes,
        int_commas=lambda n: f"{int(n):,}",
        tojson=lambda o: json.dumps(o),
        iv=lambda iv, digits=2: fmt_interval(iv, digits),
        krange=lambda r: "" if r is None else str(r[0]) if r[0] == r[1] else f"{r[0]}–{r[1]}",
        const=lambda x, name: const_text(name, x),
        capitalize_first=lambda t: t[:1].upper() + t[1:],
    )
    env.globals["tail_line"] = tail_line
    env.globals["queue_line"] = queue_line
    env.globals["uncertainty_line"] = uncertainty_line
    return env


def tail_line(p: Plan) -> str:
    """The P99 watch at the target, in one sentence."""
    t = p.p99
    assert t is not None
    pool = (
        ", ".join(c.name for c in p.classes if c.name not in p.routed_away) + " only"
        if p.routed_away
        else "all traffic"
    )
    verdict = "within" if t.ok else "past"
    bound = (
        "not worse than without speculation" if t.budget == 1.0 else f"the budget {t.budget:g}×"
    ) + (f" and the {t.slo_ms:g} ms SLO" if t.slo_ms else "")
    if not t.ok and t.budget == 1.0 and not t.slo_ms:
        verdict, bound = "", "worse than without speculation"
    if t.ok and t.budget == 1.0 and not t.slo_ms:
        verdict, bound = "", bound
    action = f"; {t.action}" if t.action else ""
    return (
        f"P99 ITL per token at concurrency {t.concurrency} (K={t.k}, {pool}) "
        f"{t.off_ms:.1f} → {t.on_ms:.1f} ms ({t.ratio:.2f}×), {f'{verdict} ' if verdict else ''}"
        f"{bound}{action}"
    )


def queue_line(p: Plan) -> str:
    """Where the speculative server runs fewer sequences than the baseline, in one sentence
    ("" where it never does)."""
    held = [(r.concurrency, r.batch) for r in p.rows if r.batch is not None]
    at = "; ".join(
        f"{b.speculative} against {b.baseline} at concurrency {c}"
        for c, b in held
        if b.speculative < b.baseline
    )
    if not at:
        return ""
    return (
        f"The speculative server runs fewer sequences than the baseline — {at}: "
        "the drafter's KV shares the cache and each sequence holds its draft and lookahead "
        "slots, so its other users queue."
    )


def render_plan_markdown(plan: Plan) -> str:
    """The rollout plan as markdown (the file ``--out`` writes)."""
    return _env().get_template("plan.md.j2").render(p=worded(plan))


def _rows_table(p: Plan) -> RenderableType:
    t = add_columns(
        new_table("Predicted per concurrency (paired simulation; K = what the policy runs)"),
        "C",
        "K",
        "speedup",
        "range",
        f"K={p.fixed_k}",
        "P50 ms",
        "P99 ms off→on",
        "α_be",
        left=0,
    )
    for r in p.rows:
        worse = r.itl_p99_on_ms > r.itl_p99_off_ms and r.k > 0
        p99 = f"{r.itl_p99_off_ms:.1f}→{r.itl_p99_on_ms:.1f}"
        t.add_row(
            str(r.concurrency),
            str(r.k),
            fmt_x_marked(r.throughput_speedup),
            fmt_interval(r.throughput_speedup_interval, brackets=False),
            fmt_x_marked(r.fixed_k_speedup),
            f"{r.itl_p50_off_ms:.1f}→{r.itl_p50_on_ms:.1f}",
            f"[red]{p99} {LOSS}[/red]" if worse else p99,
            _a2(r.alpha_breakeven),
        )
    return t


def _classes_table(p: Plan) -> RenderableType:
    peak = p.peak_concurrency != p.concurrency
    t = add_columns(
        new_table("Traffic classes"),
        "class",
        "share",
        "α",
        "from",
        "gate α",
        "clears",
        f"@{p.concurrency}",
        *([f"@{p.peak_concurrency}"] if peak else []),
    )
    for c in p.classes:
        t.add_row(
            c.name,
            f"{c.share:.2f}",
            c.alpha_label,
            c.alpha_source,
            _a2(c.alpha_gate),
            "off" if c.alpha_gate is None else "yes" if c.clears_gate else f"[red]no {LOSS}[/red]",
            fmt_x_marked(c.speedup_target),
            *([fmt_x_marked(c.speedup_peak)] if peak else []),
        )
    return t


def uncertainty_line(p: Plan) -> str | None:
    """What the intervals span, in one sentence."""
    u = p.uncertainty
    if u is None:
        return None
    what = (
        f"{len(u.ranges)} step-time constants over their prior ranges"
        if u.origin == "prior"
        else "the calibrated constants ± 2 standard errors"
    )
    alpha = f" and the α priors of {', '.join(u.alpha_priors)}" if u.alpha_priors else ""
    return (
        f"ranges are every outcome of {what}{alpha} (not a confidence interval; "
        "alphagate simulate --explain-cost lists the ranges and their sources); "
        f"a range marked ? holds 1× inside it"
    )


def _uncertainty_lines(p: Plan) -> list[RenderableType]:
    u = p.uncertainty
    line = uncertainty_line(p)
    if u is None or line is None:
        return []
    out: list[RenderableType] = [Text.assemble(("Uncertainty: ", "bold"), line)]
    if u.settle_by is not None and u.settle_at is not None:
        at_target = u.settle_at == p.concurrency
        iv = u.decision_interval if at_target else u.peak_interval
        where = "the target" if at_target else "the peak"
        out.append(
            Text(
                f"At {where} {u.settle_at} the range {iv.text(suffix='×')} holds 1×: {settle_text(u.settle)}"
                + (":" if u.settle_commands else ".")
            )
        )
        out += [ShellCommand(cmd) for cmd in u.settle_commands]
    return out


def _tree_table(p: Plan) -> list[RenderableType]:
    """``--engine sglang`` with measured shapes: the best draft shape per concurrency."""
    t = p.sglang_tree
    if t is None:
        return []
    table = add_columns(
        new_table("SGLang draft shape per concurrency (steps/topk/draft tokens; closed form)"),
        "C",
        "best shape",
        "speedup",
        "best chain",
        "chain speedup",
        left=0,
    )
    for lv in t.levels:
        table.add_row(
            str(lv.concurrency),
            lv.shape.label() if lv.shape else "off",
            fmt_x_marked(lv.speedup),
            f"K={lv.chain_k}" if lv.chain_k else "off",
            fmt_x_marked(lv.chain_speedup),
        )
    if t.shipped is None:
        line = f"no measured shape gains 2% at concurrency {t.concurrency}"
    else:
        line = (
            f"{t.shipped.label()} at concurrency {t.concurrency} ({t.speedup:.2f}×; the best "
            f"chain {t.chain_speedup:.2f}×), τ ≈ {_a2(t.mean_acceptance_length)}, break-even τ "
            f"{_a2(t.tau_breakeven)}"
        )
    return [table, Text.assemble(("SGLang ships: ", "bold"), line)]


def render_plan_console(p: Plan) -> RenderableType:
    """The decision at a glance: verdict, policy, gate, tables and Stage 1 (the file has it all)."""
    p = worded(p)
    color = {"go": "green", "no-go": "red"}.get(p.verdict, "yellow")
    parts: list[RenderableType] = [
        Text(p.deployment, style="dim"),
        *(
            [Text("Calibration: " + "; ".join(p.calibration), style="yellow")]
            if p.calibration
            else []
        ),
        Text.assemble(
            ("Verdict: ", "bold"),
            (p.verdict.upper(), f"bold {color}"),
            (f" ({'; '.join(p.qualifiers)})" if p.qualifiers else "", color),
        ),
        Text(p.reason + "."),
    ]
    for c in p.change_verdict:
        parts.append(Text(f"  • {c}"))
    parts += _uncertainty_lines(p)
    parts.append(Text.assemble(("Policy: ", "bold"), p.policy))
    tree = p.sglang_tree
    shape = None if tree is None else tree.tau_gated
    if tree is not None and shape is not None:
        parts.append(
            Text.assemble(
                ("Gate: ", "bold"),
                f"τ ≥ {_a2(tree.tau_gate)} (SGLang's spec_accept_length) at concurrency "
                f"{tree.concurrency}, draft tree {shape.label()}",
            )
        )
    elif p.gate is not None:
        g = p.gate
        parts.append(
            Text.assemble(
                ("Gate: ", "bold"),
                f"ρ ≥ {g.draft_acceptance_rate_min:.3f} (α ≥ {g.alpha_min:.2f}, τ ≥ "
                f"{g.mean_acceptance_length_min:.2f}) at concurrency {g.concurrency}, K={g.k}",
            )
        )
    if p.p99 is not None:
        parts.append(Text.assemble(("Tail: ", "bold"), tail_line(p)))
    parts.append(_rows_table(p))
    if queue_line(p):
        parts.append(Text(queue_line(p), style="dim"))
    parts += [_classes_table(p), *_tree_table(p)]
    stage1 = next((s for s in p.stages if s.number == 1), None)
    if stage1 is not None:
        parts.append(Text(f"Stage 1 — {stage1.title}: {stage1.goal}", style="bold"))
        parts += [ShellCommand(cmd) for cmd in stage1.commands]
    parts.append(
        Text(
            f"{LOSS} = net loss, or a P99 worse than without speculation. Stages 0–5, memory, "
            "risks and the P99 playbook are in the markdown plan (--out).",
            style="dim",
        )
    )
    return Group(*parts)
