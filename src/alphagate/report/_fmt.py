"""How every renderer writes a number: ratios, percentages, 95% intervals, predicted ranges,
milliseconds, bytes and counts, and the mark of a net loss — one home per rule.

Two rules live below this layer because the plan builder and the traffic classes print with them
too: a missing figure is :data:`alphagate.core.fmt.DASH` (:func:`alphagate.core.fmt.num`), and a
predicted range is written by :meth:`alphagate.core.records.Interval.text`. Everything else that
``alphagate.report`` prints goes through the functions here.
"""

from __future__ import annotations

from typing import Protocol

from alphagate.core.fmt import DASH, num
from alphagate.core.records import Interval

__all__ = [
    "LOSS",
    "fmt_alpha",
    "fmt_bytes",
    "fmt_ci",
    "fmt_count",
    "fmt_interval",
    "fmt_ms",
    "fmt_pct",
    "fmt_span",
    "fmt_x",
    "fmt_x_marked",
    "loss",
    "with_ci",
]

#: Marks a net loss in text, so that pipes and NO_COLOR terminals see it too.
LOSS = "✗"


class Bounds(Protocol):
    """A 95% interval of any record that has one: its two ends."""

    @property
    def low(self) -> float | None: ...

    @property
    def high(self) -> float | None: ...


def loss(text: str, *, compact: bool = False) -> str:
    """``text`` in red with the loss mark after it (``compact``: no space, for dense grids)."""
    return f"[red]{text}{'' if compact else ' '}{LOSS}[/red]"


def fmt_alpha(x: float | None, digits: int = 3) -> str:
    """An acceptance figure (α, ρ or τ), or an em dash when undefined/unreachable."""
    return num(x, f".{digits}f")


def fmt_x(x: float | None, digits: int = 2) -> str:
    """A ratio with a trailing ×."""
    return num(x, f".{digits}f", "×")


def fmt_x_marked(x: float | None, digits: int = 2, *, compact: bool = False) -> str:
    """A speedup: red and marked ✗ when below 1 (a net loss); ``compact`` (a dense grid whose
    title says it holds ratios) drops the × and the space before the mark."""
    text = num(x, f".{digits}f") if compact else fmt_x(x, digits)
    return loss(text, compact=compact) if x is not None and x < 1.0 else text


def fmt_pct(share: float | None, spec: str = ".0f") -> str:
    """A share (0.93) as a percentage (``93%``)."""
    return num(None if share is None else share * 100, spec, "%")


def fmt_ci(ci: Bounds | None, digits: int = 3) -> str:
    """A 95% interval as ``[0.712, 0.801]``; an em dash when there is none."""
    if ci is None or ci.low is None or ci.high is None:
        return DASH
    return f"[{ci.low:.{digits}f}, {ci.high:.{digits}f}]"


def with_ci(value: str, ci: Bounds | None, digits: int = 3) -> str:
    """``value`` followed by its 95% interval, or alone when it has none."""
    if ci is None or ci.low is None or ci.high is None:
        return value
    return f"{value} {fmt_ci(ci, digits)}"


def fmt_span(low: str, high: str, *, spaced: bool = False) -> str:
    """A range whose ends are already written: ``1–64``, or ``0.8 ms – 2.4 ms`` (``spaced``,
    for ends that carry a unit)."""
    return f"{low} – {high}" if spaced else f"{low}–{high}"


def fmt_interval(
    iv: Interval | None,
    digits: int = 2,
    suffix: str = "",
    *,
    brackets: bool = True,
    mark: bool = True,
) -> str:
    """A predicted range, ``[1.17–1.40]`` (an open end as ``…``), or empty when there is none;
    with ``mark``, a ``?`` when it holds 1 inside it (the prediction could go either way)."""
    if iv is None or (iv.low is None and iv.high is None):
        return ""
    text = iv.text(f".{digits}f", suffix)
    if not brackets:
        text = text[1:-1]
    return f"{text}?" if mark and iv.straddles(1.0) else text


def fmt_ms(x: float | None, digits: int = 1) -> str:
    return num(x, f".{digits}f")


def fmt_bytes(n: float) -> str:
    """Bytes in SI units (kB, MB, GB), as GPU memory and bandwidth are quoted."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n:.0f} B"


def fmt_count(n: float) -> str:
    """A parameter count with an SI suffix (K, M, B)."""
    for unit, size in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.3f} {unit}"
    return f"{n:.0f}"
