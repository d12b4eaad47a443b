"""Traffic blending: several request classes, each with its own α, served by one deployment.

Speedups do not average linearly. If class i contributes a share s_i of the *output tokens* and
decodes S_i times faster, the time to produce one average token is Σ_i s_i / S_i plain-decode
units, so the blended speedup is the token-weighted harmonic mean

    S_blend = 1 / Σ_i (s_i / S_i)

and the single α that would give the same speedup solves E(α_eq, K) = 1 / Σ_i (s_i / E_i).
Averaging α first (α_naive = Σ s_i α_i) overstates the gain, because E is convex in α over the
range that matters and the harmonic mean weighs slow classes more. Both are returned so the
difference can be shown.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from alphagate.theory._arrays import FloatArray, as_float
from alphagate.theory.acceptance import expected_tokens_per_pass
from alphagate.theory.roots import solve_increasing_on_unit_interval
from alphagate.theory.speedup import iteration_cost

__all__ = ["Blend", "blend"]


@dataclass(frozen=True)
class Blend:
    """Result of :func:`blend`. Arrays are per class, in input order (shape ``[n_classes]``)."""

    shares: FloatArray
    alphas: FloatArray
    expected_tokens_per_pass: FloatArray
    speedups: FloatArray
    time_shares: FloatArray  # fraction of speculative decode time spent on each class
    blended_speedup: float
    blended_expected_tokens_per_pass: float
    equivalent_alpha: float
    naive_mean_alpha: float
    naive_speedup: float


def blend(
    shares: npt.ArrayLike,
    alphas: npt.ArrayLike,
    k: int,
    draft_cost: float = 0.0,
    verify_cost: float = 1.0,
) -> Blend:
    """Blend per-class speedups by time per token. ``shares`` are output-token shares summing to 1."""
    s = as_float(shares)
    a = as_float(alphas)
    if s.ndim != 1 or s.shape != a.shape or s.size == 0:
        raise ValueError("shares and alphas must be 1-D arrays of the same non-zero length")
    if np.any(s < 0) or not np.isclose(s.sum(), 1.0, atol=1e-6):
        raise ValueError(f"shares must be non-negative and sum to 1, got sum {s.sum():.6g}")
    cost = float(iteration_cost(k, draft_cost, verify_cost))
    e = expected_tokens_per_pass(a, k)
    per_class_speedup = e / cost
    time_per_token = s / per_class_speedup  # [n_classes], plain-decode-step units per token
    blended = 1.0 / float(time_per_token.sum())
    e_blend = 1.0 / float((s / e).sum())
    equivalent = float(solve_increasing_on_unit_interval(expected_tokens_per_pass, e_blend, k))
    naive = float((s * a).sum())
    naive_speedup = float(expected_tokens_per_pass(naive, k)) / cost
    return Blend(
        shares=s,
        alphas=a,
        expected_tokens_per_pass=np.asarray(e),
        speedups=np.asarray(per_class_speedup),
        time_shares=np.asarray(time_per_token / time_per_token.sum()),
        blended_speedup=blended,
        blended_expected_tokens_per_pass=e_blend,
        equivalent_alpha=equivalent,
        naive_mean_alpha=naive,
        naive_speedup=naive_speedup,
    )
