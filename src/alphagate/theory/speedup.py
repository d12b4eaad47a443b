"""Speedup, break-even α, α for a target speedup, optimal K, and the operations cost.

Source: Leviathan, Kalman & Matias 2023 (arXiv 2211.17192) — Thm 3.8 (walltime improvement),
Cor. 3.9 (γ = 1 bound), Thm 3.11 (arithmetic operations), §3.5 (optimal γ).

Leviathan's iteration costs ``K·c + 1`` target-step units: K draft forwards at cost c each and one
target pass over the K + 1 positions, assumed as cheap as a plain decode step. Serving at batch
size > 1 breaks that assumption, so alphagate carries a verify-cost ratio ``v`` (time of the
K+1-token verify pass ÷ one plain decode step) and writes

    S(α, K, c, v) = E(α, K) / (K·c + v)

which is Thm 3.8 when v = 1. Break-even solves S = 1, i.e. E(α, K) = K·c + v.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from alphagate.theory._arrays import FloatArray, as_float
from alphagate.theory.acceptance import expected_tokens_per_pass, expected_tokens_per_pass_by_pos
from alphagate.theory.roots import solve_increasing_on_unit_interval

__all__ = [
    "alpha_breakeven",
    "alpha_for_speedup",
    "compute_bound_speedup",
    "iteration_cost",
    "operations_factor",
    "optimal_k",
    "speedup",
    "speedup_by_pos",
]


def iteration_cost(
    k: npt.ArrayLike, draft_cost: npt.ArrayLike, verify_cost: npt.ArrayLike
) -> FloatArray:
    """Time of one draft-and-verify iteration in plain-decode-step units: K·c + v."""
    return np.asarray(as_float(k) * as_float(draft_cost) + as_float(verify_cost))


def speedup(
    alpha: npt.ArrayLike,
    k: npt.ArrayLike,
    draft_cost: npt.ArrayLike = 0.0,
    verify_cost: npt.ArrayLike = 1.0,
) -> FloatArray:
    """S = E(α, K) / (K·c + v): decode speedup over plain decoding (Thm 3.8 at v = 1).

    K = 0 means speculation off and gives exactly 1.
    """
    kk = as_float(k)
    s = expected_tokens_per_pass(alpha, kk) / iteration_cost(kk, draft_cost, verify_cost)
    return np.asarray(np.where(kk == 0, 1.0, s))


def speedup_by_pos(
    alpha_by_pos: npt.ArrayLike,
    draft_cost: npt.ArrayLike = 0.0,
    verify_cost: npt.ArrayLike = 1.0,
) -> FloatArray:
    """S for a per-position conditional vector ``[..., K]``: E_pos / (K·c + v)."""
    a = as_float(alpha_by_pos)
    e = expected_tokens_per_pass_by_pos(a)
    return np.asarray(e / iteration_cost(a.shape[-1], draft_cost, verify_cost))


def alpha_for_speedup(
    target_speedup: npt.ArrayLike,
    k: npt.ArrayLike,
    draft_cost: npt.ArrayLike = 0.0,
    verify_cost: npt.ArrayLike = 1.0,
) -> FloatArray:
    """Smallest i.i.d. α with S(α, K, c, v) ≥ target; NaN where even α = 1 falls short.

    Solves E(α, K) = target·(K·c + v) on [0, 1]; E is increasing in α (from 1 to K + 1).
    """
    needed = as_float(target_speedup) * iteration_cost(k, draft_cost, verify_cost)
    return solve_increasing_on_unit_interval(expected_tokens_per_pass, needed, k)


def alpha_breakeven(
    k: npt.ArrayLike,
    draft_cost: npt.ArrayLike = 0.0,
    verify_cost: npt.ArrayLike = 1.0,
) -> FloatArray:
    """α at which speculation stops paying: S(α) = 1, i.e. E(α, K) = K·c + v.

    0 when the iteration costs no more than a plain step (any acceptance pays); NaN when
    K·c + v > K + 1 (not even perfect acceptance pays).
    """
    return alpha_for_speedup(1.0, k, draft_cost, verify_cost)


def optimal_k(
    alpha: float,
    draft_cost: float = 0.0,
    verify_cost: float = 1.0,
    k_max: int = 10,
) -> tuple[int, float]:
    """argmax_K S(α, K, c, v) over K = 1..k_max (Leviathan §3.5), as ``(K, S)``.

    Returns ``(0, 1.0)`` — leave speculation off — when no K gives S > 1.
    """
    if k_max < 1:
        raise ValueError(f"k_max must be >= 1, got {k_max}")
    ks = np.arange(1, k_max + 1)
    s = speedup(alpha, ks, draft_cost, verify_cost)
    best = int(np.argmax(s))
    if s[best] <= 1.0:
        return 0, 1.0
    return int(ks[best]), float(s[best])


def operations_factor(
    alpha: npt.ArrayLike, k: npt.ArrayLike, draft_ops_ratio: npt.ArrayLike = 0.0
) -> FloatArray:
    """Factor by which total arithmetic grows: (1 − α)(K·ĉ + K + 1) / (1 − α^(K+1)) (Thm 3.11).

    ``draft_ops_ratio`` is ĉ, the draft's operations per token ÷ the target's (Def. 3.10).
    """
    kk = as_float(k)
    return np.asarray(
        (kk * as_float(draft_ops_ratio) + kk + 1.0) / expected_tokens_per_pass(alpha, kk)
    )


def compute_bound_speedup(
    alpha: npt.ArrayLike, k: npt.ArrayLike, draft_ops_ratio: npt.ArrayLike = 0.0
) -> FloatArray:
    """Throughput ratio once the server is fully compute-bound: 1 / operations factor.

    When every FLOP costs time, speculation only adds the rejected drafts' work, so this is the
    floor the speedup falls to at very large batches (e.g. 0.490 at α = 0.7, K = 5, ĉ = 0).
    """
    return np.asarray(1.0 / operations_factor(alpha, k, draft_ops_ratio))
