"""Fast closed-loop simulator: vectorized across users *and* steps.

With N users that each send their next request the moment the previous one finishes (think time
0) and N ≤ max_num_seqs, every user always holds one running sequence. In *step space* — counting
engine steps rather than seconds — each user's timeline then depends only on its own requests and
acceptance draws: a request admitted at step s0 prefills for ⌈prompt / max_num_batched_tokens⌉
steps, emits its first token at the end of its last prefill step, then emits 1..K+1 tokens per
decode step until its output is complete, and the user's next request is admitted the step after.

So the simulator builds every user's timeline round by round (round r = every user's r-th request;
requests are dealt to users round-robin), as array code over ``[users, steps]``, and only then
aggregates the batch composition of each step (decoding sequences, Σ context, prefill tokens) and
prices all steps with one vectorized call of the step-time model. Wall-clock times follow from a
cumulative sum. Results are statistically the same as :func:`alphagate.sim.engine.run_engine`, which
steps the batch one step at a time and also covers open loop, think time, queueing, prefill-budget
contention and batch-size policies; ``tests/statistical`` checks the two against each other.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from alphagate.sim.cost import StepCostModel
from alphagate.sim.engine import RunTrace, Scenario
from alphagate.sim.kernel import (
    acceptance_histogram,
    accepted_drafts,
    accepted_per_position,
    prefill_chunks,
)
from alphagate.sim.workload import ClosedLoop
from alphagate.theory.acceptance import expected_tokens_per_pass

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

__all__ = ["fast_path_applies", "run_closed_loop"]


def fast_path_applies(sc: Scenario) -> bool:
    """True when the step-space simulator is exact in distribution for this scenario."""
    arr = sc.arrivals
    return (
        isinstance(arr, ClosedLoop)
        and arr.think_time_s == 0.0
        and arr.users <= sc.max_num_seqs
        and (sc.disable_above_batch is None or sc.disable_above_batch >= arr.users)
    )


def _decode_plan(
    rng: np.random.Generator, need: IntArray, cls: IntArray, thr_table: FloatArray, k: int
) -> tuple[IntArray, IntArray, IntArray, IntArray, IntArray]:
    """Speculative decode steps of every request, flattened.

    Returns (request, local step, accepted drafts, tokens emitted, tokens before this step).
    Draws are laid out in one flat array with a segment per request sized for its ``need`` tokens
    (plus margin); one global cumulative sum and one ``searchsorted`` find where each request's
    output is complete. Requests whose segment fell short are redrawn with a longer segment.
    """
    e_min = float(expected_tokens_per_pass(float(thr_table[:, 0].min()), k))
    todo = np.nonzero(need > 0)[0]
    parts: list[tuple[IntArray, ...]] = []
    margin = 1.25
    while todo.size:
        nd = need[todo]
        seg_len = np.ceil(nd / e_min * margin).astype(np.int64) + 4
        starts = np.cumsum(seg_len) - seg_len
        seg = np.repeat(np.arange(todo.size), seg_len)
        acc = accepted_drafts(rng.random(seg.size), thr_table, cls[todo][seg])
        g = np.cumsum(acc + 1)
        g_start = np.where(starts > 0, g[starts - 1], 0)
        pos = np.searchsorted(g, g_start + nd, side="left")
        ok = pos < starts + seg_len
        n_dec = pos - starts + 1
        local = np.arange(seg.size) - starts[seg]
        live = ok[seg] & (local < n_dec[seg])
        seg_l, local_l, acc_l = seg[live], local[live], acc[live]
        before = g[live] - (acc_l + 1) - g_start[seg_l]
        emit = np.minimum(acc_l + 1, nd[seg_l] - before)
        parts.append((todo[seg_l], local_l, acc_l, emit, before))
        todo = todo[~ok]
        margin *= 2.0
    if not parts:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty, empty, empty
    req, local, acc, emit, before = (np.concatenate(x) for x in zip(*parts, strict=True))
    return req, local, acc, emit, before


def run_closed_loop(
    cost: StepCostModel, sc: Scenario, rng: np.random.Generator, *, record_chunks: bool = False
) -> RunTrace:
    """Simulate one closed-loop scenario (see :func:`fast_path_applies`) in step space."""
    if not fast_path_applies(sc):
        raise ValueError(
            "scenario needs the step-by-step engine (open loop, think time, queueing or policy)"
        )
    assert isinstance(sc.arrivals, ClosedLoop)
    users = sc.arrivals.users
    req = sc.requests
    n = req.n
    k = sc.k
    budget = cost.max_num_batched_tokens
    need = np.maximum(req.output_len - 1, 0)  # tokens after the first one

    # 1. decode steps of every request, in step space (independent of timing)
    plan = None
    if k > 0:
        thr_table = np.asarray(sc.unconditional, dtype=np.float64)[:, :k]
        plan = _decode_plan(rng, need, req.class_idx, thr_table, k)
        n_dec = np.bincount(plan[0], minlength=n)
    else:
        n_dec = need

    # 2. each user's timeline: requests dealt round-robin, back to back
    p_req, p_chunk, p_ctx, p_tok = prefill_chunks(req.prompt_len, budget)
    n_pre = np.bincount(p_req, minlength=n)  # prefill steps per request
    duration = n_pre + n_dec  # steps from admission to finish, inclusive
    rounds = -(-n // users)
    grid = np.zeros(rounds * users, dtype=np.int64)
    grid[:n] = duration
    grid2 = grid.reshape(rounds, users)
    start = (np.cumsum(grid2, axis=0) - grid2).ravel()[:n]
    first = start + n_pre - 1
    finish = first + n_dec
    m = int(finish.max()) + 1
    width = k + 2

    # 3. batch composition per step
    p_step = start[p_req] + p_chunk
    pf_tok = np.bincount(p_step, weights=p_tok, minlength=m)
    pf_ctx = np.bincount(p_step, weights=p_ctx, minlength=m)
    pf_pairs = np.bincount(p_step, weights=p_tok * (p_ctx + 0.5 * p_tok), minlength=m)
    ctx_dec: FloatArray
    chunks: tuple[IntArray, IntArray, IntArray] | None = None
    d_acc: IntArray | None = None
    if plan is not None:
        d_req, d_local, d_acc, d_emit, d_before = plan
        d_step = first[d_req] + 1 + d_local
        dec_per_step = np.bincount(d_step, minlength=m)
        ctx_dec = np.asarray(
            np.bincount(d_step, weights=req.prompt_len[d_req] + d_before, minlength=m),
            dtype=np.float64,
        )
        hist = np.bincount(d_step * width + d_emit, minlength=m * width).reshape(m, width)
        dec_tokens = np.bincount(d_step, weights=d_emit, minlength=m)
        chunks = (d_req, d_step, d_emit)
    else:
        # baseline: one token per decode step, context = prompt + (step − first − 1); sums of
        # piecewise-linear terms per step come from difference arrays
        steps = np.arange(m, dtype=np.float64)
        on = np.bincount(first + 1, minlength=m + 1) - np.bincount(finish + 1, minlength=m + 1)
        dec_per_step = np.cumsum(on)[:m]
        offset = (req.prompt_len - first - 1).astype(np.float64)
        off_diff = np.bincount(first + 1, weights=offset, minlength=m + 1) - np.bincount(
            finish + 1, weights=offset, minlength=m + 1
        )
        ctx_dec = np.cumsum(off_diff)[:m] + steps * dec_per_step
        hist = np.zeros((m, width), dtype=np.int64)
        hist[:, 1] = dec_per_step
        dec_tokens = dec_per_step.astype(np.float64)
    running = np.cumsum(
        np.bincount(start, minlength=m + 1) - np.bincount(finish + 1, minlength=m + 1)
    )[:m]

    # 4. price every step at once, then wall-clock times
    dt = cost.step_time(k, dec_per_step, ctx_dec, pf_tok, pf_ctx, pf_pairs, running)
    end = np.cumsum(dt)
    tokens = (dec_tokens + np.bincount(first, minlength=m)).astype(np.int64)
    if k > 0 and d_acc is not None:
        per_pos = accepted_per_position(acceptance_histogram(d_acc, k))
        drafts, accepted = int(d_acc.size), int(d_acc.sum())
    else:
        per_pos = np.zeros(0, dtype=np.int64)
        drafts = accepted = 0
    chunk_req = chunk_step = chunk_tok = np.zeros(0, dtype=np.int64)
    if record_chunks:
        if chunks is None:  # baseline: one chunk of one token per decode step
            b_req = np.repeat(np.arange(n), n_dec)
            b_local = np.arange(b_req.size) - np.repeat(np.cumsum(n_dec) - n_dec, n_dec)
            chunks = (b_req, first[b_req] + 1 + b_local, np.ones(b_req.size, dtype=np.int64))
        chunk_req, chunk_step, chunk_tok = chunks
    return RunTrace(
        scenario=sc,
        arrival_s=np.where(start > 0, end[np.maximum(start - 1, 0)], 0.0),
        first_token_s=end[first],
        finish_s=end[finish],
        n_chunks=n_dec + 1,
        step_dt_s=dt,
        step_end_s=end,
        step_k=np.full(m, k, dtype=np.int64),
        step_n_decode=dec_per_step.astype(np.int64),
        step_n_running=running,
        step_tokens=tokens,
        step_chunk_hist=hist,
        num_drafts=drafts,
        num_draft_tokens=drafts * k,
        num_accepted_tokens=accepted,
        accepted_per_pos=per_pos,
        chunk_request=chunk_req,
        chunk_step=chunk_step,
        chunk_tokens=chunk_tok,
    )
