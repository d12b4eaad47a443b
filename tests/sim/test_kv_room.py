"""Each arm of a paired run holds its own largest batch: a draft model's KV takes room from the
speculative server, so above what it holds its requests queue — in the simulator, in the closed
form and in ``simulate`` — while below both caps nothing changes."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from alphagate.core.traffic import TrafficClass
from alphagate.sim.cost import StepCostModel, build_cost_model
from alphagate.sim.engine import Scenario
from alphagate.sim.predict import model_speedup
from alphagate.sim.run import PairedRun, run_paired
from alphagate.sim.sweep import SweepConfig, simulate
from alphagate.sim.workload import ClosedLoop, sample_requests, unconditional_table
from alphagate.specs import ArmCaps, DeploymentConfig, drafter_for, resolve_deployment
from alphagate.specs.workload import FixedLength, LognormalLength, WorkloadConfig

K = 3
CLASSES = (TrafficClass(name="c", share=1.0, alpha=0.8),)
#: 1,024-token prompts and ~64 tokens out: 1,088 tokens per sequence
WL = WorkloadConfig(
    prompt_len=FixedLength(value=1024),
    output_len=LognormalLength(mean=64, sigma=0.5),
    classes=CLASSES,
)
#: Llama-3.1-8B with a Llama-3.2-1B draft model on one H100 that keeps 32% of its memory for the
#: server: 48,366 KV tokens without the drafter, 23,607 beside its weights and KV
DEP = DeploymentConfig(
    model="llama-3.1-8b",
    weight_dtype="bf16",
    tp=1,
    gpu_memory_utilization=0.32,
    drafter=drafter_for("draft_model"),
)


@pytest.fixture(scope="module")
def cost() -> StepCostModel:
    return build_cost_model(resolve_deployment(DEP))


@pytest.fixture(scope="module")
def crowded(cost: StepCostModel) -> tuple[PairedRun, PairedRun]:
    """64 users with each arm at its own cap, and with both at the baseline's."""
    caps = _caps(cost)
    return _paired(cost, 64, caps), _paired(cost, 64, _equal(caps))


def _equal(caps: ArmCaps) -> ArmCaps:
    """Both arms at the baseline's largest batch."""
    return ArmCaps(baseline=caps.baseline, speculative=caps.baseline)


def _caps(cost: StepCostModel) -> ArmCaps:
    return cost.arm_caps(K, WL.mean_sequence_tokens(), DEP.max_num_seqs)


def _paired(cost: StepCostModel, users: int, caps: ArmCaps) -> PairedRun:
    arrivals = ClosedLoop(users=users)
    reqs = sample_requests(WL, 16 * users, arrivals, np.random.default_rng(1))
    sc = Scenario(K, arrivals, reqs, unconditional_table(CLASSES, K), caps.speculative)
    return run_paired(cost, sc, np.random.default_rng(2), baseline_max_num_seqs=caps.baseline)


def test_the_deployments_caps_by_hand(cost: StepCostModel) -> None:
    # 48,366 // 1,088 and 23,607 // (1,088 + 3 drafts + 3 lookahead slots)
    assert _caps(cost) == ArmCaps(baseline=44, speculative=21)


def test_the_capped_arm_queues_its_ttft_rises_and_the_speedup_falls(
    cost: StepCostModel, crowded: tuple[PairedRun, PairedRun]
) -> None:
    caps = _caps(cost)
    held, equal = crowded
    # the baseline is the same run either way, at its own cap
    np.testing.assert_array_equal(held.baseline_trace.finish_s, equal.baseline_trace.finish_s)
    assert int(held.baseline_trace.step_n_running.max()) == caps.baseline
    assert int(held.spec_trace.step_n_running.max()) == caps.speculative
    assert int(equal.spec_trace.step_n_running.max()) == caps.baseline
    # 64 users on 21 slots wait far longer for their first token than on 44
    ttft_held, ttft_equal = held.spec.ttft_ms.p50, equal.spec.ttft_ms.p50
    assert ttft_held is not None and ttft_equal is not None
    assert ttft_held > 1.5 * ttft_equal
    s_held, s_equal = held.speedup.throughput_speedup, equal.speedup.throughput_speedup
    assert s_held is not None and s_equal is not None
    assert s_held < 0.95 * s_equal


def test_below_both_caps_nothing_changes(cost: StepCostModel) -> None:
    caps = _caps(cost)
    users = caps.speculative - 5
    held = _paired(cost, users, caps)
    equal = _paired(cost, users, _equal(caps))
    for a, b in ((held.spec_trace, equal.spec_trace), (held.baseline_trace, equal.baseline_trace)):
        np.testing.assert_array_equal(a.finish_s, b.finish_s)
        np.testing.assert_array_equal(a.step_dt_s, b.step_dt_s)
    assert held.speedup == equal.speedup


def test_the_closed_form_caps_each_arm_as_the_simulator_does(
    cost: StepCostModel, crowded: tuple[PairedRun, PairedRun]
) -> None:
    """The closed form's speedup with the caps over the same without them (the speculative arm
    at the baseline's batch) falls as the simulated one does; the simulated rates sit a few
    percent off the steady state (ramp-up and the drain of the last requests), hence 5%."""
    caps = _caps(cost)
    free = dataclasses.replace(cost, batch_room=None)
    below = float(caps.speculative - 5)
    assert model_speedup(cost, CLASSES, K, below, WL) == model_speedup(free, CLASSES, K, below, WL)
    at = float(caps.baseline)
    model_ratio = model_speedup(cost, CLASSES, K, at, WL) / model_speedup(free, CLASSES, K, at, WL)
    held, equal = (run.speedup.throughput_speedup for run in crowded)
    assert held is not None and equal is not None
    assert model_ratio < 0.95
    assert held / equal == pytest.approx(model_ratio, rel=0.05)


def test_simulate_runs_each_arm_at_its_own_cap() -> None:
    """40 users: the baseline holds them all (43,520 tokens), the speculative server 21; its
    requests queue. A run's mean batch is at least 85% of what it holds (drain included,
    :func:`~alphagate.sim.sweep.default_num_requests`)."""
    cfg = SweepConfig(
        deployment=DEP,
        workload=WL,
        alphas=(0.8,),
        ks=(K,),
        concurrencies=(16, 40),
        simulate_breakeven=False,
        ranges=False,
    )
    r = simulate(cfg)
    assert r.largest_batch == [ArmCaps(baseline=44, speculative=21)]
    assert r.crossover_search_max == 44
    assert (r.deployment_detail.kv_capacity_tokens_without_draft or 0) > (
        r.deployment_detail.kv_capacity_tokens
    )
    above = r.cell(40.0, K, "α=0.8")
    assert above is not None
    row = next(x for x in r.rows if x.load == 40.0)
    assert 0.85 * 21 <= above.spec.mean_batch <= 21 < 0.85 * 40 <= row.baseline.mean_batch <= 40
    assert above.spec.ttft_ms.p50 is not None and row.baseline.ttft_ms.p50 is not None
    assert above.spec.ttft_ms.p50 > 1.5 * row.baseline.ttft_ms.p50
