"""Roofline quantities (Williams et al. 2009; LLM-Viewer, Yuan et al. 2024, arXiv 2402.16363).

A kernel moving ``bytes`` and doing ``flops`` takes ``max(bytes / BW, flops / F)``; it turns
compute-bound once its arithmetic intensity (FLOP per byte) passes the ridge point F / BW. A weight
GEMM over T tokens does 2 FLOP per weight per token and reads each weight once, so its intensity is
2T / b_w and it becomes compute-bound at T ≳ ridge · b_w / 2 (≈ 295 tokens for BF16 on an H100 at
its vendor peaks: 989 TFLOP/s dense over 3.35 TB/s).
"""

from __future__ import annotations

__all__ = ["compute_bound_tokens", "ridge_point", "weight_read_seconds"]


def ridge_point(flops_per_s: float, bytes_per_s: float) -> float:
    """FLOP per byte at which a kernel turns compute-bound: F / BW."""
    return flops_per_s / bytes_per_s


def compute_bound_tokens(flops_per_s: float, bytes_per_s: float, bytes_per_weight: float) -> float:
    """Tokens per forward at which the weight GEMMs turn compute-bound: ridge · b_w / 2."""
    return ridge_point(flops_per_s, bytes_per_s) * bytes_per_weight / 2.0


def weight_read_seconds(params: float, bytes_per_weight: float, bytes_per_s: float) -> float:
    """Floor on one forward step when streaming every weight once from HBM."""
    return params * bytes_per_weight / bytes_per_s
