"""Rich renderings of ``alphagate measure`` and ``alphagate gate`` results (80 columns)."""

from __future__ import annotations

from datetime import datetime

from rich.console import Group, RenderableType
from rich.text import Text

from alphagate.core.fmt import DASH, num
from alphagate.gate.evaluate import GateResult
from alphagate.measure.estimate import AcceptanceEstimate
from alphagate.measure.results import MeasureResult
from alphagate.report._fmt import fmt_alpha, fmt_ci, loss
from alphagate.report._tables import add_columns, new_table

__all__ = ["estimate_table", "promql_lines", "render_gate", "render_measure"]


def estimate_table(title: str, e: AcceptanceEstimate) -> RenderableType:
    """ρ, τ and α with their 95% intervals, and α by position where the counters have it."""
    t = add_columns(new_table(title), "quantity", "value", "95% interval", "note")
    t.add_row("drafts (speculative steps)", f"{e.num_drafts:,.0f}", "", f"K = {e.k}")
    t.add_row(
        "ρ  draft acceptance rate",
        fmt_alpha(e.draft_acceptance_rate),
        fmt_ci(e.draft_acceptance_rate_ci),
        "accepted ÷ drafted",
    )
    t.add_row(
        "τ  mean acceptance length",
        fmt_alpha(e.mean_acceptance_length),
        fmt_ci(e.mean_acceptance_length_ci),
        "incl. bonus token",
    )
    short = e.k is not None and e.num_draft_tokens < e.k * e.num_drafts - 0.5
    t.add_row(
        "α  i.i.d. conditional",
        fmt_alpha(e.alpha_iid),
        fmt_ci(e.alpha_iid_ci),
        "position 1's (drafts < K)" if short else "the α this ρ implies",
    )
    if e.sglang_accept_length is not None:
        t.add_row(
            "τ  SGLang accept length",
            fmt_alpha(e.sglang_accept_length, 2),
            DASH,
            "no counts behind it",
        )
    parts: list[RenderableType] = [t]
    if e.num_drafts > 0:
        parts.append(Text(f"95% intervals over {e.interval_basis}", style="dim"))
    if e.alpha_by_pos:
        p = add_columns(
            new_table("By position (vLLM counters)"),
            "position",
            "accepted",
            "unconditional",
            "conditional α",
            "95% interval",
            left=0,
        )
        rows = list(
            zip(
                e.accepted_per_pos,
                e.per_position_acceptance,
                e.alpha_by_pos,
                e.alpha_by_pos_ci,
                strict=False,
            )
        )
        # positions no draft reached (variable lengths seldom reach K) are left out at the end
        while len(rows) > 1 and rows[-1][0] == 0 and rows[-1][2] is None:
            rows.pop()
        for i, (c, r, a, iv) in enumerate(rows):
            p.add_row(str(i + 1), f"{c:,.0f}", fmt_alpha(r), fmt_alpha(a), fmt_ci(iv))
        parts.append(p)
    return Group(*parts)


def _series_table(m: MeasureResult) -> RenderableType:
    t = add_columns(new_table("Over time (per step)"), "end", "replica", "drafts", "ρ", "τ", left=2)
    for pt in m.series:
        t.add_row(
            datetime.fromtimestamp(pt.end).strftime("%m-%d %H:%M:%S"),
            pt.instance or "all",
            f"{pt.num_drafts:,.0f}",
            fmt_alpha(pt.draft_acceptance_rate),
            fmt_alpha(pt.mean_acceptance_length, 2),
        )
    return t


def render_measure(m: MeasureResult) -> RenderableType:
    """The acceptance measured, with its intervals, by position, over time and by replica."""
    window = f" over {m.window_s:,.0f} s" if m.window_s else ""
    parts: list[RenderableType] = [Text(f"{m.verb}: {m.source}{window}", style="bold")]
    if m.overall is not None:
        parts.append(estimate_table("Acceptance, all traffic", m.overall))
    for name, est in m.classes.items():
        parts.append(estimate_table(f"Acceptance, class {name}", est))
    if m.replicas:
        t = add_columns(new_table("By replica"), "replica", "drafts", "ρ", "τ")
        for name, est in m.replicas.items():
            t.add_row(
                name,
                f"{est.num_drafts:,.0f}",
                fmt_alpha(est.draft_acceptance_rate),
                fmt_alpha(est.mean_acceptance_length, 2),
            )
        parts.append(t)
    if m.series:
        parts.append(_series_table(m))
    if m.counter_reset:
        parts.append(
            Text(
                "a counter went down inside the window (a restart): counted from the restart",
                style="yellow",
            )
        )
    for n in m.notes:
        parts.append(Text(n, style="dim"))
    return Group(*parts)


def promql_lines(m: MeasureResult) -> list[str]:
    """The queries a Prometheus measurement used, one per line, to print whole (``soft_wrap``:
    the terminal wraps them, so they can be copied into Grafana, also from a piped log)."""
    return ["PromQL:", *("  " + q for q in m.promql)] if m.promql else []


def render_gate(g: GateResult) -> RenderableType:
    """Each rule with its value, interval, threshold, margin and result; then the decision."""
    t = add_columns(new_table("Gate"), "rule", "value", "95% interval", "margin", "result")
    for r in g.results:
        res = {"pass": "[green]pass[/green]", "fail": loss("fail")}.get(
            r.result, "[yellow]insufficient[/yellow]"
        )
        t.add_row(
            Text(r.rule.describe()),  # "[chat]" is a class name, not markup
            fmt_alpha(r.value),
            fmt_ci(r.interval),
            num(r.margin, "+.3f"),
            res,
        )
    lines = [
        Text(
            f"{r.rule.describe()}: {r.why}"
            + (f" — {r.evidence}" if r.evidence else "")
            + (f"; interval over {r.basis}" if r.basis else ""),
            style="dim",
        )
        for r in g.results
    ]
    lines += [Text(f"note: {n}", style="yellow") for n in g.notes]
    colour = {"pass": "green", "fail": "red"}.get(g.decision, "yellow")
    verdict = {"pass": "PASS", "fail": "FAIL", "insufficient": "NOT ENOUGH EVIDENCE YET"}[
        g.decision
    ]
    return Group(
        t,
        *lines,
        Text.assemble(
            ("Decision: ", "bold"), (f"{verdict} (exit {g.exit_code})", f"bold {colour}")
        ),
    )
