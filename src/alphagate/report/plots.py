"""Draw a :class:`~alphagate.report.charts.Chart` with matplotlib — one style for every plot.

Pure: a chart in, a :class:`~matplotlib.figure.Figure` out, and the figure as PNG bytes or as SVG
text to inline in HTML. The style is chosen for reading at a glance: the Okabe–Ito colour-blind
safe palette (Okabe & Ito 2008, "Color Universal Design"), a colour per group and a marker shape
of its own for every series — hollow on a dashed line — so that two legend entries never differ
by a dash pattern alone, ticks at the loads actually run, ratios labelled with ×, a legend on
every panel, and the unit in every axis label.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import matplotlib

matplotlib.use("Agg")

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter, NullLocator

from alphagate.report.charts.spec import Chart, Line, Panel

__all__ = ["OKABE_ITO", "Look", "draw", "figure_png", "figure_svg", "looks", "series_key"]

#: Okabe–Ito, without its black (kept for "no speculation") and with yellow last (weak on white).
OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442")
BASELINE_COLOR = "#000000"
REF_COLOR = "#555555"
#: one more shape than colours, so that colour and shape never repeat together before 70 series
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "h")
PANEL_W_IN, PANEL_H_IN, PER_ROW = 4.9, 4.1, 3

_STYLE: dict[Any, Any] = {
    "font.size": 9.5,
    "axes.titlesize": 10,
    "axes.labelsize": 9.5,
    "legend.fontsize": 8.5,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "svg.fonttype": "none",  # text stays text: small, crisp, selectable
    "svg.hashsalt": "alphagate",  # ids that do not change from run to run
    "figure.dpi": 100,
}


@contextmanager
def _style() -> Iterator[None]:
    with matplotlib.rc_context(_STYLE):
        yield


def _plain(value: float, _pos: object = None) -> str:
    return f"{value:g}"


def _ratio(value: float, _pos: object = None) -> str:
    return f"{value:g}×"


@dataclass(frozen=True)
class Look:
    """How one series is drawn: its colour (black for the baseline), marker, whether the marker
    is filled, and the line style (none for points)."""

    colour: str
    marker: str
    filled: bool
    linestyle: str

    @property
    def face(self) -> str:
        """The marker's fill: its colour, or white (hollow)."""
        return self.colour if self.filled else "white"


def series_key(line: Line) -> tuple[bool, str, str]:
    """A series across the panels of a chart: the same key, the same look."""
    return (line.baseline, line.group or line.label, line.label)


def looks(chart: Chart) -> dict[tuple[bool, str, str], Look]:
    """The look of every series of a chart: a colour per group (black for the baseline, which
    is the same for every group), a marker shape per series, hollow markers on dashed lines."""
    colours: dict[str, str] = {}
    out: dict[tuple[bool, str, str], Look] = {}
    for panel in chart.panels:
        for line in panel.lines:
            key = series_key(line)
            if key in out:
                continue
            group = line.group or line.label
            if line.baseline:
                colour = BASELINE_COLOR
            else:
                colour = colours.setdefault(group, OKABE_ITO[len(colours) % len(OKABE_ITO)])
            ls = "none" if line.points else "--" if line.dashed else "-"
            out[key] = Look(colour, MARKERS[len(out) % len(MARKERS)], not line.dashed, ls)
    return out


def _draw_band(ax: Axes, line: Line, colour: str) -> None:
    """A predicted range: a shaded band around the curve (no offset: it is one series)."""
    assert line.low is not None and line.high is not None
    ax.fill_between(line.x, line.low, line.high, color=colour, alpha=0.15, lw=0, label="_nolegend_")


def _draw_errorbars(ax: Axes, line: Line, lk: Look, dx: float) -> None:
    """An interval at each point, offset by ``dx`` so that intervals at the same x stay apart."""
    assert line.low is not None and line.high is not None
    yerr = [
        [max(y - lo, 0.0) for y, lo in zip(line.y, line.low, strict=True)],
        [max(hi - y, 0.0) for y, hi in zip(line.y, line.high, strict=True)],
    ]
    ax.errorbar(
        [x + dx for x in line.x],
        line.y,
        yerr=yerr,
        color=lk.colour,
        marker=lk.marker,
        mfc=lk.face,
        ls=lk.linestyle,
        capsize=3,
        ms=5,
        label=line.label,
    )


