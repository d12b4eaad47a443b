"""The glossary's wording matches the code: each acceptance quantity is named by its symbol, and
every relation it states holds for the functions that compute them (α, ρ, τ never mixed)."""

from __future__ import annotations

import numpy as np
import pytest

from alphagate import theory
from alphagate.core.glossary import GLOSSARY
from alphagate.measure.estimate import estimate


def test_each_quantity_is_named_by_its_symbol() -> None:
    assert GLOSSARY["alpha"].startswith("α — conditional")
    assert GLOSSARY["draft_acceptance_rate"].startswith("ρ — accepted draft tokens ÷ drafted")
    assert GLOSSARY["mean_acceptance_length"].startswith("τ — tokens emitted per target pass")
    assert "including the bonus token" in GLOSSARY["mean_acceptance_length"]


@pytest.mark.parametrize(("alpha", "k"), [(0.7, 5), (0.4, 1), (0.95, 8)])
def test_the_stated_relations_hold(alpha: float, k: int) -> None:
    tau = float(theory.mean_acceptance_length(alpha, k))
    rho = float(theory.draft_acceptance_rate(alpha, k))
    assert "ρ = (τ − 1) / K" in GLOSSARY["draft_acceptance_rate"]
    assert rho == pytest.approx((tau - 1) / k)
    # E, the closed form it states, is τ in expectation
    assert "(1 − α^(K+1)) / (1 − α)" in GLOSSARY["expected_tokens_per_pass"]
    e = float(theory.expected_tokens_per_pass(alpha, k))
    assert e == pytest.approx((1 - alpha ** (k + 1)) / (1 - alpha)) == pytest.approx(tau)


def test_tau_is_one_plus_accepted_over_drafts_from_counts() -> None:
    """ "τ = 1 + accepted ÷ drafts" and ρ = accepted ÷ drafted, from a measurement's counts."""
    assert "τ = 1 + accepted ÷ drafts" in GLOSSARY["mean_acceptance_length"]
    e = estimate(200, 600, 330.0, [150.0, 110.0, 70.0])
    assert e.mean_acceptance_length == pytest.approx(1 + 330 / 200)
    assert e.draft_acceptance_rate == pytest.approx(330 / 600)
    np.testing.assert_allclose(e.alpha_by_pos, [150 / 200, 110 / 150, 70 / 110])
