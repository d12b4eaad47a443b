"""Simulator engines: determinism, conservation, exact agreement on deterministic cases, policies."""

from __future__ import annotations

import numpy as np
import pytest

from alphagate.sim.closed_loop import fast_path_applies, run_closed_loop
from alphagate.sim.cost import StepCostModel
from alphagate.sim.engine import RunTrace, Scenario, run_engine
from alphagate.sim.results import summarize
from alphagate.sim.run import run_paired, run_scenarios
from alphagate.sim.workload import ClosedLoop, OpenLoop
from alphagate.specs.workload import FixedLength
from tests.sim.conftest import scenario
from tests.statistical.reference_sim import RefResult, reference_simulate


def _engine(cost: StepCostModel, sc, seed: int = 1, **kw) -> RunTrace:  # type: ignore[no-untyped-def]
    return run_engine(cost, sc, np.random.default_rng(seed), **kw)


@pytest.mark.parametrize("fast", [False, True])
def test_same_seed_same_output(cost_8b: StepCostModel, fast: bool) -> None:
    sc = scenario(3, 0.7, ClosedLoop(users=8), 60)
    run = (
        (lambda s: run_closed_loop(cost_8b, sc, np.random.default_rng(s)))
        if fast
        else (lambda s: _engine(cost_8b, sc, s))
    )
    a, b, c = run(5), run(5), run(6)
    np.testing.assert_array_equal(a.finish_s, b.finish_s)
    np.testing.assert_array_equal(a.step_chunk_hist, b.step_chunk_hist)
    assert a.num_accepted_tokens == b.num_accepted_tokens
    assert not np.array_equal(a.finish_s, c.finish_s)


@pytest.mark.parametrize("fast", [False, True])
def test_tokens_conserved_and_chunks_recorded(cost_8b: StepCostModel, fast: bool) -> None:
    sc = scenario(4, [0.9, 0.7, 0.5, 0.3], ClosedLoop(users=6), 50)
    tr = (
        run_closed_loop(cost_8b, sc, np.random.default_rng(2), record_chunks=True)
        if fast
        else _engine(cost_8b, sc, 2, record_chunks=True)
    )
    out = sc.requests.output_len
    assert np.isfinite(tr.finish_s).all()
    assert (tr.first_token_s >= tr.arrival_s).all() and (tr.finish_s >= tr.first_token_s).all()
    # every output token is the first token or part of exactly one decode chunk
    per_req = np.bincount(tr.chunk_request, weights=tr.chunk_tokens, minlength=out.size)
    np.testing.assert_array_equal(per_req + 1, out)
    assert tr.step_tokens.sum() == out.sum()
    assert (tr.chunk_tokens >= 1).all() and (tr.chunk_tokens <= 5).all()
    np.testing.assert_array_equal(
        tr.n_chunks, np.bincount(tr.chunk_request, minlength=out.size) + 1
    )
    # the per-step histogram is the chunk records, aggregated
    hist = np.zeros_like(tr.step_chunk_hist)
    np.add.at(hist, (tr.chunk_step, tr.chunk_tokens), 1)
    np.testing.assert_array_equal(hist, tr.step_chunk_hist)
    # closed loop: never more sequences than users
    assert tr.step_n_running.max() <= 6


def _reference(cost: StepCostModel, sc: Scenario, alpha: float) -> RefResult:
    """The per-token reference loop over ``sc``'s requests at α everywhere: a closed loop of the
    scenario's users, or its open-loop arrival times."""
    r = sc.requests
    users = sc.arrivals.users if isinstance(sc.arrivals, ClosedLoop) else None
    return reference_simulate(
        cost, r.prompt_len.tolist(), r.output_len.tolist(), [[alpha] * max(sc.k, 1)] * r.n, sc.k,
        users=users, arrivals=None if users else r.arrival_s.tolist(),
        max_num_seqs=sc.max_num_seqs, seed=0,
    )  # fmt: skip


def test_engine_equals_reference_when_deterministic(cost_8b: StepCostModel) -> None:
    """K = 0, or α = 1, makes the run deterministic: the engine must match the per-token loop exactly."""
    for k, alpha in ((0, 0.5), (3, 1.0)):
        sc = scenario(k, alpha, ClosedLoop(users=5), 40, prompt=FixedLength(value=700))
        tr = _engine(cost_8b, sc)
        ref = _reference(cost_8b, sc, alpha)
        np.testing.assert_allclose(tr.finish_s, ref.finish, rtol=1e-12)
        np.testing.assert_allclose(tr.first_token_s, ref.first_token, rtol=1e-12)
        np.testing.assert_allclose(tr.step_dt_s, ref.step_times, rtol=1e-12)
        assert tr.num_accepted_tokens == ref.accepted


def test_open_loop_engine_equals_reference_when_deterministic(cost_8b: StepCostModel) -> None:
    sc = scenario(2, 1.0, OpenLoop(rate=40.0), 60, prompt=FixedLength(value=300), max_num_seqs=4)
    tr = _engine(cost_8b, sc)
    ref = _reference(cost_8b, sc, 1.0)
    np.testing.assert_allclose(tr.finish_s, ref.finish, rtol=1e-12)
    assert tr.step_n_running.max() == 4  # queueing behind max_num_seqs happened


