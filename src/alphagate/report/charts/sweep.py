"""Figures of a ``simulate`` sweep: throughput speedup and ITL per token against load per K, the
ITL distribution at the lowest and highest load, and the α and acceptance length the simulator
realised — each acceptance setting a candidate line beside the baseline with speculation off.

ITL per token is the stated rule of the simulator's records: the gap before a streamed chunk ÷
the tokens in it, one sample per token.
"""

from __future__ import annotations

from collections.abc import Callable

from alphagate.measure.estimate import AcceptanceEstimate, estimate
from alphagate.report.charts.acceptance import alpha_line, alpha_panel, histogram_line, pmf_panel
from alphagate.report.charts.spec import (
    BREAK_EVEN,
    CDF_LABEL,
    ITL_LABEL,
    RATIO_LABEL,
    Chart,
    Line,
    Panel,
    Role,
    load_axis,
    or_nan,
    tick_labels,
    with_band,
)
from alphagate.sim.results import CDF_LEVELS
from alphagate.sim.sweep import SweepCell, SweepResult

__all__ = [
    "sweep_acceptance_length_chart",
    "sweep_alpha_chart",
    "sweep_itl_cdf_chart",
    "sweep_itl_chart",
    "sweep_speedup_chart",
]

BOTH_SIDES_SWEEP = (
    "Baseline: the same requests with speculation off (black); candidate: speculation at each "
    "acceptance setting"
)
OFF = "off (no speculation)"


def _loads(r: SweepResult) -> tuple[float, ...]:
    return tuple(row.load for row in r.rows)


def _axis(r: SweepResult) -> str:
    return load_axis(open_loop=bool(r.rows) and r.rows[0].load_kind != "concurrency")


def _cells(r: SweepResult, k: int, mix: str) -> list[SweepCell]:
    return [c for c in r.cells if c.k == k and c.mix == mix]


def _load_panel(
    r: SweepResult, *, title: str, y_label: str, lines: list[Line], ratio: bool = False
) -> Panel:
    """A panel against the sweep's loads, on a log axis with a tick at every load run: a ratio
    with its 1× line, or a latency on a log axis."""
    loads = _loads(r)
    return Panel(
        title=title,
        x_label=_axis(r),
        y_label=y_label,
        lines=tuple(lines),
        refs=(BREAK_EVEN,) if ratio else (),
        x_ticks=loads,
        x_tick_labels=tick_labels(loads),
        x_log=True,
        y_log=not ratio,
        y_ratio=ratio,
    )


def _speedup_line(r: SweepResult, k: int, mix: str) -> Line:
    cells = _cells(r, k, mix)
    line = Line(
        label=mix,
        x=tuple(c.load for c in cells),
        y=tuple(or_nan(c.speedup.throughput_speedup) for c in cells),
        group=mix,
    )
    return with_band(line, [c.throughput_speedup_interval for c in cells])


def sweep_speedup_chart(r: SweepResult) -> Chart:
    """Throughput speedup against load, one panel per K, one line per acceptance setting."""
    panels = [
        _load_panel(
            r,
            title=f"simulated, K = {k}",
            y_label=RATIO_LABEL,
            lines=[_speedup_line(r, k, m) for m in r.mixes],
            ratio=True,
        )
        for k in r.ks
    ]
    return Chart(
        key="speedup_vs_load",
        title="Simulated throughput speedup against load",
        caption=f"{r.deployment}. {BOTH_SIDES_SWEEP}; speedup = candidate ÷ baseline throughput "
        "in paired simulations. Below 1× speculation loses."
        + (" Shaded: the range over the step-time constants' ranges." if r.ranges_origin else ""),
        panels=tuple(panels),
        share_y=True,
    )


def _itl_panels(r: SweepResult, pct: str) -> list[Panel]:
    base = tuple(or_nan(getattr(row.baseline.itl_per_token_ms, pct)) for row in r.rows)
    panels = []
    for k in r.ks:
        lines = [Line(label=OFF, x=_loads(r), y=base, role="baseline")]
        for m in r.mixes:
            cells = _cells(r, k, m)
            ys = tuple(or_nan(getattr(c.spec.itl_per_token_ms, pct)) for c in cells)
            lines.append(Line(label=m, x=tuple(c.load for c in cells), y=ys, group=m))
        panels.append(
            _load_panel(
                r, title=f"{pct.upper()} ITL per token, K = {k}", y_label=ITL_LABEL, lines=lines
            )
        )
    return panels


