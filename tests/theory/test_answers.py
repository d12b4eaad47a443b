"""The closed-form answers ``alphagate model`` prints, worked by hand: E = (1 − α^(K+1)) / (1 − α)
tokens per pass, a pass costing K·c + v decode steps (Leviathan et al. 2023), ρ = (τ − 1) / K, and
a blend weighted by time per token."""

from __future__ import annotations

import math

import pytest

from alphagate.core.traffic import TrafficClass
from alphagate.theory.answers import (
    CostModel,
    blend_answer,
    breakeven_answer,
    convert_answer,
    optimal_k_answer,
    required_answer,
    speedup_answer,
    table_answer,
)

C = CostModel(draft_cost=0.05, verify_cost=1.0)  # a pass at K = 5 costs 1.25 decode steps


def _e(alpha: float, k: int) -> float:
    return (1 - alpha ** (k + 1)) / (1 - alpha)


def test_speedup_at_alpha_07_k5() -> None:
    a = speedup_answer(0.7, 5, C)
    e = _e(0.7, 5)  # 2.9412
    assert a.expected_tokens_per_pass == pytest.approx(e) == pytest.approx(2.9412, abs=1e-4)
    assert a.speedup == pytest.approx(e / 1.25)
    assert a.mean_acceptance_length == pytest.approx(e)
    assert a.draft_acceptance_rate == pytest.approx((e - 1) / 5)
    assert a.upper_bound_tokens_per_pass == pytest.approx(1 / 0.3)  # below K + 1 = 6
    assert a.linear_expected_tokens == pytest.approx(4.5)  # 1 + K·α
    assert a.linear_overestimate_ratio == pytest.approx(4.5 / e)
    assert speedup_answer(1.0, 3, C).upper_bound_tokens_per_pass == 4.0


def test_break_even_is_where_tau_equals_the_cost_of_a_pass() -> None:
    b = breakeven_answer(5, C)
    assert b.alpha_breakeven is not None and b.reason is None
    assert _e(b.alpha_breakeven, 5) == pytest.approx(1.25, abs=1e-9)
    assert b.mean_acceptance_length_breakeven == pytest.approx(1.25, abs=1e-9)
    assert b.draft_acceptance_rate_breakeven == pytest.approx(0.25 / 5, abs=1e-9)


def test_a_pass_dearer_than_k_plus_one_tokens_never_breaks_even() -> None:
    b = breakeven_answer(2, CostModel(draft_cost=1.2, verify_cost=1.0))
    assert b.alpha_breakeven is None and b.draft_acceptance_rate_breakeven is None
    assert b.reason == (
        "an iteration costs K·c + v = 3.4 decode steps, more than the K + 1 = 3 tokens even "
        "perfect acceptance yields"
    )


def test_the_alpha_a_target_needs_and_a_target_out_of_reach() -> None:
    r = required_answer(3.0, 5, C)
    assert r.alpha_required is not None and _e(r.alpha_required, 5) == pytest.approx(3.75)
    assert r.max_speedup == pytest.approx(6 / 1.25)
    assert r.alpha_required_linear == pytest.approx((3.0 * 1.25 - 1) / 5)
    out = required_answer(5.0, 5, C)
    assert out.alpha_required is None and out.alpha_required_linear is None
    assert out.reason == (
        "at K=5, c=0.05, v=1 even α = 1 gives only 4.800×; raise K or lower the draft/verify cost"
    )


def test_the_best_k_is_the_largest_speedup_of_the_list() -> None:
    o = optimal_k_answer(0.8, C, 10)
    by_k = [_e(0.8, k) / (k * 0.05 + 1) for k in range(1, 11)]
    assert o.speedup_by_k == pytest.approx(by_k)
    assert o.k == by_k.index(max(by_k)) + 1 and o.speedup == pytest.approx(max(by_k))
    assert o.oracle_bound_tokens_per_pass == pytest.approx(5.0)
    assert optimal_k_answer(1.0, C, 4).oracle_bound_tokens_per_pass is None


def test_a_blend_weighs_each_class_by_its_time_per_token() -> None:
    classes = [
        TrafficClass(name="chat", share=0.7, alpha=0.7),
        TrafficClass(name="code", share=0.3, alpha=0.4),
    ]
    b = blend_answer(classes, 5, C)
    s = {"chat": _e(0.7, 5) / 1.25, "code": _e(0.4, 5) / 1.25}
    time = {"chat": 0.7 / s["chat"], "code": 0.3 / s["code"]}
    assert b.blended_speedup == pytest.approx(1 / sum(time.values()))
    for row in b.classes:
        assert row.speedup == pytest.approx(s[row.name])
        assert row.time_share == pytest.approx(time[row.name] / sum(time.values()))
        assert row.net_win
    assert b.naive_mean_alpha == pytest.approx(0.61)
    assert b.naive_speedup > b.blended_speedup  # averaging α first flatters the mix
    assert _e(b.equivalent_alpha, 5) / 1.25 == pytest.approx(b.blended_speedup)


def test_one_figure_in_all_three_quantities() -> None:
    a = convert_answer("alpha", 0.7, 5)
    assert a.draft_acceptance_rate == pytest.approx((_e(0.7, 5) - 1) / 5)
    assert a.mean_acceptance_length == pytest.approx(_e(0.7, 5))
    assert a.per_position_unconditional == pytest.approx([0.7**j for j in range(1, 6)])
    back = convert_answer("draft_acceptance_rate", a.draft_acceptance_rate, 5)
    assert back.alpha == pytest.approx(0.7, abs=1e-9)
    tau = convert_answer("mean_acceptance_length", a.mean_acceptance_length, 5)
    assert tau.alpha == pytest.approx(0.7, abs=1e-9)
    # at K = 1 all three agree up to the bonus token: ρ = α, τ = 1 + α
    one = convert_answer("alpha", 0.55, 1)
    assert (one.draft_acceptance_rate, one.mean_acceptance_length) == pytest.approx((0.55, 1.55))


def test_a_figure_no_alpha_produces_says_so() -> None:
    t = convert_answer("mean_acceptance_length", 7.0, 5)  # at most K + 1 = 6 tokens per pass
    assert t.alpha is None and t.per_position_unconditional is None
    assert t.reason == "mean_acceptance_length=7 is outside what K=5 can produce"


def test_the_table_holds_the_same_figures_as_the_single_answers() -> None:
    t = table_answer([0.4, 0.7], [1, 5], 0.05, [1.0, 1.2])
    assert (len(t.speedup), len(t.speedup[0]), len(t.speedup[0][0])) == (2, 2, 2)
    cost = CostModel(draft_cost=0.05, verify_cost=1.2)
    assert t.speedup[1][1][1] == pytest.approx(speedup_answer(0.7, 5, cost).speedup)
    assert t.linear_speedup[1][1][1] == pytest.approx(speedup_answer(0.7, 5, cost).linear_speedup)
    assert t.expected_tokens_per_pass[1] == pytest.approx([_e(0.4, 5), _e(0.7, 5)])
    be = breakeven_answer(1, cost).alpha_breakeven
    assert be is not None and t.alpha_breakeven[1][0] == pytest.approx(be)
    assert all(math.isfinite(x) for row in t.alpha_breakeven_linear for x in row)
