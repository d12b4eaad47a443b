"""The step engine's options for counterfactuals and remedies: vLLM's batch-size schedule for K,
and prefills apart from the decodes."""

from __future__ import annotations

import dataclasses

import numpy as np

from alphagate.sim.closed_loop import fast_path_applies
from alphagate.sim.cost import StepCostModel
from alphagate.sim.engine import run_engine
from alphagate.sim.workload import ClosedLoop
from alphagate.specs.workload import FixedLength
from tests.sim.conftest import scenario


def test_k_follows_the_batch_size_schedule(cost_8b: StepCostModel) -> None:
    """K per step is the schedule's for the running requests (past its last range, the last
    range's), never above the scenario's K — as vLLM's scheduler picks it."""
    sc = dataclasses.replace(
        scenario(4, 0.7, ClosedLoop(users=6), 60), k_by_batch=[[1, 2, 4], [3, 4, 2], [5, 5, 1]]
    )
    assert not fast_path_applies(sc, cost_8b)
    tr = run_engine(cost_8b, sc, np.random.default_rng(0))
    n = tr.step_n_running
    want = np.where(n <= 2, 4, np.where(n <= 4, 2, 1))
    np.testing.assert_array_equal(tr.step_k, want)
    assert {1, 2, 4} <= set(tr.step_k.tolist())  # the ramp down at the end reaches every range
    assert (tr.chunk_tokens if tr.chunk_tokens.size else np.ones(1)).max() <= 5


def test_prefills_apart_cost_the_decodes_nothing(cost_8b: StepCostModel) -> None:
    """Apart, a prompt is prefilled whole in the step it is admitted to, and a step that
    decodes costs what its decodes alone cost; in the decode steps, prompts lengthen steps."""
    base = scenario(2, 0.7, ClosedLoop(users=8), 40, prompt=FixedLength(value=3000))
    apart = dataclasses.replace(base, prefill_apart=True)
    assert not fast_path_applies(apart, cost_8b)
    shared = run_engine(cost_8b, base, np.random.default_rng(1))
    alone = run_engine(cost_8b, apart, np.random.default_rng(1))
    # the budget is 512 tokens: shared, a 3000-token prompt takes six steps or more
    assert np.median(shared.first_token_s - shared.arrival_s) > 5 * np.median(
        alone.first_token_s - alone.arrival_s
    )
    decode = alone.step_n_decode > 0
    lone = cost_8b.step_seconds(k=2, n_decode=8, ctx_decode=8 * 3000)
    assert alone.step_dt_s[decode].max() < 1.2 * lone < shared.step_dt_s.max()


def test_a_step_of_no_drafts_on_a_launched_server_runs_the_drafters_first_forward(
    cost_8b: StepCostModel,
) -> None:
    """vLLM's dynamic speculative decoding at K = 0 still runs the drafter's first forward (it
    keeps the drafter's KV in step, ``vllm/v1/spec_decode/llm_base_proposer.py``): a level run
    at K = 0 on a server started at K = 3, and a schedule's K = 0 steps, cost more than the
    same steps without speculation (a closed loop without think time: the same steps whatever
    they cost)."""
    off = scenario(0, 0.7, ClosedLoop(users=8), 40)
    on = dataclasses.replace(off, launched=3)
    assert not fast_path_applies(on, cost_8b)
    plain = run_engine(cost_8b, off, np.random.default_rng(2))
    kept = run_engine(cost_8b, on, np.random.default_rng(2))
    np.testing.assert_array_equal(kept.step_tokens, plain.step_tokens)
    assert (kept.step_dt_s > plain.step_dt_s).all()
    # a schedule that drops to K = 0 above 4 running, against speculation disabled above 4
    # (traffic routed to a server without it): the same steps, the K = 0 ones dearer
    base = scenario(3, 0.7, ClosedLoop(users=8), 40)
    rng = np.random.default_rng
    sched = run_engine(
        cost_8b, dataclasses.replace(base, k_by_batch=[[1, 4, 3], [5, 8, 0]]), rng(2)
    )
    routed = run_engine(cost_8b, dataclasses.replace(base, disable_above_batch=4), rng(2))
    np.testing.assert_array_equal(sched.step_k, routed.step_k)
    np.testing.assert_array_equal(sched.step_tokens, routed.step_tokens)
    zero, drafting = sched.step_k == 0, sched.step_k > 0
    assert zero.any() and drafting.any()
    assert (sched.step_dt_s[zero] > routed.step_dt_s[zero]).all()
    np.testing.assert_array_equal(sched.step_dt_s[drafting], routed.step_dt_s[drafting])
