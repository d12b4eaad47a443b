"""The figures ``bench --plot`` adds under an SLO, drawn: goodput against load, the share of
requests within the SLO and candidate ÷ baseline goodput, each target's knee marked (the numbers
are :func:`alphagate.report.charts.goodput_chart`'s; the CLI saves the PNG)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from alphagate.bench.records import BenchResult
from alphagate.report.charts.goodput import goodput_chart

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["bench_figures"]


def bench_figures(result: BenchResult) -> dict[str, Figure]:
    """Every figure of the run, by PNG file name (empty when there is nothing to draw)."""
    from alphagate.report.plots import draw

    chart = goodput_chart(result)
    return {} if chart is None else {f"{chart.key}.png": draw(chart)}
