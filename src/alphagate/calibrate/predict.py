"""What a calibrated model predicts for one closed-loop level, in the terms a benchmark reports.

``alphagate bench`` and ``vllm bench serve`` divide the output tokens of a level by its whole
duration (first send to last reply: ramp-up and drain included) and each request also pays the
time outside the engine (HTTP, tokenization) that calibration measured as
``request_overhead_s``. :func:`predict_level` simulates the level with the profile's deployment
(the same requests, concurrency, K and α by position) and reports the same quantities, so that a
prediction and a measurement can be compared one to one.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from pydantic import Field

from alphagate.core.records import Frozen
from alphagate.core.traffic import TrafficClass
from alphagate.sim.cost import build_cost_model
from alphagate.sim.engine import Scenario
from alphagate.sim.results import summarize
from alphagate.sim.run import run_scenarios
from alphagate.sim.workload import ClosedLoop, RequestSet, unconditional_table
from alphagate.specs.calibration import CalibrationProfile
from alphagate.specs.deployment import resolve_deployment

__all__ = ["PredictedLevel", "predict_level"]


class PredictedLevel(Frozen):
    """One level as a benchmark would report it (means over ``runs`` simulated runs)."""

    concurrency: int
    k: int
    output_tokens_per_s: float
    step_ms: float = Field(description="mean engine step seen by the decoding sequences")
    ttft_ms: float


def predict_level(
    profile: CalibrationProfile,
    concurrency: int,
    k: int,
    alpha_by_pos: tuple[float, ...] | None,
    prompt_tokens: npt.ArrayLike,
    output_tokens: npt.ArrayLike,
    *,
    seed: int = 0,
    runs: int = 8,
) -> PredictedLevel:
    """Simulate a closed-loop level with ``profile``'s coefficients."""
    prompt = np.asarray(prompt_tokens, dtype=np.int64)
    output = np.asarray(output_tokens, dtype=np.int64)
    n = prompt.size
    cost = build_cost_model(resolve_deployment(profile.deployment))
    cls = (
        TrafficClass(name="level", share=1.0, alpha_by_pos=alpha_by_pos or (0.0,))
        if k
        else TrafficClass(name="level", share=1.0, alpha=0.0)
    )
    reqs = RequestSet(prompt, output, np.zeros(n, dtype=np.int64), np.full(n, np.nan))
    sc = Scenario(
        k, ClosedLoop(users=concurrency), reqs, unconditional_table((cls,), k),
        profile.deployment.max_num_seqs,
    )  # fmt: skip
    overhead = profile.request_overhead_s or 0.0
    traces = run_scenarios(cost, [sc] * runs, np.random.default_rng(seed))
    tput, step, ttft = [], [], []
    for tr in traces:
        s = summarize(tr)
        # every user sends its requests one after another, each paying the time outside the engine
        duration = s.duration_s + overhead * n / min(concurrency, n)
        tput.append(s.output_tokens / duration)
        step.append(s.itl_per_chunk_ms.mean or 0.0)  # one chunk per decoding sequence per step
        ttft.append((s.ttft_ms.mean or 0.0) + overhead * 1e3)
    return PredictedLevel(
        concurrency=concurrency,
        k=k,
        output_tokens_per_s=float(np.mean(tput)),
        step_ms=float(np.mean(step)),
        ttft_ms=float(np.mean(ttft)),
    )
