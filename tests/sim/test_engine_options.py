"""The step engine's options for counterfactuals and remedies: vLLM's batch-size schedule for K,
and prefills apart from the decodes; and the server's front-end, which takes requests sent
together one after another."""

from __future__ import annotations

import dataclasses

import numpy as np

from alphagate.sim.closed_loop import fast_path_applies
from alphagate.sim.cost import StepCostModel
from alphagate.sim.engine import run_engine
from alphagate.sim.workload import ClosedLoop, OpenLoop, RequestSet
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


def test_requests_sent_together_leave_the_front_end_together(cost_8b: StepCostModel) -> None:
    """A closed loop's first requests, sent together, reach the engine after the front-end has
    taken each of them (n × its time per request) and the delay before it: every TTFT is that
    much longer than without a front-end, the steps the same."""
    users, fe, delay = 8, 0.01, 0.004
    base = scenario(0, 0.0, ClosedLoop(users=users), users, output=FixedLength(value=16))
    with_fe = dataclasses.replace(base, frontend_s=fe, request_delay_s=delay)
    assert not fast_path_applies(with_fe, cost_8b)
    plain = run_engine(cost_8b, base, np.random.default_rng(0))
    got = run_engine(cost_8b, with_fe, np.random.default_rng(0))
    np.testing.assert_allclose(
        got.first_token_s - got.arrival_s,
        plain.first_token_s - plain.arrival_s + delay + users * fe,
    )
    np.testing.assert_allclose(got.step_dt_s, plain.step_dt_s)


def test_a_request_that_reaches_a_busy_front_end_waits_for_its_next_batch(
    cost_8b: StepCostModel,
) -> None:
    """Sent at 0, 5 and 6 ms to a front-end of 10 ms per request: the first is through at 10 ms,
    the other two wait and go through together (20 ms more) — the same first tokens as the
    requests sent at 10, 30 and 30 ms to a server without one."""
    base = scenario(0, 0.0, OpenLoop(rate=1.0), 3, output=FixedLength(value=1))
    sent = RequestSet(base.requests.prompt_len, base.requests.output_len,
                      base.requests.class_idx, np.array([0.0, 0.005, 0.006]))  # fmt: skip
    got = run_engine(
        cost_8b, dataclasses.replace(base, requests=sent, frontend_s=0.01),
        np.random.default_rng(0),
    )  # fmt: skip
    reach = RequestSet(sent.prompt_len, sent.output_len, sent.class_idx,
                       np.array([0.01, 0.03, 0.03]))  # fmt: skip
    want = run_engine(cost_8b, dataclasses.replace(base, requests=reach), np.random.default_rng(0))
    np.testing.assert_allclose(got.first_token_s, want.first_token_s)
    np.testing.assert_allclose(got.arrival_s, sent.arrival_s)  # TTFT counts from the send
    assert want.first_token_s[0] < 0.03  # the first was done before the other two reached it


def test_requests_spaced_wider_than_the_front_end_do_not_queue(cost_8b: StepCostModel) -> None:
    """Sent 50 ms apart to a front-end of 10 ms per request: each waits its own 10 ms only."""
    base = scenario(0, 0.0, OpenLoop(rate=1.0), 4, output=FixedLength(value=1))
    sent = np.arange(4) * 0.05
    reqs = RequestSet(base.requests.prompt_len, base.requests.output_len,
                      base.requests.class_idx, sent)  # fmt: skip
    got = run_engine(
        cost_8b, dataclasses.replace(base, requests=reqs, frontend_s=0.01),
        np.random.default_rng(0),
    )  # fmt: skip
    plain = run_engine(cost_8b, dataclasses.replace(base, requests=reqs), np.random.default_rng(0))
    np.testing.assert_allclose(got.first_token_s - plain.first_token_s, 0.01)
