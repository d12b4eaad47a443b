"""Simulator throughput: closed loop, 256 users, 20,000 requests, lognormal outputs (mean 256),
α = 0.7, K = 5, with its paired no-speculation run.

Reports simulated output tokens per wall-second and peak memory for the vectorized simulator, and
its ratio against the per-token pure-Python reference simulator (tests/statistical/reference_sim.py)
on a 1,000-request subset, in the same process. Targets: ≥ 20 M tokens/s, ≥ 10× the reference.
"""

from __future__ import annotations

import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.statistical.reference_sim import reference_simulate

from alphagate.core.traffic import TrafficClass
from alphagate.sim.cost import build_cost_model
from alphagate.sim.engine import Scenario, run_engine
from alphagate.sim.run import run_scenarios
from alphagate.sim.workload import ClosedLoop, RequestSet, sample_requests, unconditional_table
from alphagate.specs import DeploymentConfig, resolve_deployment
from alphagate.specs.workload import LognormalLength, WorkloadConfig

USERS, N, K, ALPHA = 256, 20_000, 5, 0.7


def main() -> None:
    dep = DeploymentConfig(weight_dtype="fp8")
    cls = (TrafficClass(name="all", share=1.0, alpha=ALPHA),)
    wl = WorkloadConfig(output_len=LognormalLength(mean=256, sigma=0.6), classes=cls)
    cost = build_cost_model(resolve_deployment(dep, wl, USERS))
    arr = ClosedLoop(users=USERS)
    reqs = sample_requests(wl, N, arr, np.random.default_rng(0))
    table = unconditional_table(cls, K)
    spec = Scenario(K, arr, reqs, table, 256)
    base = Scenario(0, arr, reqs, table, 256)

    run_scenarios(cost, [spec, base], np.random.default_rng(1))  # warm-up
    best = float("inf")
    for _ in range(3):
        tracemalloc.start()
        t0 = time.perf_counter()
        traces = run_scenarios(cost, [spec, base], np.random.default_rng(1))
        best = min(best, time.perf_counter() - t0)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    tokens = sum(int(t.step_tokens.sum()) for t in traces)
    spec_tokens = int(traces[0].step_tokens.sum())
    print(
        f"vectorized (spec + paired baseline): {tokens:,} simulated output tokens in {best:.3f} s"
    )
    print(
        f"  → {tokens / best / 1e6:.1f} M simulated output tokens / wall-second; peak traced memory {peak / 2**20:.0f} MiB"
    )
    t0 = time.perf_counter()
    run_scenarios(cost, [spec], np.random.default_rng(1))
    t_spec = time.perf_counter() - t0
    print(f"  speculative run alone: {spec_tokens / t_spec / 1e6:.1f} M tokens/s")

    # step-by-step engine (open loop / queueing path) on the same 1,000-request subset as the reference
    m = 1000
    sub = RequestSet(
        reqs.prompt_len[:m], reqs.output_len[:m], reqs.class_idx[:m], reqs.arrival_s[:m]
    )
    sub_sc = Scenario(K, arr, sub, table, 256)
    t0 = time.perf_counter()
    eng = run_engine(cost, sub_sc, np.random.default_rng(2))
    t_eng = time.perf_counter() - t0
    t0 = time.perf_counter()
    fast = run_scenarios(cost, [sub_sc], np.random.default_rng(2))[0]
    t_fast = time.perf_counter() - t0
    t0 = time.perf_counter()
    reference_simulate(
        cost,
        sub.prompt_len.tolist(),
        sub.output_len.tolist(),
        [[ALPHA] * K] * m,
        K,
        users=USERS,
        arrivals=None,
        max_num_seqs=256,
        seed=3,
    )
    t_ref = time.perf_counter() - t0
    sub_tokens = int(sub.output_len.sum())
    print(f"1,000-request subset ({sub_tokens:,} tokens):")
    print(f"  per-token reference  {sub_tokens / t_ref / 1e6:6.2f} M tokens/s  (reference)")
    print(
        f"  step engine          {sub_tokens / t_eng / 1e6:6.2f} M tokens/s  ratio {t_ref / t_eng:5.1f}×"
    )
    print(
        f"  closed-loop fast path{sub_tokens / t_fast / 1e6:6.2f} M tokens/s  ratio {t_ref / t_fast:5.1f}×"
    )
    assert int(eng.step_tokens.sum()) == int(fast.step_tokens.sum()) == sub_tokens


if __name__ == "__main__":
    main()
