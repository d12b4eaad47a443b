"""Figures of a bench run under an SLO: goodput against load, share of requests within the SLO,
and candidate ÷ baseline goodput — with each target's knee marked.

Pure: a :class:`~alphagate.bench.records.BenchResult` in, a :class:`~alphagate.report.charts.Chart`
(the numbers, for tests) or a :class:`~matplotlib.figure.Figure` (drawn in the house style of
:mod:`alphagate.report.plots`: Okabe–Ito colours, ticks at the loads run, × on ratio axes with the
1× line, a legend and units on every panel) out. The CLI saves the PNG.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from alphagate.bench.records import BenchResult, LevelSummary
from alphagate.bench.sweep import ladder
from alphagate.report.charts import Chart, HLine, Line, Panel, bench_sides

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["bench_figures", "goodput_chart"]


def _axis(result: BenchResult) -> str:
    sweep = result.sweep
    if sweep is not None:
        return (
            "concurrency (users)" if sweep.sweep.kind == "concurrency" else "request rate (req/s)"
        )
    if all(lv.rate is not None for lv in result.levels):
        return "request rate (req/s)"
    return "concurrency (users)"


def _series(levels: list[LevelSummary]) -> list[LevelSummary]:
    """One target's levels with a load and goodput, by load."""
    keep = [lv for lv in levels if lv.load is not None and lv.goodput is not None]
    return sorted(keep, key=lambda lv: lv.load or 0.0)


def _knee_labels(result: BenchResult, target: str, loads: list[float]) -> tuple[str, ...]:
    knee = None
    if result.sweep is not None:
        knee = next((k.knee for k in result.sweep.knees if k.target == target), None)
    return tuple("knee" if knee is not None and x == knee else "" for x in loads)


#: labels per log-scaled axis: a bisection load closer than 1/_LABELS of the axis (in log
#: space) to a labelled tick keeps its tick but not its label
_LABELS = 14


def _tick_labels(ticks: tuple[float, ...], result: BenchResult) -> tuple[str, ...]:
    """Every load run gets a tick; the doubling loads (and any load standing apart) a label."""
    if result.sweep is None or len(ticks) < 2:
        return tuple(f"{x:g}" for x in ticks)
    crowded = max(1.12, (ticks[-1] / ticks[0]) ** (1 / _LABELS))
    labelled = set(ladder(result.sweep.sweep)) & set(ticks)
    for x in ticks:
        if all(max(x, y) / min(x, y) >= crowded for y in labelled):
            labelled.add(x)
    return tuple(f"{x:g}" if x in labelled else "" for x in ticks)


def _goodput_ratio_panel(result: BenchResult, axis: str) -> Panel | None:
    """Candidate ÷ baseline goodput per load where both ran."""
    by_label = {lv.level: lv for lv in result.levels if lv.target == "baseline"}
    ratios = sorted(
        (float(by_label[c.level].load or 0.0), c.goodput_ratio)
        for c in result.comparisons
        if c.goodput_ratio is not None and c.level in by_label and by_label[c.level].load
    )
    if not ratios:
        return None
    rx = tuple(x for x, _ in ratios)
    return Panel(
        title="goodput, candidate ÷ baseline",
        x_label=axis,
        y_label="goodput ratio (×, higher = candidate better)",
        lines=(
            Line(
                label="candidate ÷ baseline",
                x=rx,
                y=tuple(r for _, r in ratios),
                points=len(set(rx)) <= 2,
            ),
        ),
        refs=(HLine(1.0, "break-even (1×)"),),
        x_ticks=rx,
        x_tick_labels=tuple(f"{x:g}" for x in rx),
        x_log=len(rx) > 1,
        y_ratio=True,
    )


def goodput_chart(result: BenchResult) -> Chart | None:
    """Goodput (good requests/s) and the share of requests within the SLO per load for every
    target, and the candidate ÷ baseline goodput ratio where both ran; None without an SLO or
    without at least one level at a load (a trace replay has none)."""
    if result.slo is None:
        return None
    targets = list(dict.fromkeys(lv.target for lv in result.levels))
    good_lines, share_lines = [], []
    all_loads: set[float] = set()
    for target in targets:
        lvs = _series([lv for lv in result.levels if lv.target == target])
        if not lvs:
            continue
        xs = [float(lv.load or 0.0) for lv in lvs]
        all_loads.update(xs)
        labels = _knee_labels(result, target, xs)
        few = len(set(xs)) <= 2  # one or two loads: points, not a curve
        good_lines.append(
            Line(
                label=target,
                x=tuple(xs),
                y=tuple(lv.goodput.good_requests_per_s if lv.goodput else 0.0 for lv in lvs),
                baseline=target == "baseline",
                group=target,
                point_labels=labels,
                points=few,
            )
        )
        share_lines.append(
            Line(
                label=target,
                x=tuple(xs),
                y=tuple((lv.goodput.attainment or 0.0) * 100 if lv.goodput else 0.0 for lv in lvs),
                baseline=target == "baseline",
                group=target,
                points=few,
            )
        )
    if not good_lines:
        return None
    ticks = tuple(sorted(all_loads))
    tick_labels = _tick_labels(ticks, result)
    axis = _axis(result)
    log_x = len(ticks) > 1
    slo = result.slo
    panels = [
        Panel(
            title="goodput",
            x_label=axis,
            y_label="good requests per second (req/s)",
            lines=tuple(good_lines),
            x_ticks=ticks,
            x_tick_labels=tick_labels,
            x_log=log_x,
        ),
        Panel(
            title="requests within the SLO",
            x_label=axis,
            y_label="requests within every bound (%)",
            lines=tuple(share_lines),
            refs=(HLine(slo.attainment * 100, f"target {slo.attainment * 100:g}%"),),
            x_ticks=ticks,
            x_tick_labels=tick_labels,
            x_log=log_x,
            y_range=(0.0, 102.0),
        ),
    ]
    ratio = _goodput_ratio_panel(result, axis)
    if ratio is not None:
        panels.append(ratio)
    knees = ""
    if result.sweep is not None:
        parts = [
            f"{k.target} {'none' if k.knee is None else f'{k.knee:g}'}" for k in result.sweep.knees
        ]
        knees = " Knee (highest load within the SLO): " + ", ".join(parts) + "."
    return Chart(
        key="goodput_vs_load",
        title="Goodput under the SLO against load",
        caption=f"{bench_sides(result)}. SLO: {slo.describe()}. Run {result.run_id}, wall "
        f"clock.{knees}",
        panels=tuple(panels),
    )


def bench_figures(result: BenchResult) -> dict[str, Figure]:
    """Every figure of the run, by PNG file name (empty when there is nothing to draw)."""
    from alphagate.report.plots import draw

    out = {}
    chart = goodput_chart(result)
    if chart is not None:
        out[f"{chart.key}.png"] = draw(chart)
    return out