def sweep_itl_chart(r: SweepResult, percentiles: tuple[str, ...] = ("p99", "p50")) -> Chart:
    """P99 (and P50) ITL per token against load: off vs each acceptance setting, per K."""
    panels = [p for pct in percentiles for p in _itl_panels(r, pct)]
    names = " and ".join(p.upper() for p in percentiles)
    return Chart(
        key="p99_itl_per_token" if percentiles == ("p99",) else "itl_per_token",
        title=f"Simulated {names} ITL per token, with and without speculation",
        caption=f"{r.deployment}. {BOTH_SIDES_SWEEP}. ITL per token = chunk gap ÷ tokens in the "
        "chunk.",
        panels=tuple(panels),
        share_y=True,
    )


def sweep_itl_cdf_chart(r: SweepResult, k: int | None = None) -> Chart:
    """Per-token ITL CDF at the lowest and highest load: off vs each acceptance setting."""
    k_shown = k if k is not None else max(r.ks)
    picks = [r.rows[0], r.rows[-1]] if len(r.rows) > 1 else list(r.rows)
    levels = tuple(CDF_LEVELS)
    panels = []
    for row in picks:
        off = Line(label=OFF, x=tuple(row.baseline.itl_per_token_cdf_ms), y=levels, role="baseline")
        spec = [
            Line(label=c.mix, x=tuple(c.spec.itl_per_token_cdf_ms), y=levels, group=c.mix)
            for c in r.cells
            if c.load == row.load and c.k == k_shown
        ]
        panels.append(
            Panel(
                title=f"{row.load_kind} {row.load:g}, K = {k_shown}",
                x_label=ITL_LABEL,
                y_label=CDF_LABEL,
                lines=(off, *spec),
                x_log=True,
                y_range=(0.0, 1.0),
            )
        )
    return Chart(
        key="itl_per_token_cdf",
        title="Simulated ITL per token, cumulative distribution",
        caption=f"{r.deployment}. {BOTH_SIDES_SWEEP}. A curve to the left is faster; the top "
        "right shows the tail.",
        panels=tuple(panels),
    )


def _cell_estimate(c: SweepCell) -> AcceptanceEstimate | None:
    """The simulator's counters of one cell, as vLLM would count them, with intervals."""
    s = c.spec
    if not s.num_drafts or not s.num_accepted_per_pos:
        return None
    per_pos = [float(x) for x in s.num_accepted_per_pos]
    return estimate(
        float(s.num_drafts), float(s.num_draft_tokens), float(s.num_accepted_tokens), per_pos, k=c.k
    )


def _estimates(r: SweepResult) -> tuple[str, list[tuple[str, AcceptanceEstimate]]]:
    """(where, [(mix, estimate)]) at the lowest load and the largest K."""
    load, k = r.rows[0].load, max(r.ks)
    out = []
    for m in r.mixes:
        c = r.cell(load, k, m)
        est = _cell_estimate(c) if c is not None else None
        if est is not None:
            out.append((m, est))
    return f"{r.rows[0].load_kind} {load:g}, K = {k}", out


def _realised(
    r: SweepResult,
    *,
    line: Callable[[str, AcceptanceEstimate, str | None, Role], Line | None],
    panel: Callable[[str, list[Line]], Panel],
) -> tuple[str, Panel | None]:
    """(where, a panel with a line per acceptance setting at the lowest load and largest K)."""
    where, ests = _estimates(r)
    lines = [x for m, e in ests if (x := line(m, e, m, "candidate")) is not None]
    return where, panel(f"simulated, {where}", lines) if lines else None


def sweep_alpha_chart(r: SweepResult) -> Chart | None:
    """Realised α by position per acceptance setting at the lowest load and largest K."""
    where, panel = _realised(r, line=alpha_line, panel=alpha_panel)
    if panel is None:
        return None
    return Chart(
        key="alpha_by_position",
        title="Simulated α by draft position",
        caption=f"{r.deployment}, {where}. Realised in the simulator's acceptance draws, with 95% "
        "Wilson intervals over its drafts.",
        panels=(panel,),
    )


def sweep_acceptance_length_chart(r: SweepResult) -> Chart | None:
    """Tokens per target pass (1..K+1) per acceptance setting at the lowest load and largest K."""
    where, panel = _realised(r, line=histogram_line, panel=pmf_panel)
    if panel is None:
        return None
    return Chart(
        key="acceptance_length",
        title="Simulated acceptance length",
        caption=f"{r.deployment}, {where}: how many tokens each verify pass emits (1 = the first "
        "draft was rejected).",
        panels=(panel,),
    )
