"""Roofline quantities (Williams et al. 2009; LLM-Viewer, Yuan et al. 2024, arXiv 2402.16363).

A kernel moving ``bytes`` and doing ``flops`` takes ``max(bytes / BW, flops / F)``; it turns
compute-bound once its arithmetic intensity (FLOP per byte) passes the ridge point F / BW. A weight
GEMM over T tokens does 2 FLOP per weight per token and reads each weight once, so its intensity is
2T / b_w and it becomes compute-bound at T ≳ ridge · b_w / 2 (shared/references/theory.md §5.1).
"""

from __future__ import annotations

__all__ = ["compute_bound_tokens", "ridge_point", "roofline_time", "weight_read_seconds"]


def ridge_point(flops_per_s: float, bytes_per_s: float) -> float:
    """FLOP per byte at which a kernel turns compute-bound: F / BW."""
    return flops_per_s / bytes_per_s


def compute_bound_tokens(flops_per_s: float, bytes_per_s: float, bytes_per_weight: float) -> float:
    """Tokens per forward at which the weight GEMMs turn compute-bound: ridge · b_w / 2."""
    return ridge_point(flops_per_s, bytes_per_s) * bytes_per_weight / 2.0


def weight_read_seconds(params: float, bytes_per_weight: float, bytes_per_s: float) -> float:
    """Floor on one forward step when streaming every weight once from HBM."""
    return params * bytes_per_weight / bytes_per_s


def roofline_time(
    bytes_moved: float, flops: float, bytes_per_s: float, flops_per_s: float
) -> float:
    """max(bytes / BW, FLOPs / F)."""
    return max(bytes_moved / bytes_per_s, flops / flops_per_s)
