"""Confidence intervals for acceptance rates counted from drafts.

Wilson, E. B. (1927), "Probable inference, the law of succession, and statistical inference",
JASA 22(158):209–212: the score interval for a binomial proportion. Unlike the normal
approximation p ± z·√(p(1−p)/n) it stays inside [0, 1] and keeps its coverage near 0 and 1,
where acceptance rates at deep draft positions live.

Counting drafts as independent trials is an approximation: acceptances of one sequence's
consecutive steps are correlated, so the interval is the narrowest honest one, not a wide one.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from alphagate.theory._arrays import FloatArray, as_float

__all__ = ["Z_95", "wilson_interval"]

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
