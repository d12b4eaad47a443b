"""Acceptance quantities and their conversions: α (conditional), ρ (draft acceptance rate), τ.

Sources:
- Leviathan, Kalman & Matias 2023, "Fast Inference from Transformers via Speculative Decoding"
  (arXiv 2211.17192): Eq. 1 (expected tokens per pass), Lemma 3.3 / Thm 3.5 / Cor. 3.6
  (acceptance from the draft and target distributions).
- vLLM ``vllm/v1/spec_decode/metrics.py``: ρ = accepted / drafted, τ = 1 + accepted / drafts
  ("Conventionally, mean acceptance length includes the bonus token"), per-position rate =
  accepted at position i / drafts (unconditional).
- EAGLE (Li et al. 2024, arXiv 2401.15077) §4: τ is the average number of tokens accepted per
  forward pass of the target, bonus included; n-α is the position-dependent conditional rate.

With K drafts and i.i.d. conditional acceptance α, the tokens emitted per target pass are a capped
geometric count, so in expectation:

    E(α, K) = (1 − α^(K+1)) / (1 − α) = 1 + Σ_{i=1..K} α^i
    τ = E                   (mean acceptance length, bonus included)
    ρ = (E − 1) / K         (accepted drafts ÷ drafted tokens)

With a per-position conditional vector α_1..α_K the unconditional rate at position i is
Π_{j≤i} α_j (what vLLM's per-position counters divided by drafts report), and E = 1 + Σ_i Π_{j≤i} α_j.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from alphagate.theory._arrays import FloatArray, as_float
from alphagate.theory.roots import solve_increasing_on_unit_interval

__all__ = [
    "acceptance_length_pmf",
    "acceptance_probability",
    "alpha_from_draft_acceptance_rate",
    "alpha_from_mean_acceptance_length",
    "conditional_from_unconditional",
    "draft_acceptance_rate",
    "draft_acceptance_rate_from_mean_acceptance_length",
    "equivalent_alpha",
    "expected_tokens_per_pass",
    "expected_tokens_per_pass_by_pos",
    "mean_acceptance_length",
    "mean_acceptance_length_from_draft_acceptance_rate",
    "total_variation_distance",
    "unconditional_from_conditional",
]


def expected_tokens_per_pass(alpha: npt.ArrayLike, k: npt.ArrayLike) -> FloatArray:
    """E(α, K) = (1 − α^(K+1)) / (1 − α): expected tokens per target pass (Leviathan Eq. 1).

    Elementwise over broadcast ``alpha`` and ``k``; E = K + 1 at α = 1 and E = 1 at α = 0 or K = 0.
    Computed as expm1 ratios so that α close to 1 does not lose precision to cancellation.
    """
    a = as_float(alpha)
    kk = as_float(k)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_a = np.log(a)
        ratio = np.expm1((kk + 1.0) * log_a) / np.expm1(log_a)
    return np.asarray(np.where(a >= 1.0, kk + 1.0, np.where(a <= 0.0, 1.0, ratio)))


def expected_tokens_per_pass_by_pos(alpha_by_pos: npt.ArrayLike) -> FloatArray:
    """E = 1 + Σ_i Π_{j≤i} α_j for a per-position conditional vector (EAGLE's n-α).

    ``alpha_by_pos``: shape ``[..., K]``; returns shape ``[...]``.
    """
    a = as_float(alpha_by_pos)
    if a.ndim == 0:
        raise ValueError("alpha_by_pos must have a trailing position axis of length K >= 1")
    return np.asarray(1.0 + np.cumprod(a, axis=-1).sum(axis=-1))


def mean_acceptance_length(alpha: npt.ArrayLike, k: npt.ArrayLike) -> FloatArray:
    """τ(α, K): expected mean acceptance length, bonus token included — equal to E(α, K)."""
    return expected_tokens_per_pass(alpha, k)


def draft_acceptance_rate(alpha: npt.ArrayLike, k: npt.ArrayLike) -> FloatArray:
    """ρ(α, K) = (E − 1) / K = α(1 − α^K) / (K(1 − α)): vLLM's accepted ÷ drafted."""
    kk = as_float(k)
    return np.asarray((expected_tokens_per_pass(alpha, kk) - 1.0) / kk)


def mean_acceptance_length_from_draft_acceptance_rate(
    rho: npt.ArrayLike, k: npt.ArrayLike
) -> FloatArray:
    """τ = 1 + K·ρ (exact: both count the same accepted drafts, vLLM metrics.py)."""
    return np.asarray(1.0 + as_float(k) * as_float(rho))


def draft_acceptance_rate_from_mean_acceptance_length(
    tau: npt.ArrayLike, k: npt.ArrayLike
) -> FloatArray:
    """ρ = (τ − 1) / K."""
    return np.asarray((as_float(tau) - 1.0) / as_float(k))


def alpha_from_draft_acceptance_rate(rho: npt.ArrayLike, k: npt.ArrayLike) -> FloatArray:
    """Invert ρ(α, K) numerically: the i.i.d. conditional α that yields draft acceptance rate ρ.

    ρ is strictly increasing in α on [0, 1] with ρ(0) = 0 and ρ(1) = 1; NaN outside [0, 1].
    """
    r = as_float(rho)
    alpha = solve_increasing_on_unit_interval(draft_acceptance_rate, np.clip(r, 0.0, 1.0), k)
    return np.asarray(np.where((r < 0.0) | (r > 1.0), np.nan, alpha))


def alpha_from_mean_acceptance_length(tau: npt.ArrayLike, k: npt.ArrayLike) -> FloatArray:
    """Invert τ(α, K) numerically; NaN outside the reachable range [1, K + 1]."""
    return alpha_from_draft_acceptance_rate(
        draft_acceptance_rate_from_mean_acceptance_length(tau, k), k
    )


def unconditional_from_conditional(alpha_by_pos: npt.ArrayLike) -> FloatArray:
    """Per-position unconditional rates r_i = Π_{j≤i} α_j (what vLLM's per-position metric shows).

    Shape ``[..., K]`` in and out.
    """
    return np.asarray(np.cumprod(as_float(alpha_by_pos), axis=-1))


def conditional_from_unconditional(per_pos_rates: npt.ArrayLike) -> FloatArray:
    """Conditional α_i = r_i / r_{i−1} (r_0 = 1) from vLLM's unconditional per-position rates.

    vLLM increments position i's counter only when drafts 0..i were all accepted, so its
    ``accepted_per_pos[i] / drafts`` is unconditional. Where r_{i−1} = 0 the conditional rate
    is undefined and NaN is returned. Shape ``[..., K]`` in and out.
    """
    r = as_float(per_pos_rates)
    if r.ndim == 0:
        raise ValueError("per_pos_rates must have a trailing position axis of length K >= 1")
    prev = np.concatenate([np.ones_like(r[..., :1]), r[..., :-1]], axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(np.where(prev > 0.0, r / prev, np.nan))


def acceptance_length_pmf(per_pos_rates: npt.ArrayLike) -> FloatArray:
    """P(τ = j) for j = 1..K+1 tokens per target pass, from the unconditional per-position rates.

    A pass emits j tokens when drafts 1..j−1 are accepted and draft j is not (or j = K + 1: all
    accepted, plus the bonus token), so P(j) = r_{j−1} − r_j with r_0 = 1 and r_{K+1} = 0. The
    mean of this distribution is E (= τ). Shape ``[..., K]`` in, ``[..., K + 1]`` out.
    """
    r = as_float(per_pos_rates)
    if r.ndim == 0:
        raise ValueError("per_pos_rates must have a trailing position axis of length K >= 1")
    ones = np.ones_like(r[..., :1])
    return np.asarray(np.concatenate([ones, r], axis=-1) - np.concatenate([r, 0.0 * ones], axis=-1))


def acceptance_probability(p: npt.ArrayLike, q: npt.ArrayLike) -> FloatArray:
    """β = Σ_x min(p(x), q(x)): chance a token drawn from draft q is accepted under target p.

    Leviathan Thm 3.5; α is the expectation of β over prefixes (Cor. 3.6). Reduces the last axis.
    """
    return np.asarray(np.minimum(as_float(p), as_float(q)).sum(axis=-1))


def total_variation_distance(p: npt.ArrayLike, q: npt.ArrayLike) -> FloatArray:
    """D_LK(p, q) = Σ|p − q| / 2 = 1 − Σ min(p, q) (Leviathan Def. 3.1, Lemma 3.3)."""
    return np.asarray(0.5 * np.abs(as_float(p) - as_float(q)).sum(axis=-1))


def equivalent_alpha(alpha_by_pos: npt.ArrayLike) -> float:
    """The i.i.d. α that gives the same E as a per-position conditional vector ``[K]``."""
    a = as_float(alpha_by_pos)
    if a.ndim != 1 or a.size == 0:
        raise ValueError("alpha_by_pos must be a non-empty 1-D vector")
    if np.all(a == a[0]):
        return float(a[0])
    return float(alpha_from_mean_acceptance_length(expected_tokens_per_pass_by_pos(a), a.size))
