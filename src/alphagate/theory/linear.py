"""The popular linear rules of thumb — kept, labelled, and only used to show how far off they are.

Production write-ups of speculative decoding often state:

    tokens per target pass  ≈ 1 + K·α
    speedup                 ≈ (1 + K·α) / (1 + overhead)
    break-even α            ≈ overhead / K

``1 + K·α`` ignores that a draft at position i is only used if positions 1..i−1 were accepted, so
it overstates E(α, K) = (1 − α^(K+1)) / (1 − α) for every K > 1 and 0 < α < 1 (Leviathan Eq. 1).
It is *exact* only when "α" is vLLM's draft acceptance rate ρ (τ = 1 + K·ρ). To compare with
:mod:`alphagate.theory.speedup`, the rule's "overhead" maps to ``K·c + v − 1``.

APPROXIMATION — every function here is wrong by design for K > 1; use the exact forms.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from alphagate.theory._arrays import FloatArray, as_float

__all__ = [
    "linear_alpha_breakeven",
    "linear_expected_tokens",
    "linear_overhead",
    "linear_speedup",
]


def linear_expected_tokens(alpha: npt.ArrayLike, k: npt.ArrayLike) -> FloatArray:
    """APPROXIMATION: 1 + K·α (the rule-of-thumb tokens per target pass)."""
    return np.asarray(1.0 + as_float(k) * as_float(alpha))


def linear_overhead(
    k: npt.ArrayLike, draft_cost: npt.ArrayLike, verify_cost: npt.ArrayLike
) -> FloatArray:
    """The rule's "overhead" expressed in alphagate's costs: K·c + v − 1."""
    return np.asarray(as_float(k) * as_float(draft_cost) + as_float(verify_cost) - 1.0)


def linear_speedup(alpha: npt.ArrayLike, k: npt.ArrayLike, overhead: npt.ArrayLike) -> FloatArray:
    """APPROXIMATION: (1 + K·α) / (1 + overhead)."""
    return np.asarray(linear_expected_tokens(alpha, k) / (1.0 + as_float(overhead)))


def linear_alpha_breakeven(k: npt.ArrayLike, overhead: npt.ArrayLike) -> FloatArray:
    """APPROXIMATION: overhead / K (solves 1 + K·α = 1 + overhead)."""
    return np.asarray(as_float(overhead) / as_float(k))