def _draw_steps(ax: Axes, line: Line, lk: Look) -> None:
    ax.step(line.x, line.y, where="post", color=lk.colour, lw=1.8, label=line.label)
    ax.plot(
        line.x[:-1], line.y[:-1], ls="none", marker=lk.marker, mfc=lk.face, color=lk.colour, ms=4
    )


def _draw_curve(ax: Axes, line: Line, lk: Look) -> None:
    ax.plot(
        line.x,
        line.y,
        color=lk.colour,
        marker=lk.marker,
        mfc=lk.face,
        markevery=max(1, len(line.x) // 8),  # a dense curve (a CDF) keeps a few markers
        ls=lk.linestyle,
        lw=2.0 if line.baseline else 1.5,
        ms=7 if line.points else 5,
        label=line.label,
    )


def _annotate_points(ax: Axes, line: Line, colour: str) -> None:
    for x, y, text in zip(line.x, line.y, line.point_labels or (), strict=False):
        ax.annotate(
            text,
            (x, y),
            textcoords="offset points",
            xytext=(0, 7),
            ha="center",
            fontsize=7,
            color=colour,
        )


def _draw_lines(ax: Axes, panel: Panel, look: dict[tuple[bool, str, str], Look]) -> None:
    n = len(panel.lines)
    for i, line in enumerate(panel.lines):
        if not line.x:
            continue
        lk = look[series_key(line)]
        ranged = line.low is not None and line.high is not None
        if ranged and line.band:
            _draw_band(ax, line, lk.colour)
        if ranged and not line.band:
            _draw_errorbars(ax, line, lk, dx=(i - (n - 1) / 2) * 0.06)
        elif line.steps:
            _draw_steps(ax, line, lk)
        else:
            _draw_curve(ax, line, lk)
        _annotate_points(ax, line, lk.colour)


_HATCHES = ("", "//", "..", "xx", "\\\\", "oo")


def _draw_stacked(ax: Axes, panel: Panel, look: dict[tuple[bool, str, str], Look]) -> None:
    """One bar per x, each series a segment on the ones before it."""
    ax.grid(axis="x", visible=False)
    bottom: dict[float, float] = {}
    for line in panel.lines:
        below = [bottom.get(x, 0.0) for x in line.x]
        ax.bar(line.x, line.y, width=0.6, bottom=below, color=look[series_key(line)].colour,
               label=line.label)  # fmt: skip
        for x, y in zip(line.x, line.y, strict=True):
            bottom[x] = bottom.get(x, 0.0) + y


def _draw_bars(ax: Axes, panel: Panel, look: dict[tuple[bool, str, str], Look]) -> None:
    if panel.stacked:
        _draw_stacked(ax, panel, look)
        return
    ax.grid(axis="x", visible=False)
    drawn = [line for line in panel.lines if line.x]
    width = 0.8 / max(len(drawn), 1)
    colours = [look[series_key(line)].colour for line in drawn]
    for i, line in enumerate(drawn):
        xs = [x + (i - (len(drawn) - 1) / 2) * width for x in line.x]
        # bars of one colour in one panel (a group measured two ways) tell apart by their hatch
        hatch = _HATCHES[colours[:i].count(colours[i]) % len(_HATCHES)]
        ax.bar(
            xs,
            line.y,
            width=width * 0.95,
            color=colours[i],
            hatch=hatch or None,
            edgecolor="white" if hatch else None,
            label=line.label,
        )


def _wide(panel: Panel) -> bool:
    """Whether the panel's values span enough (4× or more) for a log y axis to help."""
    ys = [y for line in panel.lines for y in line.y if math.isfinite(y) and y > 0]
    return bool(ys) and max(ys) >= 4 * min(ys)


def _positive_x(panel: Panel) -> bool:
    """Whether any x value can sit on a log axis (all-zero gaps, say, cannot)."""
    return any(math.isfinite(x) and x > 0 for line in panel.lines for x in line.x)


def _axes(ax: Axes, panel: Panel) -> None:
    x_log = panel.x_log and _positive_x(panel)
    if x_log:
        ax.set_xscale("log")
    if panel.y_log and _wide(panel):
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_minor_formatter(NullFormatter())
    if panel.x_ticks:
        ax.set_xticks(panel.x_ticks, panel.x_tick_labels or [_plain(x) for x in panel.x_ticks])
        ax.xaxis.set_minor_locator(NullLocator())
    elif x_log:
        ax.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.xaxis.set_major_formatter(FuncFormatter(_plain))
    ax.yaxis.set_major_formatter(FuncFormatter(_ratio if panel.y_ratio else _plain))
    if panel.y_range is not None:
        ax.set_ylim(*panel.y_range)
    ax.set_title(panel.title)
    ax.set_xlabel(panel.x_label)
    ax.set_ylabel(panel.y_label)


def _legend_columns(labels: Sequence[str]) -> int:
    """The most columns (up to 3) whose legend still fits under a panel. matplotlib splits the
    entries as ``numpy.array_split`` does (the first columns one longer), and the legend is
    centred on the axes, which sit right of the panel's centre (the y label is on the left)."""
    room = (PANEL_W_IN - 0.8) * 72  # points
    per_char = 0.55 * _STYLE["legend.fontsize"]
    handle = 5.2 * _STYLE["legend.fontsize"]  # handle, the pad after it, the column spacing
    for ncol in (3, 2):
        if len(labels) < ncol:
            continue
        base, extra = divmod(len(labels), ncol)
        sizes = [base + (i < extra) for i in range(ncol)]
        starts = [sum(sizes[:i]) for i in range(ncol)]
        cols = [labels[a : a + n] for a, n in zip(starts, sizes, strict=True)]
        width = sum(max(len(t) for t in col) * per_char + handle for col in cols)
        if width <= room:
            return ncol
    return 1


def _draw_panel(ax: Axes, panel: Panel, look: dict[tuple[bool, str, str], Look]) -> None:
    if panel.bars:
        _draw_bars(ax, panel, look)
    else:
        _draw_lines(ax, panel, look)
    for i, ref in enumerate(panel.refs):
        ax.axhline(ref.y, color=REF_COLOR, lw=1.1, ls=(":", "-.")[i % 2], label=ref.label)
        if len(panel.refs) > 1:  # several grey lines: each says what it is where it is drawn
            ax.annotate(
                ref.label,
                (1.0, ref.y),
                xycoords=("axes fraction", "data"),
                xytext=(-2, 2),
                textcoords="offset points",
                ha="right",
                va="bottom",
                fontsize=7,
                color=REF_COLOR,
            )
    _axes(ax, panel)
    ax.legend(
        loc="upper center",
        bbox_to_anchor=(0.5, -0.2),
        ncol=_legend_columns(ax.get_legend_handles_labels()[1]),
        frameon=False,
        handlelength=2.2,
    )


def draw(chart: Chart, *, title: bool = True) -> Figure:
    """The chart as a figure: up to three panels per row, a legend under every panel."""
    with _style():
        n = len(chart.panels)
        cols = min(n, PER_ROW)
        rows = -(-n // cols)
        fig = Figure(figsize=(PANEL_W_IN * cols, PANEL_H_IN * rows), layout="constrained")
        axes = fig.subplots(rows, cols, squeeze=False, sharey=chart.share_y).ravel()
        look = looks(chart)
        for ax, panel in zip(axes, chart.panels, strict=False):
            _draw_panel(ax, panel, look)
        for ax in axes[n:]:
            ax.set_visible(False)
        if title:
            fig.suptitle(chart.title, fontsize=10)
    return fig


def figure_png(fig: Figure, dpi: int = 120) -> bytes:
    """The figure as PNG bytes."""
    buf = io.BytesIO()
    with _style():
        fig.savefig(buf, format="png", dpi=dpi, metadata={"Software": None})
    return buf.getvalue()


_PROLOG = re.compile(r"^.*?(?=<svg)", re.S)
_ID = re.compile(r'\bid="([^"]+)"')


def figure_svg(fig: Figure, id_prefix: str) -> str:
    """The figure as an ``<svg>`` element to inline in HTML: no XML prolog, a viewBox that scales
    to its container, and every id prefixed so that several figures on one page never clash."""
    buf = io.StringIO()
    with _style():
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    svg = _PROLOG.sub("", buf.getvalue(), count=1)
    for old in dict.fromkeys(_ID.findall(svg)):
        new = f"{id_prefix}-{old}"
        svg = svg.replace(f'id="{old}"', f'id="{new}"').replace(f"#{old})", f"#{new})")
        svg = svg.replace(f'href="#{old}"', f'href="#{new}"')
    return svg.strip()
