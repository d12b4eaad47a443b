"""Acceptance quantities: oracle cases from the papers and properties."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from alphagate import theory

alphas = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
ks = st.integers(min_value=1, max_value=16)


# --- public oracle cases ---------------------------------------------------------------------
def test_oracle_1_expected_tokens_alpha_07_k5() -> None:
    # Leviathan Eq. 1: E(0.7, 5) = 2.94117
    assert float(theory.expected_tokens_per_pass(0.7, 5)) == pytest.approx(2.94117, abs=1e-4)


def test_oracle_2_expected_tokens_alpha_1_is_k_plus_1() -> None:
    #  the α → 1 limit of Eq. 1 is K + 1
    assert float(theory.expected_tokens_per_pass(1.0, 5)) == 6.0


@pytest.mark.parametrize("k", [1, 3, 5, 10])
def test_oracle_3_expected_tokens_alpha_0_is_1(k: int) -> None:
    #  with α = 0 every pass emits only the correction token
    assert float(theory.expected_tokens_per_pass(0.0, k)) == 1.0


def test_oracle_10_acceptance_from_distributions() -> None:
    # Leviathan Lemma 3.3 / Thm 3.5: p=[.5,.5], q=[.9,.1]
    p, q = np.array([0.5, 0.5]), np.array([0.9, 0.1])
    assert float(theory.acceptance_probability(p, q)) == pytest.approx(0.6, abs=1e-12)
    assert float(theory.total_variation_distance(p, q)) == pytest.approx(0.4, abs=1e-12)


def test_oracle_11_linear_vs_exact() -> None:
    # §6.2: 1 + Kα = 4.5 vs E = 2.941 at K=5, α=0.7, ratio 1.530
    lin = float(theory.linear_expected_tokens(0.7, 5))
    exact = float(theory.expected_tokens_per_pass(0.7, 5))
    assert lin == pytest.approx(4.5)
    assert exact == pytest.approx(2.941, abs=1e-3)
    assert lin / exact == pytest.approx(1.530, abs=1e-3)


def test_oracle_12_vllm_per_position_rates() -> None:
    #  vLLM log, K=2, per-position [0.919, 0.788] (unconditional)
    per_pos = np.array([0.919, 0.788])
    tau = 1.0 + per_pos.sum()
    rho = float(theory.draft_acceptance_rate_from_mean_acceptance_length(tau, 2))
    assert float(theory.mean_acceptance_length_from_draft_acceptance_rate(rho, 2)) == pytest.approx(
        2.707, abs=1e-3
    )
    assert rho == pytest.approx(0.8535, abs=1e-3)
    cond = theory.conditional_from_unconditional(per_pos)
    assert cond[0] == pytest.approx(0.919)
    # 0.857: P(accept i | accepted i−1) = u_i / u_{i−1}
    assert cond[1] == pytest.approx(0.788 / 0.919, abs=1e-3)
    assert float(theory.expected_tokens_per_pass_by_pos(cond)) == pytest.approx(2.707, abs=1e-9)


def test_oracle_13_vllm_rate_from_alpha() -> None:
    #  ᾱ_vllm(0.7, 5) = 0.3882
    assert float(theory.draft_acceptance_rate(0.7, 5)) == pytest.approx(0.3882, abs=1e-4)
    assert float(theory.alpha_from_draft_acceptance_rate(0.3882, 5)) == pytest.approx(0.7, abs=1e-4)


def test_vllm_log_line_example_is_consistent() -> None:
    # vLLM's SpecDecoding log line (vllm/v1/spec_decode/metrics.py): "Mean acceptance length:
    # 2.01 ... Accepted: 206 tokens, Drafted: 609 tokens, ... 33.8%"
    accepted, drafted, k = 206, 609, 3
    rho = accepted / drafted
    tau = float(theory.mean_acceptance_length_from_draft_acceptance_rate(rho, k))
    assert tau == pytest.approx(2.01, abs=5e-3)
    assert rho == pytest.approx(0.338, abs=5e-4)
    # per-position 0.601, 0.286, 0.128 are unconditional; conditional rates decay more slowly
    cond = theory.conditional_from_unconditional([0.601, 0.286, 0.128])
    assert np.all(np.diff(cond) < 0.0)
    assert cond[2] == pytest.approx(0.128 / 0.286)


def test_eagle_equivalent_chain_alpha() -> None:
    # a tree-decoding τ at depth 8 as a chain-equivalent α, by inverting τ(α, K):
    # τ = 6.13 at K = 8 ↔ chain α ≈ 0.90; τ = 5.63 ↔ ≈ 0.877
    assert float(theory.alpha_from_mean_acceptance_length(6.13, 8)) == pytest.approx(0.90, abs=5e-3)
    assert float(theory.alpha_from_mean_acceptance_length(5.63, 8)) == pytest.approx(
        0.877, abs=5e-3
    )


# --- behaviour at the edges --------------------------------------------------------------------
def test_alpha_close_to_one_keeps_precision() -> None:
    e = float(theory.expected_tokens_per_pass(1.0 - 1e-12, 5))
    assert e == pytest.approx(6.0, abs=1e-9)
    assert e < 6.0


def test_inversion_out_of_range_is_nan() -> None:
    out = theory.alpha_from_draft_acceptance_rate(np.array([-0.1, 1.1]), 4)
    assert np.all(np.isnan(out))
    assert math.isnan(float(theory.alpha_from_mean_acceptance_length(7.0, 5)))


def test_conditional_after_zero_is_nan() -> None:
    cond = theory.conditional_from_unconditional([0.5, 0.0, 0.0])
    assert cond[1] == 0.0
    assert math.isnan(cond[2])


def test_vectorized_over_alpha_and_k() -> None:
    a = np.linspace(0.0, 1.0, 11)[:, None]  # [11, 1]
    k = np.arange(1, 9)[None, :]  # [1, 8]
    e = theory.expected_tokens_per_pass(a, k)
    assert e.shape == (11, 8)
    assert np.all(np.diff(e, axis=0) > 0.0)
    rho = theory.draft_acceptance_rate(a, k)
    back = theory.alpha_from_draft_acceptance_rate(rho, np.broadcast_to(k, rho.shape))
    np.testing.assert_allclose(back, np.broadcast_to(a, back.shape), atol=1e-9)


# --- properties -------------------------------------------------------------------------------
@given(alphas, ks)
def test_expected_tokens_bounds(alpha: float, k: int) -> None:
    e = float(theory.expected_tokens_per_pass(alpha, k))
    upper = k + 1.0 if alpha >= 1.0 else min(k + 1.0, 1.0 / (1.0 - alpha))
    assert 1.0 - 1e-12 <= e <= upper + 1e-9


@given(alphas, alphas, ks)
def test_expected_tokens_monotone_in_alpha(a1: float, a2: float, k: int) -> None:
    lo, hi = sorted((a1, a2))
    assert (
        float(theory.expected_tokens_per_pass(lo, k))
        <= float(theory.expected_tokens_per_pass(hi, k)) + 1e-12
    )


@given(alphas, ks)
def test_expected_tokens_monotone_in_k(alpha: float, k: int) -> None:
    assert (
        float(theory.expected_tokens_per_pass(alpha, k))
        <= float(theory.expected_tokens_per_pass(alpha, k + 1)) + 1e-12
    )


@given(alphas, ks)
def test_alpha_rho_tau_round_trip(alpha: float, k: int) -> None:
    rho = float(theory.draft_acceptance_rate(alpha, k))
    tau = float(theory.mean_acceptance_length(alpha, k))
    assert tau == pytest.approx(
        float(theory.mean_acceptance_length_from_draft_acceptance_rate(rho, k)), abs=1e-9
    )
    assert float(theory.alpha_from_draft_acceptance_rate(rho, k)) == pytest.approx(alpha, abs=1e-7)
    assert float(theory.alpha_from_mean_acceptance_length(tau, k)) == pytest.approx(alpha, abs=1e-7)


@given(st.lists(st.one_of(st.just(0.0), st.floats(1e-3, 1.0)), min_size=1, max_size=10))
def test_per_position_round_trip(alpha_by_pos: list[float]) -> None:
    uncond = theory.unconditional_from_conditional(alpha_by_pos)
    back = theory.conditional_from_unconditional(uncond)
    defined = ~np.isnan(back)
    np.testing.assert_allclose(back[defined], np.asarray(alpha_by_pos)[defined], atol=1e-9)
    # i.i.d. vector agrees with the scalar formula
    k = len(alpha_by_pos)
    iid = theory.expected_tokens_per_pass_by_pos(np.full(k, alpha_by_pos[0]))
    assert float(iid) == pytest.approx(
        float(theory.expected_tokens_per_pass(alpha_by_pos[0], k)), abs=1e-9
    )


@given(alphas, ks)
def test_rho_never_exceeds_alpha(alpha: float, k: int) -> None:
    # the unconditional average can only be lower than the conditional rate: α^i ≤ α
    assert float(theory.draft_acceptance_rate(alpha, k)) <= alpha + 1e-12


# --- acceptance length: tokens per target pass --------------------------------------------
def test_acceptance_length_pmf_by_hand() -> None:
    # K = 2, α = 0.5: one token (first draft rejected) 1/2, two tokens 1/4, all + bonus 1/4
    pmf = theory.acceptance_length_pmf(theory.unconditional_from_conditional([0.5, 0.5]))
    assert pmf == pytest.approx([0.5, 0.25, 0.25])


@given(alphas, ks)
def test_acceptance_length_pmf_is_a_distribution_with_mean_e(alpha: float, k: int) -> None:
    pmf = theory.acceptance_length_pmf(theory.unconditional_from_conditional(np.full(k, alpha)))
    assert pmf.shape == (k + 1,) and np.all(pmf >= -1e-12)
    assert pmf.sum() == pytest.approx(1.0)
    mean = float((np.arange(1, k + 2) * pmf).sum())
    assert mean == pytest.approx(float(theory.expected_tokens_per_pass(alpha, k)), rel=1e-9)
