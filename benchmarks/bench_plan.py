"""A plan and a simulation with their ranges vs the same answers' point predictions, in the same
process.

The default plan scenario (Llama-3.3-70B FP8 on H100s, 70% chat at α 0.7 and 30% code at α 0.4,
concurrency 64 with peaks of 256), built three times each way after one warm-up: CPU seconds per
plan (``time.process_time``, this process only) and their ratio. Goal: ≤ 5 s of CPU with ranges
on a 2-core machine. Then ``simulate``'s default grid (4 loads × 3 K × 6 α, with the simulated
break-even bisection) each way. Goal: ranges cost at most 2× the grid without them.
"""

from __future__ import annotations

import statistics
import time

from alphagate.core.traffic import TrafficClass
from alphagate.plan import PlanRequest, build_plan
from alphagate.sim.sweep import SweepConfig, simulate
from alphagate.specs import WorkloadConfig

ROUNDS = 3


def _request(ranges: bool) -> PlanRequest:
    traffic = WorkloadConfig(
        classes=(
            TrafficClass(name="chat", share=0.7, alpha=0.7),
            TrafficClass(name="code", share=0.3, alpha=0.4),
        )
    )
    return PlanRequest(workload=traffic, concurrency=64, peak_concurrency=256, ranges=ranges)


def _cpu(ranges: bool) -> list[float]:
    out = []
    for _ in range(ROUNDS):
        t0 = time.process_time()
        build_plan(_request(ranges))
        out.append(time.process_time() - t0)
    return out


def _sim_cpu(ranges: bool) -> list[float]:
    out = []
    cfg = SweepConfig(alphas=(0.4, 0.5, 0.55, 0.6, 0.7, 0.8), ranges=ranges)
    for _ in range(ROUNDS):
        t0 = time.process_time()
        simulate(cfg)
        out.append(time.process_time() - t0)
    return out


def main() -> None:
    build_plan(_request(True))  # imports, scipy, caches outside the timing
    points, ranged = _cpu(False), _cpu(True)
    p, r = statistics.median(points), statistics.median(ranged)
    plan = build_plan(_request(True))
    iv = plan.headline_interval
    assert iv is not None and iv.low is not None and iv.high is not None
    print(f"plan, point predictions: {p:6.2f} s CPU (median of {ROUNDS}; reference)")
    print(f"plan, with ranges:       {r:6.2f} s CPU (median of {ROUNDS}; goal ≤ 5 s)")
    print(f"ratio with ranges / points: {r / p:.2f}×")
    print(
        f"the plan: {plan.verdict.upper()}, {plan.headline_speedup:.2f}× "
        f"[{iv.low:.2f}–{iv.high:.2f}] at concurrency 64"
    )
    simulate(SweepConfig(alphas=(0.7,), concurrencies=(1,)))  # warm-up
    s_points, s_ranged = statistics.median(_sim_cpu(False)), statistics.median(_sim_cpu(True))
    print(
        f"simulate grid, point predictions: {s_points:6.2f} s CPU (median of {ROUNDS}; reference)"
    )
    print(f"simulate grid, with ranges:       {s_ranged:6.2f} s CPU (median of {ROUNDS})")
    print(f"ratio with ranges / points: {s_ranged / s_points:.2f}× (goal ≤ 2×)")


if __name__ == "__main__":
    main()
