"""Section 8 of the report, why the tail moved (``alphagate explain``): per level, each tail
figure measured and replayed, the mechanisms' factors and shares (a stacked bar of the shares
per level), the remedies ranked with the flags that apply them, and the worst candidate
requests' timelines."""

from __future__ import annotations

import shlex

from alphagate.explain.records import ExplainResult, LevelExplanation, MetricExplanation
from alphagate.report import charts
from alphagate.report._fmt import fmt_ci, fmt_ms, fmt_pct, fmt_x
from alphagate.report.blocks import Block, Cell, Code, Figure, Heading, Prose, Table, cells
from alphagate.report.explain import level_heading
from alphagate.report.inputs import ExplainInput, ReportInputs

__all__ = ["explain_section"]


def _figures_table(lv: LevelExplanation) -> Table:
    rows = tuple(
        cells(
            m.label,
            fmt_ms(m.baseline_ms),
            fmt_ms(m.candidate_ms),
            f"{fmt_x(m.ratio)} {fmt_ci(m.ratio_interval, 2)}",
            f"{fmt_ms(m.simulated_baseline_ms)} → {fmt_ms(m.simulated_candidate_ms)}",
            fmt_x(m.residual),
        )
        for m in lv.metrics
    )
    return Table(
        title=f"{lv.level}: measured and replayed (ms)",
        header=(
            "figure",
            "baseline",
            "candidate",
            "cand ÷ base [95%]",
            "replayed",
            "not explained",
        ),
        rows=rows,
        note="replayed: the same requests through the simulator, with the client's measured "
        "lateness; not explained: measured ÷ replayed ratio.",
    )


def _factors_table(m: MetricExplanation) -> Table:
    rows: list[tuple[Cell, ...]] = [
        (
            Cell(f.label),
            Cell(
                f"{fmt_x(f.factor)} {fmt_ci(f.factor_interval, 2)}", "bad" if f.factor > 1 else ""
            ),
            Cell(fmt_pct(f.share)),
        )
        for f in m.factors
    ]
    rows.append(cells("every mechanism removed (speculation's own yield)", fmt_x(m.gain), ""))
    return Table(
        title=f"{m.label} ×{m.ratio:.2f}: candidate ÷ baseline = gain × factors",
        header=("mechanism", "factor [95%]", "share of the rise"),
        rows=tuple(rows),
        note=" ".join(m.inseparable),
    )


def _remedies_table(lv: LevelExplanation) -> Table:
    rows = tuple(
        (
            Cell(str(i)),
            Cell(r.title),
            Cell(f"{fmt_ms(r.itl_per_token_p99_ms)} {fmt_ci(r.itl_per_token_p99_interval, 1)}"),
            Cell(fmt_ms(r.ttft_p99_ms, 0)),
            Cell(fmt_x(r.throughput_ratio)),
            Cell("yes" if r.fixes_tail else "no", "good" if r.fixes_tail else ""),
        )
        for i, r in enumerate(lv.remedies, start=1)
    )
    return Table(
        title=f"{lv.level}: remedies, ranked",
        header=(
            "#",
            "change",
            "P99 ITL/token ms [95%]",
            "TTFT P99 ms",
            "tok/s ÷ baseline",
            "fixes",
        ),
        rows=rows,
        note="Predicted: the replayed figure after the change × measured ÷ replayed before it "
        "(the means above the 95th percentile), on the same requests.",
    )


def _level(lv: LevelExplanation) -> list[Block]:
    out: list[Block] = [Heading(level_heading(lv)), _figures_table(lv)]
    out += [Prose(m.why) for m in lv.metrics if m.ratio > 1]
    out += [_factors_table(m) for m in lv.metrics if m.ratio > 1]
    out.append(_remedies_table(lv))
    if lv.remedies and lv.remedies[0].flags:
        top = lv.remedies[0]
        out.append(Code(f"{lv.level}: the top remedy's engine flags", shlex.join(top.flags)))
    timeline = charts.explain_timeline_chart(lv)
    if timeline is not None:
        out.append(Figure(timeline))
    out += [Prose(n, "warn") for n in lv.notes]
    return out


def _result(source: str, r: ExplainResult) -> list[Block]:
    out: list[Block] = [Prose(f"{source}: bench run {r.run_id}, replayed on {r.deployment}.")]
    shares = charts.explain_shares_chart(r)
    if shares is not None:
        out.append(Figure(shares))
    for lv in r.levels:
        out += _level(lv)
    return out


def explain_section(inp: ReportInputs) -> list[Block]:
    out: list[Block] = []
    for ei in inp.of(ExplainInput):
        out += _result(ei.source, ei.result)
    return out
