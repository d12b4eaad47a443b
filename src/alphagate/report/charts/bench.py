"""Figures of a bench A/B run: the measured candidate ÷ baseline ratios per level, P99 and P50
ITL per token per target, and the per-token ITL distribution from the run's request records.

Latency accounting is the bench records' stated rule: ITL per token = the gap before a streamed
chunk ÷ the tokens in it, one sample per token (:func:`alphagate.bench.chunks.
itl_per_token_samples`). With ``plans`` (the plans on the same page), a bench of another
deployment says so in its panel title and caption (:mod:`alphagate.report.charts.where`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

from alphagate.bench.chunks import itl_per_token_samples
from alphagate.bench.records import BenchResult, Comparison, LevelSummary, RequestRecord
from alphagate.plan.records import Plan
from alphagate.report.charts.spec import (
    BREAK_EVEN,
    CDF_LABEL,
    ITL_LABEL,
    Chart,
    Line,
    Panel,
    Role,
    few,
    load_axis,
    or_nan,
    tick_labels,
)
from alphagate.report.charts.where import bench_sides, elsewhere, where_note
from alphagate.sim.results import CDF_LEVELS, weighted_quantiles

__all__ = ["bench_axis", "bench_itl_cdf_chart", "bench_itl_chart", "bench_speedup_chart"]


def bench_axis(b: BenchResult) -> str:
    """A bench's load axis: its sweep's kind, else request rate only when every level ran open
    loop (a level's x is its rate when it has one, else its concurrency)."""
    if b.sweep is not None:
        return load_axis(open_loop=b.sweep.sweep.kind == "rate")
    return load_axis(open_loop=all(lv.rate is not None for lv in b.levels))


def _level_x(levels: Iterable[LevelSummary]) -> dict[str, float]:
    """A level's x: its concurrency (closed loop) or its rate; in level order."""
    out: dict[str, float] = {}
    for lv in levels:
        if lv.level not in out:
            out[lv.level] = float(lv.rate if lv.rate is not None else lv.concurrency or 0)
    return out


def target_role(target: str) -> Role:
    """A bench target's side: the baseline is drawn black, any other target is a candidate."""
    return "baseline" if target == "baseline" else "candidate"


def _measured_panel(
    b: BenchResult,
    plans: Sequence[Plan],
    *,
    what: str,
    y_label: str,
    lines: Sequence[Line],
    xs: tuple[float, ...],
    ratio: bool,
) -> Panel:
    """One panel against the bench's levels: a ratio with its 1× line, or a latency on a log
    axis; its title says when the bench is not the deployment of the plans beside it."""
    other = "\nnot the plan's deployment" if elsewhere(b, plans) else ""
    return Panel(
        title=f"measured ({what}, run {b.run_id}){other}",
        x_label=bench_axis(b),
        y_label=y_label,
        lines=tuple(lines),
        refs=(BREAK_EVEN,) if ratio else (),
        x_ticks=xs,
        x_tick_labels=tick_labels(xs),
        x_log=len(set(xs)) > 1 and min(xs) > 0,
        y_log=not ratio,
        y_ratio=ratio,
    )


class _Ratio(NamedTuple):
    """A ratio of the speedup chart: its label, the ``Speedups`` field, its look."""

    label: str
    field: str
    dashed: bool
    group: str


_RATIOS = (
    _Ratio("throughput (candidate ÷ baseline)", "throughput_speedup", False, "throughput"),
    _Ratio("TPOT (baseline ÷ candidate)", "tpot_mean_speedup", True, "tpot"),
    _Ratio("P99 ITL per token (baseline ÷ candidate)", "itl_per_token_p99_speedup", True, "p99"),
)


def _ratio_line(comps: Sequence[Comparison], xs: tuple[float, ...], ratio: _Ratio) -> Line:
    ys = tuple(or_nan(getattr(c.speedups, ratio.field)) for c in comps)
    return Line(
        ratio.label,
        xs,
        ys,
        role="ratio",
        dashed=ratio.dashed,
        group=ratio.group,
        points=few(xs),
    )


def bench_speedup_chart(b: BenchResult, plans: Sequence[Plan] = ()) -> Chart | None:
    """Measured candidate ÷ baseline at each level: throughput and TPOT, with the 1× line. With
    ``plans`` (the plans on the same page), a bench of another deployment says so in its panel
    title and caption."""
    if not b.comparisons:
        return None
    xmap = _level_x(b.levels)
    comps = [c for c in b.comparisons if c.level in xmap]
    xs = tuple(xmap[c.level] for c in comps)
    lines = [_ratio_line(comps, xs, ratio) for ratio in _RATIOS]
    return Chart(
        key="speedup_measured",
        title="Measured speedup against concurrency",
        caption=f"{bench_sides(b)}. Run {b.run_id}, wall clock; above 1× the candidate is "
        f"better.{where_note(b, plans)}",
        panels=(
            _measured_panel(
                b,
                plans,
                what="bench A/B",
                y_label="candidate vs baseline (×, higher = better)",
                lines=lines,
                xs=xs,
                ratio=True,
            ),
        ),
    )


def _itl_lines(b: BenchResult) -> list[Line]:
    """P99 (solid) and P50 (dashed) ITL per token of each target at the levels it completed."""
    xmap = _level_x(b.levels)
    lines = []
    for target in dict.fromkeys(lv.target for lv in b.levels):
        lvs = [lv for lv in b.levels if lv.target == target and lv.overall.completed]
        xs = tuple(xmap[lv.level] for lv in lvs)
        for pct in ("p99", "p50"):
            lines.append(
                Line(
                    label=f"{pct.upper()} {target}",
                    x=xs,
                    y=tuple(or_nan(getattr(lv.overall.itl_per_token_ms, pct)) for lv in lvs),
                    role=target_role(target),
                    dashed=pct == "p50",
                    group=target,
                    points=few(xs),
                )
            )
    return lines


def bench_itl_chart(b: BenchResult, plans: Sequence[Plan] = ()) -> Chart | None:
    """Measured P50 and P99 ITL per token per level, for each target."""
    lines = _itl_lines(b)
    if not any(line.x for line in lines):
        return None
    return Chart(
        key="itl_per_token_measured",
        title="Measured P99 and P50 ITL per token, with and without speculation",
        caption=f"{bench_sides(b)}. ITL per token = chunk gap ÷ tokens in the chunk."
        f"{where_note(b, plans)}",
        panels=(
            _measured_panel(
                b,
                plans,
                what="bench",
                y_label=ITL_LABEL,
                lines=lines,
                xs=tuple(_level_x(b.levels).values()),
                ratio=False,
            ),
        ),
    )


def _cdf_line(target: str, records: Iterable[RequestRecord]) -> Line | None:
    """A target's per-token ITL CDF at one level, from its request records."""
    vals, w = itl_per_token_samples(records)
    if vals.size == 0:
        return None
    q = weighted_quantiles(vals * 1e3, w, CDF_LEVELS)
    return Line(
        label=target,
        x=tuple(float(x) for x in q),
        y=tuple(CDF_LEVELS),
        role=target_role(target),
        group=target,
    )


def _cdf_panel(b: BenchResult, level: str, records: Sequence[RequestRecord]) -> Panel | None:
    """One level's panel: each target's CDF (None when no target has a sample there)."""
    lines = []
    for target in dict.fromkeys(lv.target for lv in b.levels):
        line = _cdf_line(target, (r for r in records if r.level == level and r.target == target))
        if line is not None:
            lines.append(line)
    if not lines:
        return None
    return Panel(
        title=f"measured, level {level}",
        x_label=ITL_LABEL,
        y_label=CDF_LABEL,
        lines=tuple(lines),
        x_log=True,
        y_range=(0.0, 1.0),
    )


def bench_itl_cdf_chart(
    b: BenchResult, records: Sequence[RequestRecord], plans: Sequence[Plan] = ()
) -> Chart | None:
    """Measured per-token ITL CDF per level: baseline vs candidate, from ``requests.jsonl``."""
    mine = [r for r in records if r.run_id == b.run_id]
    levels = dict.fromkeys(lv.level for lv in b.levels)
    panels = [p for level in levels if (p := _cdf_panel(b, level, mine)) is not None]
    if not panels:
        return None
    return Chart(
        key="itl_per_token_cdf_measured",
        title="Measured ITL per token, cumulative distribution",
        caption=f"{bench_sides(b)}; {len(mine)} request records of run {b.run_id}. A curve to "
        f"the left is faster.{where_note(b, plans)}",
        panels=tuple(panels),
    )
