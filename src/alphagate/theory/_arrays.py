"""Array helpers shared by the closed forms: coercion and a vectorized monotone root finder."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt
from scipy.optimize.elementwise import find_root

FloatArray = npt.NDArray[np.float64]

__all__ = ["FloatArray", "as_float", "solve_increasing_on_unit_interval"]


def as_float(x: npt.ArrayLike) -> FloatArray:
    """Coerce to a float64 array (0-d for scalars)."""
    return np.asarray(x, dtype=np.float64)


def solve_increasing_on_unit_interval(
    g: Callable[..., FloatArray],
    target: npt.ArrayLike,
    *params: npt.ArrayLike,
) -> FloatArray:
    """Solve ``g(alpha, *params) = target`` for alpha in [0, 1], elementwise.

    ``g`` must be elementwise and increasing in alpha. Targets at or below ``g(0)`` give 0;
    targets above ``g(1)`` give NaN (no alpha reaches them). ``params`` broadcast with ``target``.
    """
    arrays = np.broadcast_arrays(as_float(target), *(as_float(p) for p in params))
    t, rest = arrays[0], arrays[1:]
    g0 = g(np.zeros_like(t), *rest)
    g1 = g(np.ones_like(t), *rest)
    below = t <= g0
    inside = ~below & (t <= g1)
    out = np.where(below, 0.0, np.nan)
    if np.any(inside):
        t_in = t[inside]
        rest_in = tuple(p[inside] for p in rest)
        res = find_root(
            lambda a, tt, *pp: g(a, *pp) - tt,
            (np.zeros_like(t_in), np.ones_like(t_in)),
            args=(t_in, *rest_in),
            tolerances={"xatol": 1e-14, "xrtol": 0.0},
        )
        out[inside] = res.x
    return np.asarray(out, dtype=np.float64)
