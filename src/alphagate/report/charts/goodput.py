"""The figure of a bench run under an SLO: goodput against load, the share of requests within the
SLO, and candidate ÷ baseline goodput — with each target's knee marked.

Every load run gets a tick; on a knee sweep's crowded axis the doubling loads (and any load
standing apart) get a label, a bisection load close to a labelled one only its tick.
"""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

from alphagate.bench.records import BenchResult, LevelSummary
from alphagate.bench.sweep import ladder
from alphagate.report._fmt import fmt_pct
from alphagate.report.charts.bench import bench_axis, target_role
from alphagate.report.charts.spec import BREAK_EVEN, Chart, HLine, Line, Panel, few, tick_labels
from alphagate.report.charts.where import bench_sides

__all__ = ["goodput_chart"]

#: labels per log-scaled axis: a bisection load closer than 1/_LABELS of the axis (in log
#: space) to a labelled tick keeps its tick but not its label
_LABELS = 14


def _series(levels: list[LevelSummary]) -> list[LevelSummary]:
    """One target's levels with a load and goodput, by load."""
    keep = [lv for lv in levels if lv.load is not None and lv.goodput is not None]
    return sorted(keep, key=lambda lv: lv.load or 0.0)


def _knee_labels(result: BenchResult, target: str, loads: list[float]) -> tuple[str, ...]:
    knee = None
    if result.sweep is not None:
        knee = next((k.knee for k in result.sweep.knees if k.target == target), None)
    return tuple("knee" if knee is not None and x == knee else "" for x in loads)


def _crowded_tick_labels(ticks: tuple[float, ...], result: BenchResult) -> tuple[str, ...]:
    """Every load run gets a tick; the doubling loads (and any load standing apart) a label."""
    if result.sweep is None or len(ticks) < 2:
        return tick_labels(ticks)
    crowded = max(1.12, (ticks[-1] / ticks[0]) ** (1 / _LABELS))
    labelled = set(ladder(result.sweep.sweep)) & set(ticks)
    for x in ticks:
        if all(max(x, y) / min(x, y) >= crowded for y in labelled):
            labelled.add(x)
    return tuple(f"{x:g}" if x in labelled else "" for x in ticks)


class _Series(NamedTuple):
    """Each target's goodput and share within the SLO, against load."""

    goodput: list[Line]
    share: list[Line]
    loads: tuple[float, ...]


def _target_series(result: BenchResult) -> _Series:
    good, share = [], []
    loads: set[float] = set()
    for target in dict.fromkeys(lv.target for lv in result.levels):
        lvs = _series([lv for lv in result.levels if lv.target == target])
        if not lvs:
            continue
        xs = tuple(float(lv.load or 0.0) for lv in lvs)
        loads.update(xs)
        role, points = target_role(target), few(xs)
        good.append(
            Line(
                label=target,
                x=xs,
                y=tuple(lv.goodput.good_requests_per_s if lv.goodput else 0.0 for lv in lvs),
                role=role,
                group=target,
                point_labels=_knee_labels(result, target, list(xs)),
                points=points,
            )
        )
        attained = [(lv.goodput.attainment or 0.0) * 100 if lv.goodput else 0.0 for lv in lvs]
        share.append(
            Line(label=target, x=xs, y=tuple(attained), role=role, group=target, points=points)
        )
    return _Series(good, share, tuple(sorted(loads)))


def _ratio_panel(result: BenchResult) -> Panel | None:
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
    line = Line(
        label="candidate ÷ baseline",
        x=rx,
        y=tuple(r for _, r in ratios),
        role="ratio",
        points=few(rx),
    )
    return Panel(
        title="goodput, candidate ÷ baseline",
        x_label=bench_axis(result),
        y_label="goodput ratio (×, higher = candidate better)",
        lines=(line,),
        refs=(BREAK_EVEN,),
        x_ticks=rx,
        x_tick_labels=tick_labels(rx),
        x_log=len(rx) > 1,
        y_ratio=True,
    )


def _target_panels(result: BenchResult, s: _Series, attainment: float) -> list[Panel]:
    """Goodput and the share within the SLO (with its target share) against every load run."""
    good = Panel(
        title="goodput",
        x_label=bench_axis(result),
        y_label="good requests per second (req/s)",
        lines=tuple(s.goodput),
        x_ticks=s.loads,
        x_tick_labels=_crowded_tick_labels(s.loads, result),
        x_log=len(s.loads) > 1,
    )
    share = replace(
        good,
        title="requests within the SLO",
        y_label="requests within every bound (%)",
        lines=tuple(s.share),
        refs=(HLine(attainment * 100, f"target {fmt_pct(attainment, 'g')}"),),
        y_range=(0.0, 102.0),
    )
    return [good, share]


def _knees(result: BenchResult) -> str:
    if result.sweep is None:
        return ""
    parts = [
        f"{k.target} {'none' if k.knee is None else f'{k.knee:g}'}" for k in result.sweep.knees
    ]
    return " Knee (highest load within the SLO): " + ", ".join(parts) + "."


def goodput_chart(result: BenchResult) -> Chart | None:
    """Goodput (good requests/s) and the share of requests within the SLO per load for every
    target, and the candidate ÷ baseline goodput ratio where both ran; None without an SLO or
    without at least one level at a load (a trace replay has none)."""
    slo = result.slo
    if slo is None:
        return None
    series = _target_series(result)
    if not series.goodput:
        return None
    ratio = _ratio_panel(result)
    panels = _target_panels(result, series, slo.attainment) + ([ratio] if ratio else [])
    return Chart(
        key="goodput_vs_load",
        title="Goodput under the SLO against load",
        caption=f"{bench_sides(result)}. SLO: {slo.describe()}. Run {result.run_id}, wall "
        f"clock.{_knees(result)}",
        panels=tuple(panels),
    )
