"""What a calibrated model predicts for one closed-loop level, in the terms a benchmark reports.

``alphagate bench`` and ``vllm bench serve`` divide the output tokens of a level by its whole
duration (first send to last reply: ramp-up and drain included) and each request also pays the
time outside the engine (HTTP, tokenization) that calibration measured as
``request_overhead_s``: part of it in the server's front-end, one request after another
(``frontend_request_s``), so that a closed loop's users whose requests finish in the same step
reach the engine again one front-end time apart. :func:`predict_level` simulates the level
step by step with the profile's deployment (the same requests, concurrency, K and α by position,
and those times per request) and reports the same quantities, so that a prediction and a
measurement can be compared one to one.
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
from alphagate.specs.deployment import DeploymentConfig, resolve_deployment

__all__ = ["PredictedLevel", "predict_level", "simulate_level"]


class PredictedLevel(Frozen):
    """One level as a benchmark would report it (means over ``runs`` simulated runs)."""

    concurrency: int
    k: int
    output_tokens_per_s: float
    step_ms: float = Field(description="mean engine step seen by the decoding sequences")
    ttft_ms: float


def simulate_level(
    deployment: DeploymentConfig,
    concurrency: int,
    k: int,
    alpha_by_pos: tuple[float, ...] | None,
    prompt_tokens: npt.ArrayLike,
    output_tokens: npt.ArrayLike,
    *,
    request_overhead_s: float = 0.0,
    frontend_s: float = 0.0,
    seed: int = 0,
    runs: int = 8,
) -> PredictedLevel:
    """Simulate a closed-loop level on ``deployment``'s step-time model, each request spending
    ``request_overhead_s`` outside the engine, ``frontend_s`` of it in the serial front-end
    (:class:`alphagate.sim.engine.Scenario`). The baseline (K = 0) draws nothing: one run."""
    prompt = np.asarray(prompt_tokens, dtype=np.int64)
    output = np.asarray(output_tokens, dtype=np.int64)
    n = prompt.size
    cost = build_cost_model(resolve_deployment(deployment))
    cls = (
        TrafficClass(name="level", share=1.0, alpha_by_pos=alpha_by_pos or (0.0,))
        if k
        else TrafficClass(name="level", share=1.0, alpha=0.0)
    )
    frontend = min(max(frontend_s, 0.0), max(request_overhead_s, 0.0))
    reqs = RequestSet(prompt, output, np.zeros(n, dtype=np.int64), np.full(n, np.nan))
    sc = Scenario(
        k, ClosedLoop(users=concurrency), reqs, unconditional_table((cls,), k),
        deployment.max_num_seqs, frontend_s=frontend,
        request_delay_s=max(request_overhead_s - frontend, 0.0),
    )  # fmt: skip
    traces = run_scenarios(cost, [sc] * (runs if k else 1), np.random.default_rng(seed))
    tput, step, ttft = [], [], []
    for tr in traces:
        s = summarize(tr)
        # first send to the last token, every request's time outside the engine included
        tput.append(s.output_tokens / s.duration_s if s.duration_s > 0 else 0.0)
        step.append(s.itl_per_chunk_ms.mean or 0.0)  # one chunk per decoding sequence per step
        ttft.append(s.ttft_ms.mean or 0.0)
    return PredictedLevel(
        concurrency=concurrency,
        k=k,
        output_tokens_per_s=float(np.mean(tput)),
        step_ms=float(np.mean(step)),
        ttft_ms=float(np.mean(ttft)),
    )


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
    """Simulate a closed-loop level with ``profile``'s coefficients and its times per request
    outside the engine."""
    return simulate_level(
        profile.deployment, concurrency, k, alpha_by_pos, prompt_tokens, output_tokens,
        request_overhead_s=profile.request_overhead_s or 0.0,
        frontend_s=profile.frontend_request_s or 0.0, seed=seed, runs=runs,
    )  # fmt: skip
