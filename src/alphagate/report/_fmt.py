"""Number formatting shared by the renderers: one unit convention (SI bytes), one loss marker."""

from __future__ import annotations

from alphagate.core.fmt import DASH, num
from alphagate.core.records import Interval

__all__ = [
    "LOSS",
    "fmt_alpha",
    "fmt_bytes",
    "fmt_count",
    "fmt_interval",
    "fmt_ms",
    "fmt_x",
    "fmt_x_marked",
]

#: Marks a net loss in text, so that pipes and NO_COLOR terminals see it too.
LOSS = "✗"


def fmt_alpha(x: float | None, digits: int = 3) -> str:
    """An acceptance figure, or an em dash when undefined/unreachable."""
    return num(x, f".{digits}f")


def fmt_x(x: float | None, digits: int = 2) -> str:
    """A ratio with a trailing ×."""
    return num(x, f".{digits}f", "×")


def fmt_x_marked(x: float | None, digits: int = 2) -> str:
    """A speedup: red and marked ✗ when below 1 (a net loss)."""
    if x is None:
        return DASH
    s = f"{x:.{digits}f}×"
    return f"[red]{s} {LOSS}[/red]" if x < 1.0 else s


def fmt_interval(
    iv: Interval | None, digits: int = 2, suffix: str = "", brackets: bool = True
) -> str:
    """``[1.17–1.40]`` (an open end as ``…``), or empty when there is no interval; marked ✗ when
    it holds 1 inside it (the prediction could go either way)."""
    if iv is None or (iv.low is None and iv.high is None):
        return ""
    text = iv.text(f".{digits}f", suffix)
    if not brackets:
        text = text[1:-1]
    return f"{text}?" if iv.straddles(1.0) else text


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
