"""The twin serving suffix decoding: each step draws a sequence's drafted and accepted tokens from
the class's measured profile, and its counters count as vLLM's scheduler does — a step that
drafted nothing is no draft, draft tokens are what was drafted (stepped here without a server)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from alphagate.measure.prom import parse_spec_counters
from alphagate.sim.cost import build_cost_model
from alphagate.specs import DeploymentConfig, SuffixDrafter, WorkloadConfig, resolve_deployment
from alphagate.theory.lengths import length_counters, profile_class
from alphagate.twin.config import TwinConfig
from alphagate.twin.engine import TwinEngine

STEPS = [[30.0], [8.0, 8.0], [3.0, 4.0, 3.0], [1.0, 3.0, 2.0, 2.0]]


def test_the_twins_counters_follow_the_profile() -> None:
    cls = profile_class("code", 1.0, STEPS)
    cfg = TwinConfig(
        deployment=DeploymentConfig(model="llama-3.1-8b", drafter=SuffixDrafter()),
        workload=WorkloadConfig(classes=(cls,)),
        k=3,
        time_scale=0.0,
        per_request_spec_decode_metrics="detailed",
    )
    engine = TwinEngine(cfg, build_cost_model(resolve_deployment(cfg.deployment)))
    reqs = [engine.submit(16, 400, True, 0, None) for _ in range(24)]
    while engine.n_running or engine.n_waiting:
        dt = engine._step_plan()
        assert dt is not None and dt > 0
        engine._step_emit(0.0, dt)
    c = parse_spec_counters(engine.metrics.exposition().decode())
    drafted = sum(sum(r.per_step_drafted) for r in reqs)
    steps = sum(len(r.per_step_drafted) for r in reqs)
    assert c.drafts == steps == sum(sum(r.histogram) for r in reqs)
    assert c.draft_tokens == drafted and min(min(r.per_step_drafted) for r in reqs) >= 1
    want = length_counters(np.asarray([row + [0.0] * (3 - len(row) + 1) for row in STEPS]))
    rho = float(want.accepted / want.draft_tokens)
    assert c.accepted / c.draft_tokens == pytest.approx(rho, rel=5 / math.sqrt(steps))
    spec = reqs[0].spec_decode_metrics(3)
    assert spec["num_draft_tokens"] == sum(reqs[0].per_step_drafted)
