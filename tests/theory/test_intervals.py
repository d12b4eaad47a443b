"""Wilson score intervals: published values, coverage, and the edges."""

from __future__ import annotations

import numpy as np
import pytest

from alphagate import theory


@pytest.mark.parametrize(
    ("successes", "trials", "low", "high"),
    [
        # Newcombe (1998), Stat. Med. 17:857–872, Table II, method 3 (score interval, no
        # continuity correction)
        (81, 263, 0.2553, 0.3662),
        (15, 148, 0.0624, 0.1605),
        (0, 20, 0.0, 0.1611),
        (1, 29, 0.0061, 0.1718),
        (29, 29, 0.8830, 1.0),
    ],
)
def test_published_values(successes: int, trials: int, low: float, high: float) -> None:
    lo, hi = theory.wilson_interval(successes, trials)
    assert float(lo) == pytest.approx(low, abs=6e-5)
    assert float(hi) == pytest.approx(high, abs=6e-5)


def test_coverage_near_95_percent_for_acceptance_like_rates() -> None:
    rng = np.random.default_rng(7)
    n, reps = 300, 20_000
    for p in (0.4, 0.7, 0.9):
        x = rng.binomial(n, p, size=reps)  # [reps]
        lo, hi = theory.wilson_interval(x, n)
        covered = float(np.mean((lo <= p) & (p <= hi)))
        # the binomial standard error of a coverage of 0.95 over 20,000 replicates is 0.0015
        assert 0.935 < covered < 0.965, (p, covered)


def test_broadcasts_and_marks_an_empty_sample() -> None:
    lo, hi = theory.wilson_interval([3, 0, 5], [10, 0, 5])
    assert lo.shape == (3,) and np.isnan(lo[1]) and np.isnan(hi[1])
    assert hi[2] == 1.0 and lo[0] < 0.3 < hi[0]


def test_refuses_more_successes_than_trials() -> None:
    with pytest.raises(ValueError, match="successes"):
        theory.wilson_interval(11, 10)
