"""Sections 2–6 of the report, its figures: speedup against concurrency (predicted, measured, the
closed forms), P99 and P50 ITL per token, the ITL distribution, α by position per class, and the
acceptance length — each input's charts in the order plan, bench, sweep, measurement.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from alphagate.bench.acceptance import bench_acceptance
from alphagate.bench.records import BenchResult
from alphagate.core.errors import ConfigError
from alphagate.plan.records import Plan
from alphagate.report import charts
from alphagate.report.blocks import Block, Figure, Prose, fields_table
from alphagate.report.inputs import (
    BenchInput,
    MeasureInput,
    ModelInput,
    PlanInput,
    ReportInputs,
    SweepInput,
)

__all__ = [
    "alpha_section",
    "cdf_section",
    "itl_section",
    "length_section",
    "speedup_section",
]


def _figures(
    inp: ReportInputs,
    kind: type[Any],
    make: Callable[[Any], charts.Chart | None],
) -> list[Block]:
    """A figure for each input of ``kind`` that has one."""
    out: list[Block] = []
    for item in inp.of(kind):
        chart = make(item)
        if chart is not None:
            out.append(Figure(chart))
    return out


def _plans(inp: ReportInputs) -> list[Plan]:
    return [pi.plan for pi in inp.of(PlanInput)]


def _benches(inp: ReportInputs) -> list[BenchResult]:
    return [bi.result for bi in inp.of(BenchInput)]


def _closed_forms(inp: ReportInputs) -> list[Block]:
    out: list[Block] = []
    for mi in inp.of(ModelInput):
        if mi.verb == "model table":
            out.append(Figure(charts.table_speedup_chart(mi.answer)))
        else:
            out.append(
                fields_table(f"{mi.verb} — closed form ({mi.source})", mi.answer.model_dump())
            )
    return out


def speedup_section(inp: ReportInputs) -> list[Block]:
    plans = _plans(inp)
    return [
        *(
            Figure(charts.plan_speedup_chart(group, _benches(inp)))
            for group in charts.same_policy(plans)
        ),
        *_figures(inp, BenchInput, lambda bi: charts.bench_speedup_chart(bi.result, plans)),
        *_figures(inp, BenchInput, lambda bi: charts.goodput_chart(bi.result)),
        *_figures(inp, SweepInput, lambda si: charts.sweep_speedup_chart(si.result)),
        *_closed_forms(inp),
    ]


def itl_section(inp: ReportInputs) -> list[Block]:
    plans = _plans(inp)
    return [
        *(Figure(charts.plan_itl_chart(group)) for group in charts.same_itl(plans)),
        *_figures(inp, BenchInput, lambda bi: charts.bench_itl_chart(bi.result, plans)),
        *_figures(inp, SweepInput, lambda si: charts.sweep_itl_chart(si.result)),
    ]


def _no_records(inp: ReportInputs, what: str) -> list[Block]:
    return [
        Prose(f"{bi.source}: its requests.jsonl was not read, so {what} is missing.", "warn")
        for bi in inp.of(BenchInput)
        if bi.records is None
    ]


def cdf_section(inp: ReportInputs) -> list[Block]:
    plans = _plans(inp)
    return [
        *_figures(
            inp,
            BenchInput,
            lambda bi: (
                charts.bench_itl_cdf_chart(bi.result, bi.records, plans) if bi.records else None
            ),
        ),
        *_no_records(inp, "the measured ITL distribution"),
        *_figures(inp, SweepInput, lambda si: charts.sweep_itl_cdf_chart(si.result)),
    ]


def _bench_alpha(bi: BenchInput, plans: tuple[Plan, ...]) -> list[charts.MeasuredAlpha]:
    """A bench's α by position for all traffic and per class (from its replies' per-request
    counts, else its counters: :func:`~alphagate.bench.acceptance.bench_acceptance`)."""
    try:
        got = bench_acceptance(bi.result, bi.source)
    except ConfigError:
        return []  # counts that contradict the counters: the gate section says so
    where = charts.elsewhere(bi.result, plans)
    what = f"bench run {bi.result.run_id}"
    out = [charts.MeasuredAlpha(None, what, got.overall, where)] if got.overall is not None else []
    return out + [charts.MeasuredAlpha(n, what, e, where) for n, e in got.classes.items()]


def _measure_alpha(mi: MeasureInput, plans: tuple[Plan, ...]) -> list[charts.MeasuredAlpha]:
    """A measurement's α by position per class and for all traffic; its model is not recorded."""
    m = mi.result
    deps = ", ".join(dict.fromkeys(charts.plan_deployment_name(p) for p in plans))
    where = (
        f"Measured from {m.source} (model not recorded), not known to be the plan's "
        f"deployment ({deps})"
    )
    out = [charts.MeasuredAlpha(n, m.verb, e, where) for n, e in m.classes.items()]
    return out + (
        [charts.MeasuredAlpha(None, m.verb, m.overall, where)] if m.overall is not None else []
    )


def _plan_alpha(inp: ReportInputs) -> list[Block]:
    """One α chart per group of plans that assume the same α, beside every measured α."""
    out: list[Block] = []
    for group in charts.same_classes(_plans(inp)):
        measured = [
            *(a for bi in inp.of(BenchInput) for a in _bench_alpha(bi, group)),
            *(a for mi in inp.of(MeasureInput) for a in _measure_alpha(mi, group)),
        ]
        chart = charts.plan_alpha_chart(group, measured)
        if chart is not None:
            out.append(Figure(chart))
    return out


def alpha_section(inp: ReportInputs) -> list[Block]:
    return [
        *_figures(inp, MeasureInput, lambda mi: charts.measure_alpha_chart(mi.result)),
        *_figures(inp, BenchInput, lambda bi: charts.bench_alpha_chart(bi.result, bi.records)),
        *_no_records(inp, "α per class from the streamed chunks"),
        *_plan_alpha(inp),
        *_figures(inp, SweepInput, lambda si: charts.sweep_alpha_chart(si.result)),
    ]


def length_section(inp: ReportInputs) -> list[Block]:
    return [
        *_figures(inp, MeasureInput, lambda mi: charts.measure_acceptance_length_chart(mi.result)),
        *_figures(
            inp, BenchInput, lambda bi: charts.bench_acceptance_length_chart(bi.result, bi.records)
        ),
        *_figures(inp, PlanInput, lambda pi: charts.plan_acceptance_length_chart(pi.plan)),
        *_figures(inp, SweepInput, lambda si: charts.sweep_acceptance_length_chart(si.result)),
    ]
