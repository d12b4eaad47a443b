"""The linear rule of thumb 1 + K·α: exact only at K = 1; overstates E for K > 1."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from alphagate import theory

# (1 + Kα)/E from Leviathan Eq. 1, rows K, columns α = 0.5..0.9
OVERESTIMATE = {
    2: [1.143, 1.122, 1.096, 1.066, 1.033],
    3: [1.333, 1.287, 1.224, 1.152, 1.076],
    4: [1.548, 1.475, 1.370, 1.249, 1.123],
    5: [1.778, 1.678, 1.530, 1.355, 1.174],
    8: [2.505, 2.344, 2.063, 1.709, 1.339],
}


@pytest.mark.parametrize("k", sorted(OVERESTIMATE))
def test_overestimate_table(k: int) -> None:
    a = np.array([0.5, 0.6, 0.7, 0.8, 0.9])
    ratio = theory.linear_expected_tokens(a, k) / theory.expected_tokens_per_pass(a, k)
    np.testing.assert_allclose(ratio, OVERESTIMATE[k], atol=1e-3)


def test_lesson_worked_example() -> None:
    # the rule of thumb: (1 + 5·0.7)/(1 + 0.1) = 4.1×
    assert float(theory.linear_speedup(0.7, 5, 0.1)) == pytest.approx(4.09, abs=0.01)
    # its break-even: overhead 0.15 at K = 5 → 0.03
    assert float(theory.linear_alpha_breakeven(5, 0.15)) == pytest.approx(0.03)


@given(st.floats(0.0, 1.0), st.integers(1, 12))
def test_linear_is_exact_in_rho(alpha: float, k: int) -> None:
    # 1 + K·ρ is exactly τ: the linear form is right when "α" means vLLM's ρ
    rho = theory.draft_acceptance_rate(alpha, k)
    assert float(theory.linear_expected_tokens(rho, k)) == pytest.approx(
        float(theory.mean_acceptance_length(alpha, k))
    )


@given(st.floats(0.01, 0.99), st.integers(2, 12))
def test_linear_overstates_for_k_above_1(alpha: float, k: int) -> None:
    assert float(theory.linear_expected_tokens(alpha, k)) > float(
        theory.expected_tokens_per_pass(alpha, k)
    )
