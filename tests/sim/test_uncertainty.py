"""The corners of :class:`alphagate.sim.uncertainty.CostDesign` are the extremes over the whole box
of ranges: checked against a scrambled Sobol design over the same box, for the closed form and for
paired simulations on the same requests."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import qmc

from alphagate.core.traffic import TrafficClass
from alphagate.plan.predictions import Predictor
from alphagate.plan.records import PlanRequest
from alphagate.sim.cost import StepCostModel, build_cost_model
from alphagate.sim.predict import breakeven_alpha_model, model_speedup, single_class
from alphagate.sim.uncertainty import CostDesign
from alphagate.specs import DeploymentConfig, WorkloadConfig, resolve_deployment
from alphagate.specs.uncertainty import EFFICIENCIES, CostRanges, prior_ranges

WL = WorkloadConfig()
DEPLOYMENTS = {
    "70b-fp8": DeploymentConfig(),
    "8b-bf16": DeploymentConfig(model="llama-3.1-8b", weight_dtype="bf16"),
    "8b-draft-model": DeploymentConfig(
        model="llama-3.1-8b", weight_dtype="bf16", drafter={"method": "draft_model"}
    ),
}


def _design(dep: DeploymentConfig) -> CostDesign:
    def rebuild(eff: dict[str, float]) -> StepCostModel:
        return build_cost_model(resolve_deployment(dep.model_copy(update=eff), WL, 256))

    return CostDesign(
        build_cost_model(resolve_deployment(dep, WL, 256)), prior_ranges(dep), rebuild
    )


def _sobol(ranges: CostRanges, n: int, seed: int) -> list[dict[str, float]]:
    vary = ranges.varying()
    u = qmc.Sobol(d=len(vary), scramble=True, seed=seed).random(n)
    lo = np.asarray([r.low for r in vary])
    hi = np.asarray([r.high for r in vary])
    pts = lo + u * (hi - lo)
    return [{r.coefficient: float(x) for r, x in zip(vary, p, strict=True)} for p in pts]


@pytest.mark.parametrize("name", sorted(DEPLOYMENTS))
def test_corners_bound_the_closed_form_over_the_box(name: str) -> None:
    design = _design(DEPLOYMENTS[name])
    points = _sobol(design.ranges, 64, seed=1)
    classes = single_class(0.7)
    for batch in (1.0, 16.0, 64.0, 256.0):
        for k in (1, 3):

            def f(m: StepCostModel, b: float = batch, kk: int = k) -> float:
                return model_speedup(m, classes, kk, b, WL)

            s = design.spread(f)
            assert s.low <= s.value <= s.high
            inside = [f(design.at(p)) for p in points]
            # the box's extremes are the corners: no design point beyond them
            assert min(inside) >= s.low - 1e-9, (batch, k, min(inside), s.low)
            assert max(inside) <= s.high + 1e-9, (batch, k, max(inside), s.high)
            # and the corners are reached: they are not a loose bound
            assert f(design.at(s.low_at)) == pytest.approx(s.low)
            assert f(design.at(s.high_at)) == pytest.approx(s.high)


def test_efficiencies_are_held_without_a_rebuild() -> None:
    dep = DEPLOYMENTS["8b-bf16"]
    cost = build_cost_model(resolve_deployment(dep, WL, 256))
    held = CostDesign(cost, prior_ranges(dep))
    s = held.spread(lambda m: model_speedup(m, single_class(0.7), 3, 64.0, WL))
    for name in EFFICIENCIES:
        assert s.low_at[name] == s.high_at[name] == prior_ranges(dep)[name].value


def test_the_break_even_range_is_read_at_the_speedups_corners() -> None:
    """The break-even α is highest where speculation pays least: at the speedup's low corner."""
    design = _design(DEPLOYMENTS["70b-fp8"])
    points = _sobol(design.ranges, 16, seed=2)
    lo_m, hi_m = design.corners(lambda m: model_speedup(m, single_class(0.6), 1, 256.0, WL))
    be_lo = breakeven_alpha_model(hi_m, 1, 256.0, WL)
    be_hi = breakeven_alpha_model(lo_m, 1, 256.0, WL)
    assert be_lo is not None and be_hi is not None
    for p in points:
        be = breakeven_alpha_model(design.at(p), 1, 256.0, WL)
        assert be is not None and be_lo - 1e-6 <= be <= be_hi + 1e-6


def test_simulated_ranges_bound_paired_simulations_over_the_box() -> None:
    """The plan's simulated range (paired simulations rerun at the closed form's corners, same
    requests and random numbers) holds the paired simulations at Sobol points of the box, within
    what the simulator's own scheduling noise moves a run (1%)."""
    classes = (
        TrafficClass(name="chat", share=0.7, alpha=0.7),
        TrafficClass(name="code", share=0.3, alpha=0.4),
    )
    pred = Predictor(
        PlanRequest(workload=WorkloadConfig(classes=classes), concurrency=64, peak_concurrency=256)
    )
    for users, k in ((16, 3), (64, 2), (256, 1)):
        thr = pred.sim_intervals(users, classes, k)[0]
        assert thr.low is not None and thr.high is not None
        for p in _sobol(pred.ranges, 8, seed=users):
            s = pred.paired(users, classes, k, pred.design.at(p)).speedup.throughput_speedup
            assert s is not None
            assert thr.low * 0.99 <= s <= thr.high * 1.01, (users, k, s, thr)


def test_a_scaled_range_agrees_with_simulations_rerun_at_the_corners() -> None:
    """``simulate`` gives every cell the simulated speedup times the closed form's ends over its
    value (no simulation at the corners); measured against the corner reruns the plan makes, on
    the same requests: each end within 3% (seen: within 0.25%), and the value inside."""
    classes = single_class(0.6)
    pred = Predictor(
        PlanRequest(workload=WorkloadConfig(classes=classes), concurrency=64, peak_concurrency=256)
    )
    for users, k in ((1, 3), (16, 3), (64, 5), (256, 1)):
        rerun = pred.sim_intervals(users, classes, k)[0]
        scaled = pred.scaled_interval(users, classes, k)
        assert scaled is not None and scaled.low is not None and scaled.high is not None
        assert rerun.low is not None and rerun.high is not None
        assert scaled.low <= pred.sim_speedup(users, classes, k) <= scaled.high
        assert scaled.low == pytest.approx(rerun.low, rel=0.03), (users, k)
        assert scaled.high == pytest.approx(rerun.high, rel=0.03), (users, k)
