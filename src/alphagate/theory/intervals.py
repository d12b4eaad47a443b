"""Confidence intervals for acceptance rates counted from drafts.

Wilson, E. B. (1927), "Probable inference, the law of succession, and statistical inference",
JASA 22(158):209–212: the score interval for a binomial proportion. Unlike the normal
approximation p ± z·√(p(1−p)/n) it stays inside [0, 1] and keeps its coverage near 0 and 1,
where acceptance rates at deep draft positions live.

Counting drafts as independent trials is an approximation: acceptances of one sequence's
consecutive steps are correlated, so the interval is the narrowest honest one, not a wide one.

:func:`ratio_interval` is the interval of a ratio measured once per repeated run (candidate ÷
baseline, one pair of runs each): Student's t on the logarithms (a ratio is multiplicative, and
its log is near-normal for run-to-run noise of a few per cent), n − 1 degrees of freedom.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from alphagate.theory._arrays import FloatArray, as_float

__all__ = ["Z_95", "ratio_interval", "wilson_interval"]

#: The two-sided 95% standard-normal quantile.
Z_95 = 1.959963984540054


def wilson_interval(
    successes: npt.ArrayLike, trials: npt.ArrayLike, z: float = Z_95
) -> tuple[FloatArray, FloatArray]:
    """(low, high) of the Wilson score interval for ``successes`` out of ``trials``.

    Broadcasts; NaN where ``trials`` is 0 (nothing was observed). Raises ``ValueError`` when
    successes are negative or exceed the trials.
    """
    s, n = np.broadcast_arrays(as_float(successes), as_float(trials))
    if np.any(s < 0) or np.any(s > n):
        raise ValueError("successes must lie in [0, trials]")
    with np.errstate(divide="ignore", invalid="ignore"):
        p = s / n
        z2n = z * z / n
        centre = (p + z2n / 2.0) / (1.0 + z2n)
        half = z / (1.0 + z2n) * np.sqrt(p * (1.0 - p) / n + z2n / (4.0 * n))
    seen = n > 0
    low = np.where(seen, np.clip(centre - half, 0.0, 1.0), np.nan)
    high = np.where(seen, np.clip(centre + half, 0.0, 1.0), np.nan)
    return np.asarray(low), np.asarray(high)


def ratio_interval(ratios: npt.ArrayLike) -> tuple[float, float, float]:
    """(geometric mean, low, high): the 95% Student's t interval of positive ratios, one per
    repeated run, on their logarithms. Needs at least two ratios; raises ``ValueError`` for
    fewer, or for a ratio that is not positive and finite."""
    from scipy.stats import t as student_t  # imported here: ~0.3 s, only when runs repeat

    r = as_float(ratios).ravel()
    if r.size < 2:
        raise ValueError("an interval between runs needs at least two runs")
    if not np.all(np.isfinite(r) & (r > 0)):
        raise ValueError("ratios must be positive and finite")
    logs = np.log(r)
    m = float(logs.mean())
    half = float(student_t.ppf(0.975, r.size - 1)) * float(logs.std(ddof=1)) / np.sqrt(r.size)
    return float(np.exp(m)), float(np.exp(m - half)), float(np.exp(m + half))
