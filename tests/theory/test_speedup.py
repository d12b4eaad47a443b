"""Speedup, break-even, optimal K: Leviathan's tables and properties."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from alphagate import theory

# Leviathan et al. 2023, Table 1 (c = ĉ = 0): (α, γ, operations, speed)
TABLE_1 = [
    (0.6, 2, 1.53, 1.96),
    (0.7, 3, 1.58, 2.53),
    (0.8, 2, 1.23, 2.44),
    (0.8, 5, 1.63, 3.69),
    (0.9, 2, 1.11, 2.71),
    (0.9, 10, 1.60, 6.86),
]

# Leviathan et al. 2023, Appendix A.3 Table 4: (task, γ, α, c, Exp)
TABLE_4 = [
    ("EnDe small T0", 7, 0.75, 0.02, 3.2),
    ("EnDe base T0", 7, 0.80, 0.04, 3.3),
    ("EnDe large T0", 7, 0.82, 0.11, 2.5),
    ("EnDe small T1", 7, 0.62, 0.02, 2.3),
    ("EnDe base T1", 5, 0.68, 0.04, 2.4),
    ("EnDe large T1", 3, 0.71, 0.11, 2.0),
    ("CNNDM small T0", 5, 0.65, 0.02, 2.4),
    ("CNNDM base T0", 5, 0.73, 0.04, 2.6),
    ("CNNDM large T0", 3, 0.74, 0.11, 2.0),
    ("CNNDM small T1", 5, 0.53, 0.02, 1.9),
    ("CNNDM base T1", 3, 0.55, 0.04, 1.8),
    ("CNNDM large T1", 3, 0.56, 0.11, 1.6),
]


@pytest.mark.parametrize(("alpha", "k", "ops", "speed"), TABLE_1)
def test_oracle_4_leviathan_table_1(alpha: float, k: int, ops: float, speed: float) -> None:
    # Leviathan Table 1, ±0.005
    assert float(theory.speedup(alpha, k, 0.0)) == pytest.approx(speed, abs=0.005)
    assert float(theory.operations_factor(alpha, k, 0.0)) == pytest.approx(ops, abs=0.005)


@pytest.mark.parametrize(("task", "k", "alpha", "c", "expected"), TABLE_4)
def test_oracle_5_leviathan_table_4(
    task: str, k: int, alpha: float, c: float, expected: float
) -> None:
    # Leviathan App. A.3 Table 4 "Exp" column, ±0.1 (printed c is rounded)
    assert float(theory.speedup(alpha, k, c)) == pytest.approx(expected, abs=0.1), task


def test_oracle_6_bigram_draft() -> None:
    # Leviathan §3.6: bigram draft, α = 0.2, γ = 3, c = 0 → 1.25×
    assert float(theory.speedup(0.2, 3, 0.0)) == pytest.approx(1.248, abs=0.005)


@given(st.floats(0.0, 1.0), st.floats(0.0, 0.5))
def test_oracle_8_corollary_3_9_gamma_1(alpha: float, c: float) -> None:
    # Cor. 3.9: at γ = 1 the improvement is (1 + α)/(1 + c)
    assert float(theory.speedup(alpha, 1, c)) == pytest.approx((1 + alpha) / (1 + c), rel=1e-12)


def test_oracle_21_compute_bound_floor() -> None:
    # inverse of Thm 3.11: α = 0.7, K = 5, ĉ = 0 → 0.490
    assert float(theory.compute_bound_speedup(0.7, 5, 0.0)) == pytest.approx(0.490, abs=1e-3)


def test_lenience_argmax_case() -> None:
    # Leviathan App. A.5: c = 0.015, γ = 8, α = .75/.8/.87 → 3.303/3.865/4.907 (paper 3.3/3.9/4.9)
    got = theory.speedup(np.array([0.75, 0.8, 0.87]), 8, 0.015)
    np.testing.assert_allclose(got, [3.303, 3.865, 4.907], atol=1e-3)


def test_speedup_k0_is_baseline() -> None:
    assert float(theory.speedup(0.9, 0, 0.3, 1.7)) == 1.0


def test_breakeven_edge_cases() -> None:
    assert (
        float(theory.alpha_breakeven(5, 0.0, 1.0)) == 0.0
    )  # free draft, free verify: anything pays
    assert math.isnan(float(theory.alpha_breakeven(2, 1.0, 1.5)))  # 2·1 + 1.5 > 3: nothing pays


def test_breakeven_rises_with_verify_cost_and_k_when_draft_costs() -> None:
    v = np.array([1.0, 1.1, 1.2, 1.3])
    be_v = theory.alpha_breakeven(5, 0.05, v)
    assert np.all(np.diff(be_v) > 0)
    be_k = theory.alpha_breakeven(np.arange(1, 9), 0.05, 1.0)
    assert np.all(np.diff(be_k) > 0)


@given(st.integers(1, 12), st.floats(0.0, 0.3), st.floats(0.5, 2.5))
def test_breakeven_solves_speedup_equals_one(k: int, c: float, v: float) -> None:
    a = float(theory.alpha_breakeven(k, c, v))
    cost = k * c + v
    if cost <= 1.0:
        assert a == 0.0
    elif cost > k + 1:
        assert math.isnan(a)
    else:
        assert float(theory.speedup(a, k, c, v)) == pytest.approx(1.0, abs=1e-9)


@given(st.floats(1.01, 5.0), st.integers(1, 10), st.floats(0.0, 0.2), st.floats(0.8, 1.5))
def test_alpha_for_speedup_hits_target(target: float, k: int, c: float, v: float) -> None:
    a = float(theory.alpha_for_speedup(target, k, c, v))
    if math.isnan(a):
        assert float(theory.speedup(1.0, k, c, v)) < target
    elif a == 0.0:  # even zero acceptance reaches the target (v < 1)
        assert float(theory.speedup(0.0, k, c, v)) >= target - 1e-12
    else:
        assert float(theory.speedup(a, k, c, v)) == pytest.approx(target, rel=1e-9)


@given(st.floats(0.0, 1.0), st.floats(0.0, 0.5), st.floats(0.5, 2.0), st.integers(1, 16))
def test_optimal_k_is_argmax(alpha: float, c: float, v: float, k_max: int) -> None:
    k, s = theory.optimal_k(alpha, c, v, k_max)
    all_s = theory.speedup(alpha, np.arange(1, k_max + 1), c, v)
    if k == 0:
        assert s == 1.0
        assert np.all(all_s <= 1.0)
    else:
        assert s == pytest.approx(float(all_s.max()))
        assert s > 1.0


def test_optimal_k_grows_with_alpha() -> None:
    ks = [theory.optimal_k(a, 0.05, 1.0, 16)[0] for a in (0.5, 0.7, 0.8, 0.9)]
    assert ks == sorted(ks)
    assert ks[0] < ks[-1]


def test_optimal_k_zero_when_nothing_pays() -> None:
    assert theory.optimal_k(0.1, 0.3, 1.2, 10) == (0, 1.0)


def test_per_position_speedup_matches_iid() -> None:
    s_pos = theory.speedup_by_pos(np.full(5, 0.7), 0.05, 1.1)
    assert float(s_pos) == pytest.approx(float(theory.speedup(0.7, 5, 0.05, 1.1)))
