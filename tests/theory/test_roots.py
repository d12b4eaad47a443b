"""The one root finder: elementwise solutions of increasing closed forms on [0, 1] (0 below the
range, NaN above it), and bisection of a monotone predicate on linear, log and integer scales."""

from __future__ import annotations

import math

import numpy as np
import pytest

from alphagate.theory.roots import bisect, solve_increasing_on_unit_interval


def test_an_increasing_form_is_inverted_elementwise_with_parameters() -> None:
    def g(a: np.ndarray, p: np.ndarray) -> np.ndarray:
        return a**p  # increasing on [0, 1] for p > 0

    got = solve_increasing_on_unit_interval(
        g, [0.25, 0.5, 0.0, -1.0, 2.0], [2.0, 1.0, 3.0, 1.0, 1.0]
    )
    np.testing.assert_allclose(got[:2], [0.5, 0.5], atol=1e-12)
    assert got[2] == 0.0 and got[3] == 0.0  # at or below g(0): 0
    assert math.isnan(got[4])  # above g(1): no α reaches it


def test_scalars_broadcast_against_arrays() -> None:
    got = solve_increasing_on_unit_interval(lambda a, c: a + c, np.array([0.3, 0.9]), 0.1)
    np.testing.assert_allclose(got, [0.2, 0.8], atol=1e-12)


def test_linear_bisection_stops_within_its_tolerance() -> None:
    calls: list[float] = []

    def crossed(x: float) -> bool:
        calls.append(x)
        return x >= math.pi / 4

    x = bisect(crossed, 0.0, 1.0, tol=1e-6)
    assert abs(x - math.pi / 4) <= 1e-6
    assert len(calls) == math.ceil(math.log2(1.0 / 1e-6))  # halves until hi − lo ≤ tol
    # by hand: 0.5 crosses, 0.25 does not; [0.25, 0.5] is within 0.25: its midpoint
    assert bisect(lambda x: x >= 0.3, 0.0, 1.0, tol=0.25) == 0.375


def test_log_bisection_is_relative() -> None:
    x = bisect(lambda b: b >= 300.0, 1.0, 4096.0, tol=1e-4, scale="log")
    assert x == pytest.approx(300.0, rel=1e-4)
    with pytest.raises(ValueError, match="lo > 0"):
        bisect(lambda b: True, 0.0, 1.0, tol=1e-3, scale="log")


def test_integer_bisection_returns_the_smallest_integer_that_crosses() -> None:
    assert bisect(lambda n: n * n >= 50, 1, 100, tol=0, scale="integer") == 8.0
    assert bisect(lambda n: n >= 2, 1.0, 2.0, tol=0, scale="integer") == 2.0
    with pytest.raises(ValueError, match="unknown scale 'cubic'"):
        bisect(lambda n: True, 1, 2, tol=0, scale="cubic")
