"""Drafts of variable length as a joint over steps: counters, tokens per step, truncation, and
the joint of a length distribution at α — against hand-worked joints and the chain's closed form."""

from __future__ import annotations

import numpy as np
import pytest

from alphagate.core.traffic import TrafficClass
from alphagate.theory.acceptance import expected_tokens_per_pass_by_pos
from alphagate.theory.lengths import (
    chain_joint,
    conditional_alpha,
    joint_from_lengths,
    length_counters,
    mean_drafted,
    profile_class,
    rate_and_length,
    tokens_per_step,
    truncate_joint,
)


def _two_steps() -> np.ndarray:
    # one step drafted 1 and accepted it, one drafted 3 and accepted 2, one drafted nothing
    j = np.zeros((4, 4))
    j[0, 0] = j[1, 1] = j[3, 2] = 1.0
    return j


def test_hand_worked_counters() -> None:
    c = length_counters(_two_steps())
    assert (c.drafts, c.draft_tokens, c.accepted) == (2, 4, 3)
    assert c.accepted_per_pos.tolist() == [2, 1, 0]
    assert c.reached_per_pos.tolist() == [2, 1, 1]
    assert c.histogram.tolist() == [0, 1, 1, 0]
    assert conditional_alpha(_two_steps()).tolist() == [1.0, 1.0, 0.0]
    assert float(tokens_per_step(_two_steps())) == pytest.approx(1 + 3 / 3)  # 0, 1, 2 accepted
    assert float(mean_drafted(_two_steps())) == pytest.approx(4 / 3)


def test_a_chain_gives_the_closed_form() -> None:
    a = np.asarray([0.9, 0.7, 0.5, 0.4])
    j = chain_joint(a)
    assert j.sum() == pytest.approx(1.0) and j[:4].sum() == 0.0
    assert float(tokens_per_step(j)) == pytest.approx(float(expected_tokens_per_pass_by_pos(a)))
    assert conditional_alpha(j) == pytest.approx(a)


def test_lengths_at_alpha_keep_the_lengths_and_the_positions_alpha() -> None:
    lengths = np.asarray([0.3, 0.2, 0.1, 0.4])
    a = np.asarray([0.8, 0.6, 0.5])
    j = joint_from_lengths(lengths, a)
    assert j.sum(axis=1) == pytest.approx(lengths)
    assert conditional_alpha(j) == pytest.approx(a)  # whatever the lengths, α by position holds
    assert float(mean_drafted(j)) == pytest.approx(0.2 + 0.2 + 1.2)


def test_truncation_moves_longer_drafts_to_the_cap() -> None:
    j = _two_steps()
    t = truncate_joint(j, 2)
    assert t.shape == (3, 3) and t.sum() == j.sum()
    assert t[2, 2] == 1.0 and t[1, 1] == 1.0  # the 3-token draft accepted 2: now 2 of 2
    assert np.array_equal(truncate_joint(j, 5), j)
    assert float(tokens_per_step(t)) == pytest.approx(float(tokens_per_step(j)))


def test_a_profile_class_carries_its_joint_and_its_alpha_at_its_lengths() -> None:
    steps = [[1], [0, 1], [0, 0, 0], [0, 0, 1, 0]]
    c = profile_class("code", 0.5, steps, source="measured (x)")
    assert c.share == 0.5 and c.alpha is not None
    j = np.zeros((4, 4))
    for n, row in enumerate(steps):
        j[n, : n + 1] = row
    at = joint_from_lengths(j.sum(axis=1) / j.sum(), np.full(3, c.alpha))
    assert float(tokens_per_step(at)) == pytest.approx(float(tokens_per_step(j)), abs=1e-8)
    # a whole chain's α at its lengths is its equivalent i.i.d. α
    chain = profile_class("c", 1.0, chain_joint([0.8, 0.8, 0.8]))
    assert chain.alpha == pytest.approx(0.8, abs=1e-8)
    rho, tau = rate_and_length(0.8, [0.0, 0.0, 0.0, 1.0])
    assert rho == pytest.approx((0.8 + 0.64 + 0.512) / 3) and tau == pytest.approx(1 + 3 * rho)
    assert c.draft_steps is not None and sum(map(sum, c.draft_steps)) == pytest.approx(1.0)
    assert c.alpha_label() == "τ 2.50, drafts ≤ 3"
    with pytest.raises(ValueError, match="reached position"):
        TrafficClass(name="x", share=1.0, draft_steps=((1.0,), (0.0, 1.0)))
    with pytest.raises(ValueError, match="row L"):
        TrafficClass(name="x", share=1.0, alpha=0.5, draft_steps=((1.0,), (1.0,)))