def test_fast_path_equals_engine_for_one_user(cost_8b: StepCostModel) -> None:
    """With one user both paths see the same requests in the same order (K = 0: identical)."""
    sc = scenario(0, 0.5, ClosedLoop(users=1), 30, prompt=FixedLength(value=1100))
    a = _engine(cost_8b, sc)
    b = run_closed_loop(cost_8b, sc, np.random.default_rng(1))
    np.testing.assert_allclose(a.finish_s, b.finish_s, rtol=1e-12)
    np.testing.assert_allclose(a.step_dt_s, b.step_dt_s, rtol=1e-12)


def test_prefill_budget_is_shared_fcfs(cost_8b: StepCostModel) -> None:
    # 8 users × 400-token prompts with a 512-token budget: prefills are spread over several steps
    sc = scenario(
        0, 0.5, ClosedLoop(users=8), 8, prompt=FixedLength(value=400), output=FixedLength(value=4)
    )
    tr = _engine(cost_8b, sc)
    first = tr.first_token_s
    assert np.all(np.diff(first) >= 0)  # FCFS: earlier requests get their first token no later
    assert len(np.unique(first)) >= 6


def test_disable_above_batch_policy(cost_8b: StepCostModel) -> None:
    sc = scenario(3, 0.8, ClosedLoop(users=16), 64, disable_above_batch=8)
    assert not fast_path_applies(sc)
    tr = _engine(cost_8b, sc)
    assert ((tr.step_k == 0) == (tr.step_n_running > 8)).all()
    assert (tr.step_k == 3).any() and (tr.step_k == 0).any()


def test_open_loop_idles_until_arrivals(cost_8b: StepCostModel) -> None:
    sc = scenario(2, 0.6, OpenLoop(rate=0.5), 12)
    tr = _engine(cost_8b, sc)
    s = summarize(tr)
    assert s.completed == 12
    assert (tr.first_token_s > tr.arrival_s).all()
    assert tr.step_end_s[-1] > tr.arrival_s[-1]  # the clock jumped over idle gaps


def test_run_scenarios_dispatches_and_pairs(cost_8b: StepCostModel) -> None:
    sc = scenario(3, 0.7, ClosedLoop(users=8), 80)
    p = run_paired(cost_8b, sc, np.random.default_rng(0))
    assert p.baseline.k == 0 and p.baseline.num_drafts == 0
    assert (p.spec.mean_tokens_per_chunk or 0) > 1.5
    assert (p.speedup.throughput_speedup or 0) > 1.0
    forced = run_scenarios(cost_8b, [sc], np.random.default_rng(0), force_engine=True)[0]
    assert np.isfinite(forced.finish_s).all()


def test_the_token_budget_caps_the_decoding_batch_at_k_plus_one_tokens_each(
    cost_8b: StepCostModel,
) -> None:
    """vLLM's scheduler gives each running sequence K + 1 tokens of ``max_num_batched_tokens``
    (plus one input slot for a draft model) and leaves the rest waiting once it is spent: with a
    budget of 512, 256 users decode 256 at a time without speculation, 128 at K = 3, and 102 at
    K = 3 with a draft model's extra slot. The closed form sees the same cap."""
    from dataclasses import replace

    from alphagate.sim.kernel import decode_capacity
    from alphagate.sim.predict import model_speedup, single_class

    assert [decode_capacity(512, k) for k in (0, 1, 3)] == [512, 256, 128]
    assert decode_capacity(512, 3, draft_slots=1) == 102 and decode_capacity(512, 0, 1) == 512
    tight = cost_8b  # a budget of 512
    roomy_cost = replace(cost_8b, max_num_batched_tokens=8192)
    sc = scenario(3, 0.7, ClosedLoop(users=256), 1024, output=FixedLength(value=64))
    assert fast_path_applies(sc) and not fast_path_applies(sc, tight)
    run = run_paired(tight, sc, np.random.default_rng(3))
    on, off = run.spec_trace, run.baseline_trace
    # (the 64-token prompts of the requests that replace finished ones take the rest)
    assert on.step_n_decode.max() <= 128 < off.step_n_decode.max()
    slots = replace(tight, draft_slots=1)
    assert run_scenarios(slots, [sc], np.random.default_rng(3))[0].step_n_decode.max() <= 102
    # the cap costs throughput: the same run with room for every sequence gains more
    roomy = run_paired(roomy_cost, sc, np.random.default_rng(3))
    s_tight, s_roomy = run.speedup.throughput_speedup, roomy.speedup.throughput_speedup
    assert s_tight is not None and s_roomy is not None and s_tight < s_roomy
    from alphagate.specs.workload import WorkloadConfig

    wl = WorkloadConfig(
        prompt_len=FixedLength(value=64), output_len=FixedLength(value=64),
        classes=single_class(0.7),
    )  # fmt: skip
    m_tight = model_speedup(tight, single_class(0.7), 3, 256.0, wl)
    m_roomy = model_speedup(roomy_cost, single_class(0.7), 3, 256.0, wl)
    assert m_tight < m_roomy
    assert m_tight / m_roomy == pytest.approx(s_tight / s_roomy, rel=0.05)
