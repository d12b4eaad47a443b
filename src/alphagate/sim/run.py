"""Running scenarios: pick the fast closed-loop path or the step-by-step engine, pair baselines.

Randomness: one :class:`numpy.random.Generator` is split with ``spawn`` into one child per
scenario, so a scenario's draws do not depend on what else runs beside it. Same seed ⇒ same output.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from alphagate.sim.closed_loop import fast_path_applies, run_closed_loop
from alphagate.sim.cost import StepCostModel
from alphagate.sim.engine import RunTrace, Scenario, run_engine
from alphagate.sim.results import SimSummary, Speedups, speedups, summarize

__all__ = ["PairedRun", "run_paired", "run_scenarios"]


def run_scenarios(
    cost: StepCostModel,
    scenarios: list[Scenario],
    rng: np.random.Generator,
    *,
    record_chunks: bool = False,
    force_engine: bool = False,
) -> list[RunTrace]:
    """Simulate every scenario; closed-loop ones take the step-space path unless ``force_engine``."""
    return [
        run_closed_loop(cost, sc, child, record_chunks=record_chunks)
        if not force_engine and fast_path_applies(sc, cost)
        else run_engine(cost, sc, child, record_chunks=record_chunks)
        for sc, child in zip(scenarios, rng.spawn(len(scenarios)), strict=True)
    ]


@dataclass(frozen=True)
class PairedRun:
    """A speculative scenario, its no-speculation twin, and their comparison."""

    spec: SimSummary
    baseline: SimSummary
    speedup: Speedups
    spec_trace: RunTrace
    baseline_trace: RunTrace


def run_paired(
    cost: StepCostModel,
    scenario: Scenario,
    rng: np.random.Generator,
    *,
    baseline_max_num_seqs: int | None = None,
    record_chunks: bool = False,
) -> PairedRun:
    """Run ``scenario`` and the same scenario with K = 0 (same requests, arrivals, lengths).

    Each arm holds its own largest batch: ``scenario.max_num_seqs`` the speculative server's,
    ``baseline_max_num_seqs`` the baseline's (None: the same), which holds more sequences where
    the drafter's KV takes room from the speculative one
    (:meth:`~alphagate.sim.cost.StepCostModel.arm_caps`).
    """
    base_sc = Scenario(
        k=0,
        arrivals=scenario.arrivals,
        requests=scenario.requests,
        unconditional=scenario.unconditional,
        max_num_seqs=baseline_max_num_seqs or scenario.max_num_seqs,
        label=f"{scenario.label} baseline".strip(),
    )
    spec_t, base_t = run_scenarios(cost, [scenario, base_sc], rng, record_chunks=record_chunks)
    spec_s, base_s = summarize(spec_t), summarize(base_t)
    return PairedRun(spec_s, base_s, speedups(spec_s, base_s), spec_t, base_t)
