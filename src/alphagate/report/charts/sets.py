"""What each verb's ``--plot`` writes: the charts of one sweep, one plan or one bench run that
have data to draw, in the order the report shows them."""

from __future__ import annotations

from collections.abc import Sequence

from alphagate.bench.records import BenchResult, RequestRecord
from alphagate.plan.records import Plan
from alphagate.report.charts.bench import bench_itl_cdf_chart, bench_itl_chart, bench_speedup_chart
from alphagate.report.charts.measured import bench_acceptance_length_chart, bench_alpha_chart
from alphagate.report.charts.plan import plan_itl_chart, plan_speedup_chart
from alphagate.report.charts.plan_alpha import plan_acceptance_length_chart, plan_alpha_chart
from alphagate.report.charts.spec import Chart
from alphagate.report.charts.sweep import (
    sweep_acceptance_length_chart,
    sweep_alpha_chart,
    sweep_itl_cdf_chart,
    sweep_itl_chart,
    sweep_speedup_chart,
)
from alphagate.sim.sweep import SweepResult

__all__ = ["bench_charts", "plan_charts", "sweep_charts"]


def _drawn(charts: Sequence[Chart | None]) -> list[Chart]:
    return [c for c in charts if c is not None]


def sweep_charts(r: SweepResult) -> list[Chart]:
    """``simulate --plot``: speedup, P99 ITL, the ITL CDF, α by position, acceptance length."""
    return _drawn(
        [
            sweep_speedup_chart(r),
            sweep_itl_chart(r, ("p99",)),
            sweep_itl_cdf_chart(r),
            sweep_alpha_chart(r),
            sweep_acceptance_length_chart(r),
        ]
    )


def plan_charts(p: Plan) -> list[Chart]:
    """``plan --plot``: speedup and K against concurrency, ITL, α by position (when the plan's α
    says more than one number per class), acceptance length."""
    return _drawn(
        [
            plan_speedup_chart(p),
            plan_itl_chart(p),
            plan_alpha_chart(p),
            plan_acceptance_length_chart(p),
        ]
    )


def bench_charts(b: BenchResult, records: Sequence[RequestRecord] | None) -> list[Chart]:
    """``bench --plot``: every measured chart the run has data for."""
    return _drawn(
        [
            bench_speedup_chart(b),
            bench_itl_chart(b),
            bench_itl_cdf_chart(b, records) if records else None,
            bench_alpha_chart(b, records),
            bench_acceptance_length_chart(b, records),
        ]
    )
