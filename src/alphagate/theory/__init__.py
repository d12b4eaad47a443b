"""Closed forms for speculative decoding — pure numpy, no I/O.

Leviathan, Kalman & Matias 2023 (arXiv 2211.17192) unless a function says otherwise. The three
acceptance quantities α, ρ and τ are defined in :mod:`alphagate.core.glossary`.
"""

from alphagate.theory.acceptance import (
    acceptance_length_pmf,
    acceptance_probability,
    alpha_from_draft_acceptance_rate,
    alpha_from_mean_acceptance_length,
    conditional_from_unconditional,
    draft_acceptance_rate,
    draft_acceptance_rate_from_mean_acceptance_length,
    equivalent_alpha,
    expected_tokens_per_pass,
    expected_tokens_per_pass_by_pos,
    mean_acceptance_length,
    mean_acceptance_length_from_draft_acceptance_rate,
    total_variation_distance,
    unconditional_from_conditional,
)
from alphagate.theory.blend import Blend, blend
from alphagate.theory.intervals import wilson_interval
from alphagate.theory.lengths import (
    LengthCounters,
    chain_joint,
    conditional_alpha,
    joint_from_lengths,
    length_counters,
    mean_drafted,
    profile_class,
    tokens_per_step,
    truncate_joint,
)
from alphagate.theory.linear import (
    linear_alpha_breakeven,
    linear_expected_tokens,
    linear_overhead,
    linear_speedup,
)
from alphagate.theory.memory import (
    BYTES_PER_PARAM,
    Footprint,
    eagle3_head_footprint,
    eagle_head_footprint,
    kv_bytes_per_token,
    model_footprint,
    model_params,
)
from alphagate.theory.roofline import (
    compute_bound_tokens,
    ridge_point,
    weight_read_seconds,
)
from alphagate.theory.speedup import (
    alpha_breakeven,
    alpha_for_speedup,
    compute_bound_speedup,
    iteration_cost,
    operations_factor,
    optimal_k,
    speedup,
    speedup_by_pos,
)

__all__ = [
    "BYTES_PER_PARAM",
    "Blend",
    "Footprint",
    "LengthCounters",
    "acceptance_length_pmf",
    "acceptance_probability",
    "alpha_breakeven",
    "alpha_for_speedup",
    "alpha_from_draft_acceptance_rate",
    "alpha_from_mean_acceptance_length",
    "blend",
    "chain_joint",
    "compute_bound_speedup",
    "compute_bound_tokens",
    "conditional_alpha",
    "conditional_from_unconditional",
    "draft_acceptance_rate",
    "draft_acceptance_rate_from_mean_acceptance_length",
    "eagle3_head_footprint",
    "eagle_head_footprint",
    "equivalent_alpha",
    "expected_tokens_per_pass",
    "expected_tokens_per_pass_by_pos",
    "iteration_cost",
    "joint_from_lengths",
    "kv_bytes_per_token",
    "length_counters",
    "linear_alpha_breakeven",
    "linear_expected_tokens",
    "linear_overhead",
    "linear_speedup",
    "mean_acceptance_length",
    "mean_acceptance_length_from_draft_acceptance_rate",
    "mean_drafted",
    "model_footprint",
    "model_params",
    "operations_factor",
    "optimal_k",
    "profile_class",
    "ridge_point",
    "speedup",
    "speedup_by_pos",
    "tokens_per_step",
    "total_variation_distance",
    "truncate_joint",
    "unconditional_from_conditional",
    "weight_read_seconds",
    "wilson_interval",
]
