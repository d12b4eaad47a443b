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


@pytest.mark.slow  # 400 windows, each three roots of ρ(α): ~2–3 s of CPU a case
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


def _window(
    rng: np.random.Generator, alphas: list[float], steps: int, k: int
) -> tuple[float, float, list[float]]:
    """One request per α, ``steps`` speculative steps each: (drafts, accepted, per position)."""
    acc, per = 0.0, np.zeros(k)
    for a in alphas:
        thr = np.cumprod(np.full(k, a))[None, :]
        x = accepted_drafts(rng.random(steps), thr, np.zeros(steps, dtype=np.int64))
        acc += float(x.sum())
        per += accepted_per_position(acceptance_histogram(x, k))
    return float(len(alphas) * steps), acc, [float(v) for v in per]


@pytest.mark.slow  # 300 windows, twice estimated: ~3–4 s of CPU
def test_batches_keep_the_interval_honest_for_mixed_traffic() -> None:
    """70% chat (α 0.7) and 30% code (α 0.4) requests, 40 requests of 50 steps in a window seen
    as 10 batches of 4 requests. Steps of one request share its α, so independent-steps intervals
    are far too narrow; the cluster-robust interval over batches (Student's t, 9 degrees of
    freedom) must cover the true mixture ρ in ≈ 95% of 300 windows: misses ~ Binomial(300, 0.05),
    mean 15, sd 3.8, and 270 covered (30 misses) is 4 sd out. The independent-steps interval covers
    about half of them (148 of 300 with this seed)."""
    rng = np.random.default_rng(11)
    k, per_batch, steps = 3, 4, 50
    rho = {a: float(theory.draft_acceptance_rate(a, k)) for a in (0.7, 0.4)}
    covered = {"batches": 0, "independent": 0}
    for _ in range(300):
        batches, drafts, accepted, per = [], 0.0, 0.0, np.zeros(k)
        tokens_true = 0.0
        for _b in range(10):
            alphas = [0.7 if rng.random() < 0.7 else 0.4 for _ in range(per_batch)]
            d, a, p = _window(rng, alphas, steps, k)
            batches.append((d, d * k, a))
            drafts, accepted, per = drafts + d, accepted + a, per + np.asarray(p)
            tokens_true += sum(rho[x] for x in alphas) * steps * k
        truth = 0.7 * rho[0.7] + 0.3 * rho[0.4]  # the mixture's ρ, what a gate should judge
        for name, b in (("batches", batches), ("independent", None)):
            e = estimate(drafts, drafts * k, accepted, [float(v) for v in per], batches=b)
            ci = e.draft_acceptance_rate_ci
            assert ci is not None
            covered[name] += ci.low <= truth <= ci.high
        assert e.interval_basis == "independent steps"
    assert covered["batches"] >= 270, covered
    assert covered["independent"] < covered["batches"], covered


def test_counts_no_decoder_produces_are_refused() -> None:
    with pytest.raises(ValueError, match="exceed"):
        estimate(100, 300, 400, [100, 100, 100])  # more accepted than drafted
    with pytest.raises(ValueError, match="must not grow"):
        estimate(100, 300, 150, [40, 60, 50])
    with pytest.raises(ValueError, match="drafts exceed"):
        estimate(500, 300, 100, [])
    with pytest.raises(ValueError, match="below the K the counts show"):
        estimate(100, 300, 150, [70, 50, 30], k=1)  # ρ would come out as α


def test_short_drafts_give_alpha_from_the_first_position() -> None:
    """K by batch size (6 at small batches, 2 at large) or an n-gram proposer: drafts propose
    fewer than K tokens, so ρ mixes lengths; α is the first position's acceptance."""
    rng = np.random.default_rng(3)
    alpha, n = 0.5, 20_000
    ks = rng.choice([6, 2], size=n)
    acc = np.zeros(n, dtype=np.int64)
    for k in (6, 2):
        m = ks == k
        thr = np.cumprod(np.full(k, alpha))[None, :]
        acc[m] = accepted_drafts(
            rng.random(int(m.sum())), thr, np.zeros(int(m.sum()), dtype=np.int64)
        )
    per = [float((acc > i).sum()) for i in range(6)]
    e = estimate(float(n), float(ks.sum()), float(acc.sum()), per)
    assert e.k == 6
    assert e.alpha_iid == pytest.approx(per[0] / n)
    assert e.alpha_iid_ci is not None and e.alpha_iid_ci.low <= alpha <= e.alpha_iid_ci.high
    # inverting ρ at K = 6 would have said otherwise
    wrong = float(theory.alpha_from_draft_acceptance_rate(e.draft_acceptance_rate, 6))  # type: ignore[arg-type]
    assert abs(wrong - alpha) > 0.05


def test_extrapolated_counts_may_differ_by_what_the_caller_allows() -> None:
    """Counts read at one instant must sum to the accepted total within 0.1%; Prometheus'
    increase(), which extrapolates each series on its own, passes its own tolerance."""
    with pytest.raises(ValueError, match="per-position counts sum to 3,651"):
        estimate(2000, 6000, 3657, [1500, 1200, 951], 3)
    est = estimate(2000, 6000, 3657, [1500, 1200, 951], 3, sum_tol=0.01)
    assert est.num_accepted_tokens == 3657
    with pytest.raises(ValueError, match="per-position counts sum to"):
        estimate(2000, 6000, 3657, [1500, 1200, 851], 3, sum_tol=0.01)
