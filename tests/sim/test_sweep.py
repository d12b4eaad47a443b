"""Step-time model behaviour and the derived answers (break-even α, crossover), cross-checked."""

from __future__ import annotations

import numpy as np
import pytest

from alphagate import theory
from alphagate.core.traffic import TrafficClass
from alphagate.sim.cost import StepCostModel, build_cost_model
from alphagate.sim.predict import breakeven_alpha_model, crossover_batch_model, model_speedup
from alphagate.sim.sweep import (
    SweepConfig,
    breakeven_alpha_sim,
    crossover_concurrency_sim,
    run_sweep,
)
from alphagate.specs import DeploymentConfig, NgramDrafter, resolve_deployment
from alphagate.specs.workload import FixedLength, LognormalLength, WorkloadConfig


@pytest.fixture(scope="module")
def scenario_70b() -> tuple[DeploymentConfig, StepCostModel]:
    dep = DeploymentConfig(weight_dtype="fp8")
    return dep, build_cost_model(resolve_deployment(dep, WorkloadConfig(), 256))


def test_cost_ratios_emerge_from_the_roofline(
    scenario_70b: tuple[DeploymentConfig, StepCostModel],
) -> None:
    _, cost = scenario_70b
    v1 = float(cost.verify_cost_ratio(1, 5, 640))
    v256 = float(cost.verify_cost_ratio(256, 5, 640))
    assert v1 == pytest.approx(1.0, abs=0.01)  # memory-bound: verifying 6 tokens costs one decode
    assert v256 > 3.0  # compute-bound: 1,536 tokens per pass
    vs = cost.verify_cost_ratio(np.array([1, 8, 32, 64, 128, 256]), 5, 640)
    assert np.all(np.diff(vs) >= 0)
    c1 = float(cost.draft_cost_ratio(1, 640))
    assert 0.005 < c1 < 0.1  # an EAGLE-3 head is ~2% of the target's weights


def test_verify_turns_compute_bound_at_the_ridge() -> None:
    """At peak numbers (η = 1) and without tile or wave quantization, a BF16 target's GEMMs turn
    compute-bound at ≈ 295 tokens on H100 (the roofline ridge); with 64×128 tiles in waves over
    132 SMs, some GEMMs turn compute-bound earlier, in steps. (Pure roofline: the overlap loss,
    which makes the time grow below the ridge too, is off.)"""
    from dataclasses import replace

    dep = DeploymentConfig(
        model="llama-3.1-8b", bw_efficiency=1.0, compute_efficiency=1.0, weight_dtype="bf16"
    )
    cost = build_cost_model(resolve_deployment(dep))
    assert cost.target is not None
    t = cost.target
    tokens = np.arange(1, 1000, dtype=np.float64)
    roofline = replace(t.hw, gemm_overlap_loss=0.0)
    ideal = replace(roofline, tile_m=1, tile_n=1, sm_count=10**9)
    linear = t.gemms.seconds(tokens, t.bytes_per_weight, ideal)
    knee = tokens[np.argmax(linear > linear[0] * 1.0001)]
    assert knee == pytest.approx(295, rel=0.01)
    quantized = t.gemms.seconds(tokens, t.bytes_per_weight, roofline)
    knee_q = tokens[np.argmax(quantized > quantized[0] * 1.0001)]
    assert 64 < knee_q < 295
    assert np.all(quantized >= linear - 1e-15)  # padding never makes a GEMM cheaper


def test_compute_bound_floor_at_very_large_batch() -> None:
    """With negligible KV traffic, a free drafter and a huge batch, S → 1 / operations factor
    (Leviathan Thm 3.11 with ĉ = 0): the verify pass does K + 1 times a decode step's work."""
    dep = DeploymentConfig(
        model="llama-3.1-8b",
        weight_dtype="bf16",
        step_overhead_ms=0.0,
        per_seq_overhead_us=0.0,
        drafter=NgramDrafter(cpu_cost_ms=0.0),
    )
    cost = build_cost_model(resolve_deployment(dep))
    b, k, alpha = 200_000.0, 5, 0.7
    t_spec = float(cost.spec_step_time(b, k, 1.0))
    t_dec = float(cost.decode_time(b, 1.0))
    s = float(theory.expected_tokens_per_pass(alpha, k)) * t_dec / t_spec
    assert s == pytest.approx(float(theory.compute_bound_speedup(alpha, k, 0.0)), rel=0.02)


def test_ngram_drafting_costs_no_gpu_time() -> None:
    dep = DeploymentConfig(model="llama-3.1-8b", weight_dtype="bf16", drafter=NgramDrafter())
    cost = build_cost_model(resolve_deployment(dep))
    assert cost.draft is None
    assert float(cost.draft_cost_ratio(16, 1000)) < 0.01


def test_speedup_falls_with_concurrency(
    scenario_70b: tuple[DeploymentConfig, StepCostModel],
) -> None:
    dep, cost = scenario_70b
    cfg = SweepConfig(
        deployment=dep,
        workload=WorkloadConfig(),
        alphas=(0.6,),
        ks=(3,),
        concurrencies=(1, 16, 64, 256),
        simulate_breakeven=False,
    )
    res = run_sweep(cfg, resolve_deployment(dep, WorkloadConfig(), 256), cost)
    s = [c.speedup.throughput_speedup or 0.0 for c in res.cells]
    assert s == sorted(s, reverse=True)
    assert s[0] > 1.9 and s[-1] < 1.0  # pays at C = 1, a net loss at C = 256
    be = [row.for_k(3).alpha_breakeven_model for row in res.rows]
    assert all(b is not None for b in be)
    assert be == sorted(be)  # type: ignore[type-var]


@pytest.mark.parametrize(("users", "k"), [(1, 5), (64, 3), (256, 5)])
def test_breakeven_model_and_simulator_agree(
    scenario_70b: tuple[DeploymentConfig, StepCostModel], users: int, k: int
) -> None:
    _, cost = scenario_70b
    wl = WorkloadConfig()
    model = breakeven_alpha_model(cost, k, float(users), wl)
    sim = breakeven_alpha_sim(cost, wl, k, users, seed=1, tol=0.005)
    assert model is not None and sim is not None
    assert sim == pytest.approx(model, abs=0.03)


def test_crossover_model_and_simulator_agree(
    scenario_70b: tuple[DeploymentConfig, StepCostModel],
) -> None:
    _, cost = scenario_70b
    wl = WorkloadConfig(
        prompt_len=FixedLength(value=512), output_len=LognormalLength(mean=256, sigma=0.5)
    )
    cls = (TrafficClass(name="a", share=1.0, alpha=0.6),)
    model = crossover_batch_model(cost, cls, 5, wl, b_max=256)
    sim = crossover_concurrency_sim(cost, wl, 0.6, 5, c_max=256, seed=2)
    assert model is not None and sim is not None
    assert sim == pytest.approx(model, rel=0.15)
    assert (
        model_speedup(cost, cls, 5, model * 0.8, wl)
        > 1.0
        > model_speedup(cost, cls, 5, model * 1.25, wl)
    )
