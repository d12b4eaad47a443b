"""The one rule for printing a figure that may be missing: an em dash for ``None``."""

from __future__ import annotations

__all__ = ["DASH", "num"]

#: What every table prints for a figure that is undefined or was not measured.
DASH = "—"


def num(x: float | None, spec: str = ".2f", suffix: str = "") -> str:
    """``x`` in the format ``spec`` (and ``suffix``), or :data:`DASH` when it is ``None``."""
    return DASH if x is None else f"{x:{spec}}{suffix}"
