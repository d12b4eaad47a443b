"""The decomposition: Shapley values of the removal game against hand-worked games, shares of the
rise, intervals, and mechanisms the resamples cannot tell apart reported together."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from alphagate.explain.attribution import attribute, interval, shapley
from alphagate.explain.records import Mechanism


def _game(values: dict[frozenset[Mechanism], float]):  # type: ignore[no-untyped-def]
    return lambda s: np.asarray([values[frozenset(s)]])


def test_two_players_by_hand() -> None:
    """g(∅) = 3, removing a leaves 1, b leaves 2, both 0: a takes ½(2 + 2) = 2 off, b ½(1 + 1)."""
    g = _game(
        {
            frozenset(): 3.0,
            frozenset({"rejection"}): 1.0,
            frozenset({"verify"}): 2.0,
            frozenset({"rejection", "verify"}): 0.0,
        }
    )
    phi = shapley(["rejection", "verify"], g)
    assert phi["rejection"][0] == pytest.approx(2.0)
    assert phi["verify"][0] == pytest.approx(1.0)


def test_additive_game_gives_each_its_own_and_values_add_up() -> None:
    """An additive game: each player's value is what it alone takes off; with an interaction
    term added, the values still sum to g(∅) − g(all) and equal players get equal values."""
    players: list[Mechanism] = ["rejection", "verify", "prefill", "capacity"]
    own = {"rejection": 0.5, "verify": 0.2, "prefill": 0.1, "capacity": 0.05}

    def g(s: frozenset[Mechanism]) -> np.ndarray:
        return np.asarray([1.0 - sum(own[m] for m in s)])

    phi = shapley(players, g)
    for m in players:
        assert phi[m][0] == pytest.approx(own[m])

    def g2(s: frozenset[Mechanism]) -> np.ndarray:  # rejection and verify only matter together
        return np.asarray([1.0 - (0.6 if {"rejection", "verify"} <= s else 0.0)])

    phi = shapley(players, g2)
    assert sum(v[0] for v in phi.values()) == pytest.approx(0.6)
    assert phi["rejection"][0] == pytest.approx(phi["verify"][0]) == pytest.approx(0.3)
    assert phi["prefill"][0] == pytest.approx(0.0)


def test_order_of_removal_does_not_matter() -> None:
    """The Shapley value is the mean over every order of the marginal removals."""
    players: list[Mechanism] = ["rejection", "verify", "prefill"]
    rng = np.random.default_rng(3)
    table = {
        frozenset(s): float(rng.normal())
        for r in range(4)
        for s in itertools.combinations(players, r)
    }
    phi = shapley(players, _game(table))
    for m in players:
        total = 0.0
        for order in itertools.permutations(players):
            before = frozenset(order[: order.index(m)])
            total += table[before] - table[before | {m}]
        assert phi[m][0] == pytest.approx(total / math.factorial(3))


def test_shares_of_the_rise_and_the_residual() -> None:
    rng = np.random.default_rng(0)
    noise = rng.normal(0, 0.01, 201)
    noise[0] = 0.0
    values = {
        frozenset(): np.log(2.0) + noise,  # the candidate's figure is 2× the baseline's
        frozenset({"rejection"}): np.log(2.0 / 3.0) + noise,  # ×3 from rejection
        frozenset({"verify"}): np.log(2.0 / 1.5) + noise,  # ×1.5 from verify
        frozenset({"rejection", "verify"}): np.log(2.0 / 4.5) + noise,
    }
    measured = np.log(2.2) + noise  # the client made it 10% worse than the replays
    att = attribute(["rejection", "verify"], lambda s: values[frozenset(s)], measured)
    by = {tuple(f.mechanisms): f for f in att.factors}
    assert by[("rejection",)].factor == pytest.approx(3.0)
    assert by[("verify",)].factor == pytest.approx(1.5)
    share = math.log(3) / (math.log(3) + math.log(1.5))
    assert by[("rejection",)].share == pytest.approx(share)
    assert att.factors[0].mechanisms == ["rejection"]  # the largest share first
    assert math.exp(att.gain[0]) == pytest.approx(2 / 4.5)
    assert math.exp(att.residual[0]) == pytest.approx(1.1)
    iv = by[("rejection",)].share_interval
    assert iv is not None and iv.low - 1e-9 <= share <= iv.high + 1e-9


def test_a_figure_a_mechanism_lowered_has_no_share() -> None:
    values = {frozenset(): 0.0, frozenset({"capacity"}): 0.5}
    att = attribute(["capacity"], lambda s: np.asarray([values[frozenset(s)]] * 50), np.zeros(50))
    (f,) = att.factors
    assert f.factor == pytest.approx(math.exp(-0.5)) and f.share is None


def test_mechanisms_the_resamples_trade_off_are_reported_together() -> None:
    """Two mechanisms whose values move against each other from resample to resample: their sum
    is fixed, their split is not — one factor for both, said so."""
    rng = np.random.default_rng(1)
    split = rng.uniform(0.2, 0.8, 300)
    split[0] = 0.5
    total = 1.0
    values = {
        frozenset(): np.full(300, total),
        frozenset({"rejection"}): total - split,
        frozenset({"verify"}): split,
        frozenset({"rejection", "verify"}): np.zeros(300),
    }
    att = attribute(["rejection", "verify"], lambda s: values[frozenset(s)], np.full(300, total))
    assert [f.mechanisms for f in att.factors] == [["rejection", "verify"]]
    assert att.factors[0].factor == pytest.approx(math.exp(total))
    assert att.inseparable and "only their sum" in att.inseparable[0]
    # independent resamples are kept apart
    values[frozenset({"verify"})] = np.full(300, 0.5)
    values[frozenset({"rejection"})] = 0.5 + rng.normal(0, 0.01, 300)
    att = attribute(["rejection", "verify"], lambda s: values[frozenset(s)], np.full(300, total))
    assert len(att.factors) == 2 and not att.inseparable


def test_interval_is_the_percentiles_of_the_resamples() -> None:
    x = np.concatenate([[0.0], np.linspace(-1, 1, 1001)])
    iv = interval(x)
    assert iv is not None
    assert iv.low == pytest.approx(-0.95) and iv.high == pytest.approx(0.95)
    assert interval(np.zeros(5)) is None  # too few resamples to say
