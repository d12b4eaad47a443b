"""The step-time model's steady-state predictions: with constant step costs the model speedup is
the closed form E / (K·c + 1) at every batch, and break-even α, the crossover batch and the best
K are where the model's own speedup says they are."""

from __future__ import annotations

import pytest

from alphagate.core.traffic import TrafficClass
from alphagate.sim.cost import StepCostModel
from alphagate.sim.predict import (
    MIN_GAIN,
    best_k_model,
    breakeven_alpha_model,
    crossover_batch_model,
    model_speedup,
    single_class,
)
from alphagate.specs.workload import FixedLength, WorkloadConfig
from tests.sim.conftest import constant_cost

WL = WorkloadConfig(prompt_len=FixedLength(value=256), output_len=FixedLength(value=128))


def _e(alpha: float, k: int) -> float:
    return (1 - alpha ** (k + 1)) / (1 - alpha)


@pytest.mark.parametrize(("alpha", "k", "c"), [(0.7, 5, 0.05), (0.4, 3, 0.2), (0.9, 1, 0.0)])
@pytest.mark.parametrize("batch", [1.0, 16.0, 200.0])
def test_constant_costs_give_the_closed_form(alpha: float, k: int, c: float, batch: float) -> None:
    s = model_speedup(constant_cost(c), single_class(alpha), k, batch, WL)
    assert s == pytest.approx(_e(alpha, k) / (k * c + 1), rel=1e-12)


def test_no_drafts_is_exactly_one_and_classes_blend_harmonically() -> None:
    cost = constant_cost(0.1)
    assert model_speedup(cost, single_class(0.9), 0, 64.0, WL) == 1.0
    mix = (
        TrafficClass(name="a", share=0.5, alpha=0.8),
        TrafficClass(name="b", share=0.5, alpha=0.2),
    )
    e = 1 / (0.5 / _e(0.8, 3) + 0.5 / _e(0.2, 3))  # tokens per sequence per step, by time spent
    assert model_speedup(cost, mix, 3, 8.0, WL) == pytest.approx(e / 1.3, rel=1e-12)


def test_break_even_alpha_is_where_the_model_speedup_reaches_one(cost_8b: StepCostModel) -> None:
    be = breakeven_alpha_model(cost_8b, 3, 64.0, WL)
    assert be is not None and 0.0 < be < 1.0
    at = model_speedup(cost_8b, single_class(be), 3, 64.0, WL)
    assert at == pytest.approx(1.0, abs=1e-6)
    assert model_speedup(cost_8b, single_class(be + 0.01), 3, 64.0, WL) > 1.0
    assert breakeven_alpha_model(constant_cost(0.0), 3, 64.0, WL) == 0.0  # free drafts: any α
    assert breakeven_alpha_model(constant_cost(1.2), 3, 64.0, WL) is None  # 4 tokens for 4.6


def test_the_crossover_batch_is_where_speculation_stops_paying(cost_8b: StepCostModel) -> None:
    cls = single_class(0.6)
    b = crossover_batch_model(cost_8b, cls, 3, WL, 4096)
    assert b is not None and 1.0 < b < 4096.0
    assert model_speedup(cost_8b, cls, 3, b, WL) == pytest.approx(1.0, abs=1e-6)
    assert crossover_batch_model(constant_cost(0.05), cls, 3, WL, 4096) is None  # pays at any batch
    assert crossover_batch_model(constant_cost(0.5), single_class(0.1), 3, WL, 4096) == 1.0


def test_the_best_k_is_the_models_argmax_unless_the_gain_is_too_small() -> None:
    cost = constant_cost(0.05)
    k, s = best_k_model(cost, single_class(0.8), 32.0, WL, 8)
    speeds = [_e(0.8, kk) / (kk * 0.05 + 1) for kk in range(1, 9)]
    assert k == speeds.index(max(speeds)) + 1 and s == pytest.approx(max(speeds))
    # a gain below MIN_GAIN is not worth turning speculation on for
    tiny = 1.0 + (MIN_GAIN - 1.0) / 2
    c = _e(0.1, 1) / tiny - 1.0  # K = 1 gains exactly `tiny` at α 0.1
    assert best_k_model(constant_cost(c), single_class(0.1), 32.0, WL, 1) == (0, 1.0)
