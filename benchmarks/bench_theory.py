"""Closed forms: vectorized numpy vs a plain Python loop over the same (α, K) grid.

Prints evaluations per second for each and their ratio (reference run in the same process).
"""

from __future__ import annotations

import time

import numpy as np

from alphagate import theory


def python_reference(alphas: list[float], ks: list[int]) -> list[float]:
    return [sum(a**i for i in range(k + 1)) for a, k in zip(alphas, ks, strict=True)]


def main() -> None:
    rng = np.random.default_rng(0)
    n = 1_000_000
    alphas = rng.uniform(0.0, 0.99, n)
    ks = rng.integers(1, 9, n)

    t0 = time.perf_counter()
    e = theory.expected_tokens_per_pass(alphas, ks)
    t_vec = time.perf_counter() - t0

    m = 100_000
    t0 = time.perf_counter()
    ref = python_reference(alphas[:m].tolist(), ks[:m].tolist())
    t_ref = (time.perf_counter() - t0) * (n / m)
    np.testing.assert_allclose(e[:m], ref, rtol=1e-12)

    t0 = time.perf_counter()
    rho = theory.draft_acceptance_rate(alphas[:100_000], ks[:100_000])
    theory.alpha_from_draft_acceptance_rate(rho, ks[:100_000])
    t_inv = time.perf_counter() - t0

    print(f"E(α,K) vectorized: {n / t_vec / 1e6:8.1f} M evals/s")
    print(f"E(α,K) Python loop: {n / t_ref / 1e6:7.2f} M evals/s (reference)")
    print(f"ratio vectorized / reference: {t_ref / t_vec:.1f}×")
    print(f"ρ → α inversion (elementwise root finding): {100_000 / t_inv / 1e3:.0f} k inversions/s")


if __name__ == "__main__":
    main()
