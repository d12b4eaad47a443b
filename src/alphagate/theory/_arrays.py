"""Array coercion shared by the closed forms."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

__all__ = ["FloatArray", "as_float"]


def as_float(x: npt.ArrayLike) -> FloatArray:
    """Coerce to a float64 array (0-d for scalars)."""
    return np.asarray(x, dtype=np.float64)
