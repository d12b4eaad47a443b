"""Running scenarios: a scenario's draws are its own (seeded children, not shared with what runs
beside it), closed loops take the fast path unless told otherwise, and a paired run's baseline is
the same requests with speculation off."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from alphagate.sim.cost import StepCostModel, build_cost_model
from alphagate.sim.run import BaselineRuns, run_paired, run_scenarios
from alphagate.sim.workload import ClosedLoop, OpenLoop
from alphagate.specs import DeploymentConfig, resolve_deployment
from alphagate.specs.workload import FixedLength
from tests.sim.conftest import scenario


def test_same_seed_same_output_and_each_scenarios_draws_are_its_own(cost_8b: StepCostModel) -> None:
    a = scenario(3, 0.7, ClosedLoop(users=4), 40, seed=1)
    b = scenario(3, 0.5, ClosedLoop(users=4), 40, seed=2)
    one = run_scenarios(cost_8b, [a, b], np.random.default_rng(9))
    again = run_scenarios(cost_8b, [a, b], np.random.default_rng(9))
    np.testing.assert_array_equal(one[0].finish_s, again[0].finish_s)
    np.testing.assert_array_equal(one[1].finish_s, again[1].finish_s)
    # the first scenario draws the same whether or not another runs after it
    alone = run_scenarios(cost_8b, [a], np.random.default_rng(9))[0]
    np.testing.assert_array_equal(alone.finish_s, one[0].finish_s)


def test_the_fast_path_and_the_engine_agree_when_nothing_is_random(cost_8b: StepCostModel) -> None:
    """One user, α = 1, fixed lengths: no draw changes anything, so both paths take the same
    steps (with several users the fast path hands requests out in another order)."""
    sc = scenario(2, 1.0, ClosedLoop(users=1), 12, output=FixedLength(value=40))
    fast = run_scenarios(cost_8b, [sc], np.random.default_rng(0))[0]
    engine = run_scenarios(cost_8b, [sc], np.random.default_rng(0), force_engine=True)[0]
    np.testing.assert_allclose(fast.finish_s, engine.finish_s, rtol=1e-12)
    np.testing.assert_allclose(fast.step_dt_s, engine.step_dt_s, rtol=1e-12)


@pytest.mark.parametrize(("k", "users", "slots"), [(0, 7, 3), (3, 7, 3), (3, 12, 10), (0, 5, 1)])
def test_with_more_users_than_slots_the_fast_path_queues_as_the_engine_does(
    k: int, users: int, slots: int
) -> None:
    """α = 1 (or no speculation) and lengths drawn up front: nothing is random, so the fast path's
    queue — each request into the first slot to free up once it reached the server — takes the
    engine's steps exactly, and the requests' waits count in their TTFT. (vLLM's default budget
    of 8,192 tokens prefills every prompt in its first step: the fast path does not contend for
    a smaller one.)"""
    cost = build_cost_model(resolve_deployment(DeploymentConfig(model="llama-3.1-8b")))
    sc = scenario(k, 1.0, ClosedLoop(users=users), 60, max_num_seqs=slots, seed=3)
    fast = run_scenarios(cost, [sc], np.random.default_rng(0))[0]
    engine = run_scenarios(cost, [sc], np.random.default_rng(0), force_engine=True)[0]
    assert int(fast.step_n_running.max()) == slots
    for name in ("arrival_s", "first_token_s", "finish_s", "step_dt_s"):
        np.testing.assert_allclose(getattr(fast, name), getattr(engine, name), rtol=1e-12)
    waited = fast.first_token_s - fast.arrival_s
    assert waited[users:].min() > fast.step_dt_s.min()  # every later request waited for a slot


def test_a_paired_runs_baseline_is_the_same_requests_without_speculation(
    cost_8b: StepCostModel,
) -> None:
    sc = scenario(3, 0.8, OpenLoop(rate=20.0), 60, seed=4)
    p = run_paired(cost_8b, sc, np.random.default_rng(5))
    assert p.baseline_trace.scenario.k == 0 and p.spec_trace.scenario.k == 3
    assert p.baseline_trace.scenario.requests is sc.requests
    np.testing.assert_array_equal(p.baseline_trace.arrival_s, p.spec_trace.arrival_s)
    assert p.baseline_trace.num_accepted_tokens == 0 and p.spec_trace.num_accepted_tokens > 0
    assert p.spec.output_tokens == p.baseline.output_tokens == int(sc.requests.output_len.sum())
    assert p.speedup.throughput_speedup > 1.0  # α 0.8 at a light load pays


def test_a_baseline_kept_between_paired_runs_changes_nothing(cost_8b: StepCostModel) -> None:
    """A K sweep and an α search share one baseline run on the closed-loop path: each paired
    run is the one made without it, to the bit, and the baseline ran once."""
    base = scenario(1, 0.5, ClosedLoop(users=8), 80, seed=4)
    kept = BaselineRuns()
    baselines = set()
    for k, alpha in [(1, 0.5), (3, 0.5), (3, 0.9), (2, 0.2)]:
        table = np.array([[alpha ** (j + 1) for j in range(k)]])
        sc = replace(base, k=k, unconditional=table)
        fresh = run_paired(cost_8b, sc, np.random.default_rng(k))
        reused = run_paired(cost_8b, sc, np.random.default_rng(k), baselines=kept)
        baselines.add(id(reused.baseline_trace))
        for name in ("finish_s", "step_dt_s"):
            np.testing.assert_array_equal(
                getattr(reused.spec_trace, name), getattr(fresh.spec_trace, name)
            )
            np.testing.assert_array_equal(
                getattr(reused.baseline_trace, name), getattr(fresh.baseline_trace, name)
            )
        assert reused.speedup == fresh.speedup
    assert len(baselines) == 1  # run once, for the first pair


def test_an_open_loop_baseline_is_never_kept(cost_8b: StepCostModel) -> None:
    """Off the closed-loop path the baseline's arrivals are drawn: it is run every time."""
    sc = scenario(3, 0.8, OpenLoop(rate=20.0), 40, seed=4)
    kept = BaselineRuns()
    a = run_paired(cost_8b, sc, np.random.default_rng(1), baselines=kept)
    b = run_paired(cost_8b, sc, np.random.default_rng(1), baselines=kept)
    assert a.baseline_trace is not b.baseline_trace
