"""Roofline quantities at the H100's vendor peaks (989 TFLOP/s dense BF16, 3.35 TB/s HBM3):
ridge ≈ 295 FLOP/byte, BF16 weight GEMMs compute-bound from ≈ 295 tokens, FP8 from ≈ 148."""

from __future__ import annotations

import pytest

from alphagate.theory.roofline import compute_bound_tokens, ridge_point, weight_read_seconds

H100_FLOPS, H100_BW = 989e12, 3.35e12


def test_the_ridge_is_flops_over_bandwidth() -> None:
    assert ridge_point(H100_FLOPS, H100_BW) == pytest.approx(295.2, abs=0.1)
    assert ridge_point(2.0, 1.0) == 2.0 * ridge_point(1.0, 1.0)


def test_weight_gemms_turn_compute_bound_at_ridge_times_bytes_over_two() -> None:
    bf16 = compute_bound_tokens(H100_FLOPS, H100_BW, 2.0)
    fp8 = compute_bound_tokens(H100_FLOPS, H100_BW, 1.0)
    assert bf16 == pytest.approx(295.2, abs=0.1) and fp8 == pytest.approx(bf16 / 2)


def test_reading_the_weights_once_bounds_a_step() -> None:
    # Llama-3.1-8B in BF16 (8.03e9 parameters) on one H100: ≈ 4.8 ms, ≈ 209 steps/s at most
    assert weight_read_seconds(8.03e9, 2.0, H100_BW) == pytest.approx(4.794e-3, rel=1e-3)
