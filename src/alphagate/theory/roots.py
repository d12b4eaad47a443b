"""The one root finder: every "where does it cross" question in alphagate goes through here.

- :func:`solve_increasing_on_unit_interval` — vectorized, for closed forms that are increasing
  in α on [0, 1] (break-even α, α for a target speedup, α from ρ or τ); scipy's elementwise
  bracketing solver, imported on first use so that a closed-form answer starts instantly.
- :func:`bisect` — scalar, for monotone predicates that are expensive or only piecewise smooth:
  the simulator's break-even α, the batch size where speculation stops paying, knee searches.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from alphagate.theory._arrays import FloatArray, as_float

__all__ = ["bisect", "solve_increasing_on_unit_interval"]


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
    t_in = t[inside]
    rest_in = tuple(p[inside] for p in rest)
    if 0 < t_in.size <= SCALAR_ROOTS:
        out[inside] = [_brent(g, t_in[i], tuple(p[i] for p in rest_in)) for i in range(t_in.size)]
    elif t_in.size:
        from scipy.optimize.elementwise import find_root

        res = find_root(
            lambda a, tt, *pp: g(a, *pp) - tt,
            (np.zeros_like(t_in), np.ones_like(t_in)),
            args=(t_in, *rest_in),
            tolerances={"xatol": XATOL, "xrtol": 0.0},
        )
        out[inside] = res.x
    return np.asarray(out, dtype=np.float64)


#: up to this many roots are solved one by one with Brent's method: the elementwise solver's
#: set-up costs milliseconds per call, Brent's method tens of microseconds per root
SCALAR_ROOTS = 8
#: the absolute tolerance on α of both solvers
XATOL = 1e-14


def _brent(g: Callable[..., FloatArray], target: float, params: tuple[float, ...]) -> float:
    from scipy.optimize import brentq

    def f(a: float) -> float:
        return float(g(np.asarray([a]), *(np.asarray([p]) for p in params))[0]) - target

    return float(brentq(f, 0.0, 1.0, xtol=XATOL, rtol=4 * np.finfo(float).eps))


def bisect(
    crossed: Callable[[float], bool],
    lo: float,
    hi: float,
    *,
    tol: float,
    scale: str = "linear",
) -> float:
    """Where a monotone predicate turns true, with ``crossed(lo)`` false and ``crossed(hi)`` true.

    ``scale``: ``"linear"`` (stop when hi − lo ≤ tol, return the midpoint), ``"log"`` (stop when
    hi / lo − 1 ≤ tol, return the geometric midpoint; lo > 0) or ``"integer"`` (return the
    smallest integer at which the predicate is true; ``tol`` is ignored).
    """
    if scale == "integer":
        a, b = float(math.floor(lo)), float(math.ceil(hi))
        while b - a > 1:
            mid = float((a + b) // 2)
            if crossed(mid):
                b = mid
            else:
                a = mid
        return float(b)
    if scale == "log":
        if lo <= 0:
            raise ValueError("a log-scale bisection needs lo > 0")
        while hi / lo - 1.0 > tol:
            mid = math.sqrt(lo * hi)
            if crossed(mid):
                hi = mid
            else:
                lo = mid
        return math.sqrt(lo * hi)
    if scale != "linear":
        raise ValueError(f"unknown scale {scale!r}")
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        if crossed(mid):
            hi = mid
        else:
            lo = mid
    return 0.5 * (lo + hi)
