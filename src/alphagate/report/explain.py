"""``alphagate explain`` as console tables: per level, each tail figure measured and simulated,
the mechanisms that moved it with their factors and shares, the remedies ranked, and the worst
requests' chunks; :func:`remedy_lines` are the commands and flags to print whole (never wrapped
inside a token)."""

from __future__ import annotations

import shlex

from rich.console import Group, RenderableType
from rich.text import Text

from alphagate.core.fmt import DASH
from alphagate.explain.records import (
    ExplainResult,
    LevelExplanation,
    MetricExplanation,
    Remedy,
    Timeline,
)
from alphagate.measure.estimate import Interval
from alphagate.report._fmt import fmt_ms, fmt_pct, fmt_x, with_ci
from alphagate.report._tables import add_columns, new_table

__all__ = ["level_heading", "remedy_lines", "render_explain"]


def level_heading(lv: LevelExplanation) -> str:
    """``c16 — concurrency 16, K=4, …``: the level and what its replay assumed."""
    load = f"concurrency {lv.concurrency}" if lv.rate is None else f"{lv.rate:g} req/s"
    alphas = "; ".join(
        f"{name} {', '.join(f'{a:.2f}' for a in a_s)}" for name, a_s in lv.classes.items()
    )
    return (
        f"{lv.level} — {load}, {lv.requests} candidate requests replayed, K={lv.k}; α by position: "
        f"{alphas} (from {lv.alpha_source}); largest batch {lv.batch_cap[0]} baseline, "
        f"{lv.batch_cap[1]} candidate"
    )


def _figures(lv: LevelExplanation) -> RenderableType:
    table = add_columns(
        new_table(
            caption="replayed: the same requests through the simulator, with the lateness each "
            "side's client measured; without it, the server's steps alone"
        ),
        "ms", "baseline", "candidate", "cand ÷ base [95%]", "replayed", "÷", "without lateness",
    )  # fmt: skip
    for m in lv.metrics:
        table.add_row(
            m.label,
            fmt_ms(m.baseline_ms),
            fmt_ms(m.candidate_ms),
            with_ci(fmt_x(m.ratio), m.ratio_interval, 2),
            f"{fmt_ms(m.simulated_baseline_ms)} → {fmt_ms(m.simulated_candidate_ms)}",
            fmt_x(m.simulated_ratio),
            fmt_x(m.engine_ratio),
        )
    return table


def _factors(m: MetricExplanation) -> RenderableType:
    verb = "rose" if m.ratio > 1 else "fell"
    table = add_columns(
        new_table(f"Why {m.label} {verb} {fmt_x(m.ratio)}: candidate ÷ baseline = gain × factors"),
        "mechanism", "factor [95%]", "share of the rise [95%]",
    )  # fmt: skip
    for f in m.factors:
        table.add_row(
            f.label,
            with_ci(fmt_x(f.factor), f.factor_interval, 2),
            with_ci(fmt_pct(f.share), _pct(f.share_interval), 0),
        )
    table.add_row("every mechanism removed (speculation's own yield)", fmt_x(m.gain), "")
    table.add_row(
        "not explained (measured ÷ replayed)",
        with_ci(fmt_x(m.residual), m.residual_interval, 2),
        "",
    )
    notes = [Text(f"  {n}", style="yellow") for n in m.inseparable]
    return Group(table, *notes)


def _pct(iv: Interval | None) -> Interval | None:
    """A share's interval in percent."""
    return None if iv is None else Interval(low=iv.low * 100, high=iv.high * 100)


def _remedies(lv: LevelExplanation, baseline: tuple[float, float]) -> RenderableType:
    table = add_columns(
        new_table(
            f"Remedies, ranked (measured baseline: P99 ITL/token {fmt_ms(baseline[0])} ms, "
            f"P99 TTFT {fmt_ms(baseline[1], 0)} ms)",
            caption="predicted: the replayed figure after × measured ÷ replayed before (means "
            "above P95), on the same requests; ✓: P99 ITL/token and P99 TTFT back within the "
            "budget",
        ),
        "#", "change", "P99 ITL/token ms [95%]", "P99 TTFT ms [95%]", "tok/s ÷ base", "fixes",
        left=2,
    )  # fmt: skip
    for i, r in enumerate(lv.remedies, start=1):
        table.add_row(
            str(i),
            r.title,
            with_ci(fmt_ms(r.itl_per_token_p99_ms), r.itl_per_token_p99_interval, 1),
            with_ci(fmt_ms(r.ttft_p99_ms, 0), r.ttft_p99_interval, 0),
            fmt_x(r.throughput_ratio),
            "✓" if r.fixes_tail else DASH,
        )
    return table


def _timeline(t: Timeline) -> Text:
    marks = []
    for c in t.chunks[1:]:
        tag = ("R" if c.rejected else "") + ("P" if c.prefill_stall else "")
        marks.append(f"{fmt_ms(c.gap_ms)}/{c.tokens}{tag}")
    head = f"  request {t.request} (run {t.run}, class {t.cls or DASH}): worst {fmt_ms(t.worst_itl_per_token_ms)} ms per token; gap ms/tokens: "
    return Text(head + " ".join(marks))


def _level(lv: LevelExplanation) -> RenderableType:
    parts: list[RenderableType] = [Text(level_heading(lv), style="bold"), _figures(lv)]
    parts += [Text(f"Why: {m.why}") for m in lv.metrics if m.ratio > 1]
    parts += [_factors(m) for m in lv.metrics]
    by = {m.metric: m.baseline_ms for m in lv.metrics}
    parts.append(_remedies(lv, (by["itl_per_token_p99_ms"], by["ttft_p99_ms"])))
    if lv.worst:
        parts.append(
            Text(
                "Worst candidate requests (R: every draft rejected; P: a prefill shared the step):"
            )
        )
        parts += [_timeline(t) for t in lv.worst]
    parts += [Text(f"note: {n}", style="yellow") for n in lv.notes]
    return Group(*parts)


def render_explain(result: ExplainResult) -> RenderableType:
    """Every level, then the run's notes."""
    parts: list[RenderableType] = [Text(f"replayed on: {result.deployment}")]
    if result.calibration:
        parts.append(Text(f"calibration: {result.calibration}"))
    for lv in result.levels:
        parts += [Text(""), _level(lv)]
    parts += [Text(f"note: {n}", style="yellow") for n in result.notes]
    return Group(*parts)


def remedy_lines(result: ExplainResult) -> list[str]:
    """The top remedies' flags and serving commands, one per line, to print whole."""
    lines = []
    for lv in result.levels:
        for i, r in enumerate(lv.remedies[:3], start=1):
            lines += _remedy_lines(lv.level, i, r)
    return lines


def _remedy_lines(level: str, i: int, r: Remedy) -> list[str]:
    head = f"{level} remedy {i} ({r.title}):"
    if r.flags:
        return [head, "  flags: " + shlex.join(r.flags), *([f"  {r.command}"] if r.command else [])]
    return [head, f"  {r.action}"] if r.action else []
