"""Acceptance from counts: exact figures by hand, and interval coverage by Monte-Carlo."""

from __future__ import annotations

import numpy as np
import pytest

from alphagate import theory
from alphagate.measure.estimate import estimate
from alphagate.sim.kernel import acceptance_histogram, accepted_drafts, accepted_per_position


def test_figures_from_counts_by_hand() -> None:
    # 10 steps of K = 3 accepting 0,0,1,1,1,2,2,3,3,3 drafts
    e = estimate(10, 30, 16, [8, 5, 3])
    assert e.k == 3
    assert e.draft_acceptance_rate == pytest.approx(16 / 30)
    assert e.mean_acceptance_length == pytest.approx(1 + 16 / 10)
    assert e.acceptance_histogram == [2, 3, 2, 3]
    assert e.alpha_by_pos == pytest.approx([0.8, 5 / 8, 3 / 5])
    assert e.per_position_acceptance == pytest.approx([0.8, 0.5, 0.3])
    lo, hi = e.mean_acceptance_length_ci.low, e.mean_acceptance_length_ci.high  # type: ignore[union-attr]
    sd = np.std([0, 0, 1, 1, 1, 2, 2, 3, 3, 3], ddof=1)
    assert hi - lo == pytest.approx(2 * 1.959964 * sd / np.sqrt(10), rel=1e-6)
    assert e.alpha_iid == pytest.approx(float(theory.alpha_from_draft_acceptance_rate(16 / 30, 3)))


def test_no_drafts_is_no_estimate() -> None:
    e = estimate(0, 0, 0, [])
    assert e.draft_acceptance_rate is None and e.draft_acceptance_rate_ci is None


@pytest.mark.parametrize(("alpha", "k"), [(0.6, 3), (0.85, 5)])
def test_intervals_cover_the_truth(alpha: float, k: int) -> None:
    """Over 400 windows of 500 drafts each, the 95% intervals contain the true ρ, τ, α₁ about
    95% of the time: the count of misses is Binomial(400, 0.05) — mean 20, sd 4.4 — and a bound
    of 40 (4.5 sd) is broken by chance with probability below 1e-5."""
    rng = np.random.default_rng(7)
    thr = np.cumprod(np.full(k, alpha))[None, :]
    rho_true = float(theory.draft_acceptance_rate(alpha, k))
    tau_true = float(theory.mean_acceptance_length(alpha, k))
    misses = {"rho": 0, "tau": 0, "a1": 0}
    for _ in range(400):
        a = accepted_drafts(rng.random(500), thr, np.zeros(500, dtype=np.int64))
        per = accepted_per_position(acceptance_histogram(a, k))
        e = estimate(500, 500 * k, float(a.sum()), [float(x) for x in per])
        ci = e.draft_acceptance_rate_ci
        misses["rho"] += not (ci.low <= rho_true <= ci.high)  # type: ignore[union-attr]
        ci = e.mean_acceptance_length_ci
        misses["tau"] += not (ci.low <= tau_true <= ci.high)  # type: ignore[union-attr]
        ci = e.alpha_by_pos_ci[0]
        misses["a1"] += not (ci.low <= alpha <= ci.high)  # type: ignore[union-attr]
    assert all(m <= 40 for m in misses.values()), misses
    assert all(m >= 3 for m in misses.values()), misses  # not vacuously wide either
