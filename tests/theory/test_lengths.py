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


def test_a_profile_class_carries_its_joint_and_conditional_alpha() -> None:
    c = profile_class("code", 0.5, [[1], [0, 1], [0, 0, 0], [0, 0, 1, 0]], source="measured (x)")
    assert c.alpha_by_pos == (1.0, 1.0, 0.0) and c.share == 0.5
    assert c.draft_steps is not None and sum(map(sum, c.draft_steps)) == pytest.approx(1.0)
    assert c.alpha_label() == "τ 2.50, drafts ≤ 3"
    with pytest.raises(ValueError, match="alpha_by_pos"):
        TrafficClass(name="x", share=1.0, draft_steps=((1.0,), (0.0, 1.0)))
    with pytest.raises(ValueError, match="row L"):
        TrafficClass(name="x", share=1.0, alpha=0.5, draft_steps=((1.0,), (1.0,)))
