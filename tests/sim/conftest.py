"""Shared simulator fixtures: a small deployment and helpers to build scenarios."""

from __future__ import annotations

import numpy as np

from alphagate.core.traffic import TrafficClass
from alphagate.sim.cost import StepCostModel
from alphagate.sim.engine import Scenario
from alphagate.sim.workload import Arrivals, ClosedLoop, sample_requests, unconditional_table
from alphagate.specs.workload import FixedLength, LengthDist, LognormalLength, WorkloadConfig


def constant_cost(draft_cost: float, max_batched: int = 1 << 30) -> StepCostModel:
    """Every target forward takes 1 s and every draft forward ``draft_cost`` s, whatever the batch."""
    return StepCostModel.constant(1.0, draft_cost, max_batched)


def scenario(
    k: int,
    alpha: float | list[float],
    arrivals: Arrivals,
    n: int,
    *,
    prompt: LengthDist | None = None,
    output: LengthDist | None = None,
    seed: int = 0,
    max_num_seqs: int = 256,
    disable_above_batch: int | None = None,
) -> Scenario:
    cls = (
        TrafficClass(name="c", share=1.0, alpha=alpha)
        if isinstance(alpha, float)
        else TrafficClass(name="c", share=1.0, alpha_by_pos=tuple(alpha))
    )
    wl = WorkloadConfig(
        prompt_len=prompt or FixedLength(value=64),
        output_len=output or LognormalLength(mean=64, sigma=0.5),
        classes=(cls,),
    )
    reqs = sample_requests(wl, n, arrivals, np.random.default_rng(seed))
    return Scenario(
        k,
        arrivals,
        reqs,
        unconditional_table((cls,), k),
        max_num_seqs,
        disable_above_batch=disable_above_batch,
    )


__all__ = ["ClosedLoop", "constant_cost", "scenario"]
