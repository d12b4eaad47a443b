"""Number formatting shared by the renderers."""

from __future__ import annotations

__all__ = ["fmt_alpha", "fmt_bytes", "fmt_count", "fmt_x"]


def fmt_alpha(x: float | None, digits: int = 3) -> str:
    """An acceptance figure, or an em dash when undefined/unreachable."""
    return "—" if x is None else f"{x:.{digits}f}"


def fmt_x(x: float | None, digits: int = 2) -> str:
    """A speedup ratio with a trailing ×."""
    return "—" if x is None else f"{x:.{digits}f}×"


def fmt_bytes(n: float) -> str:
    """Binary-prefixed bytes (KiB, MiB, GiB)."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n:.0f} B"


def fmt_count(n: float) -> str:
    """A parameter count with an SI suffix (M, B)."""
    for unit, size in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.3f} {unit}"
    return f"{n:.0f}"
