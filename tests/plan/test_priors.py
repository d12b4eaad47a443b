"""Prior α ranges by drafter and kind of traffic, the kind read from a class name."""

from __future__ import annotations

import pytest

from alphagate.plan.priors import PRIORS, prior_for, traffic_kind
from alphagate.specs.deployment import METHODS


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("chat", "chat"),
        ("General-Assistant", "chat"),
        ("sql_gen", "code"),
        ("coding", "code"),
        ("rag-qa", "copy"),
        ("Summarise", "copy"),
        ("legal", "domain"),
    ],
)
def test_a_class_name_says_its_kind(name: str, kind: str) -> None:
    assert traffic_kind(name) == kind


def test_every_drafter_has_a_range_for_every_kind() -> None:
    kinds = {"chat", "code", "copy", "domain"}
    methods = {m for m, _ in PRIORS}
    # suffix decoding has no α prior: how long its drafts are is what a plan needs, and only a
    # replay of the team's log says it (a suffix plan without one is refused; test_plan_suffix)
    assert methods == set(METHODS) - {"suffix"}
    for m in methods:
        assert {k for mm, k in PRIORS if mm == m} == kinds
    for p in PRIORS.values():
        assert 0.0 <= p.low < p.high <= 1.0 and p.note


def test_the_prior_of_a_class_is_its_drafter_and_kind() -> None:
    p = prior_for("eagle3", "chat-eu")
    assert (p.low, p.high, p.mid) == (0.6, 0.8, pytest.approx(0.7))
    assert prior_for("ngram", "code") == PRIORS[("ngram", "code")]
    # copying traffic is where n-gram lookup does best, open chat where it does worst
    assert prior_for("ngram", "rag").mid > prior_for("ngram", "chat").mid
