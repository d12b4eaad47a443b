"""What a figure is, as data: a :class:`Chart` of panels, a :class:`Panel` of series and
reference lines, the :data:`Role` of every series, and the axis labels every chart family shares.

A panel's x ticks are the loads actually run, never a power-of-two grid;
:mod:`alphagate.report.plots` draws a chart, and the tests read these records instead of pixels.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from alphagate.core.records import Interval

__all__ = [
    "ALPHA_LABEL",
    "BREAK_EVEN",
    "CDF_LABEL",
    "ITL_LABEL",
    "K_LABEL",
    "RATIO_LABEL",
    "SHARE_LABEL",
    "TAU_LABEL",
    "Chart",
    "HLine",
    "Line",
    "Panel",
    "Role",
    "few",
    "load_axis",
    "or_nan",
    "tick_labels",
    "with_band",
]

RATIO_LABEL = "throughput speedup (×, speculative ÷ off)"
ITL_LABEL = "ITL per token (ms)"
ALPHA_LABEL = "conditional α (probability)"
TAU_LABEL = "tokens per target pass (τ, incl. bonus)"
SHARE_LABEL = "share of target passes"
K_LABEL = "K (draft tokens per step)"
CDF_LABEL = "fraction of tokens"

#: What a series stands for, so that code (and tests) select series by it, never by label:
#: ``baseline`` speculation off (drawn black); ``candidate`` speculation on (a simulated α, a
#: bench target, the plan's policy); ``fixed_k`` a plan's one fixed K beside its policy;
#: ``planned`` the α a plan assumes; ``measured`` a measurement drawn beside a prediction or a
#: measured α/acceptance length; ``schedule`` K against batch size; ``ratio`` candidate ÷ baseline.
Role = Literal["baseline", "candidate", "fixed_k", "planned", "measured", "schedule", "ratio"]


@dataclass(frozen=True)
class Line:
    """One series. ``role`` says what it stands for (a ``baseline`` line is black); lines that
    share ``group`` share a colour (a class's P50 and P99). ``low``/``high`` draw an interval
    around each point (a shaded band under the curve with ``band``: a prediction's range over
    the step-time constants); ``points`` draws markers only (a measurement at one or two loads
    is not a curve)."""

    label: str
    x: tuple[float, ...]
    y: tuple[float, ...]
    role: Role = "candidate"
    dashed: bool = False
    group: str | None = None
    low: tuple[float, ...] | None = None
    high: tuple[float, ...] | None = None
    point_labels: tuple[str, ...] | None = None
    steps: bool = False
    points: bool = False
    band: bool = False

    @property
    def baseline(self) -> bool:
        """Speculation off: drawn black, the same for every group."""
        return self.role == "baseline"


@dataclass(frozen=True)
class HLine:
    """A horizontal reference: the 1× break-even, a gate threshold, an SLO."""

    y: float
    label: str


#: The 1× line of every ratio panel.
BREAK_EVEN = HLine(1.0, "break-even (1×)")


@dataclass(frozen=True)
class Panel:
    title: str
    x_label: str
    y_label: str
    lines: tuple[Line, ...]
    refs: tuple[HLine, ...] = ()
    x_ticks: tuple[float, ...] = ()
    x_tick_labels: tuple[str, ...] = ()
    x_log: bool = False
    y_log: bool = False
    y_ratio: bool = False
    y_range: tuple[float, float] | None = None
    bars: bool = False
    #: with ``bars``: each x's bars stacked on one another, not side by side
    stacked: bool = False


@dataclass(frozen=True)
class Chart:
    """One figure: ``key`` names its PNG file and its anchor in the report."""

    key: str
    title: str
    caption: str
    panels: tuple[Panel, ...]
    share_y: bool = False
    notes: tuple[str, ...] = field(default=())


def or_nan(x: float | None) -> float:
    """A value to draw: a missing one is a gap in the line (NaN), not a zero."""
    return math.nan if x is None else float(x)


def tick_labels(xs: Sequence[float]) -> tuple[str, ...]:
    """Every load as it was given: ``1``, ``8``, ``0.5``."""
    return tuple(f"{x:g}" for x in xs)


def load_axis(*, open_loop: bool) -> str:
    """The x label of a load axis: concurrency (closed loop) or request rate (open loop)."""
    return "request rate (req/s)" if open_loop else "concurrency (users)"


def few(xs: Sequence[float]) -> bool:
    """One or two loads: points to read, not a curve to follow."""
    return len(set(xs)) <= 2


def with_band(line: Line, intervals: Sequence[Interval | None]) -> Line:
    """``line`` with a shaded band when every point has a closed predicted range."""
    if not intervals or any(iv is None or iv.low is None or iv.high is None for iv in intervals):
        return line
    return replace(
        line,
        low=tuple(or_nan(iv.low) for iv in intervals if iv),
        high=tuple(or_nan(iv.high) for iv in intervals if iv),
        band=True,
    )
