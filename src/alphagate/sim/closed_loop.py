"""Fast closed-loop simulator: vectorized across users *and* steps.

With N users that each send their next request the moment the previous one finishes (think time
0) and N ≤ max_num_seqs, every user always holds one running sequence. In *step space* — counting
engine steps rather than seconds — each user's timeline then depends only on its own requests and
acceptance draws: a request admitted at step s0 prefills for ⌈prompt / max_num_batched_tokens⌉
steps, emits its first token at the end of its last prefill step, then emits 1..K+1 tokens per
decode step until its output is complete, and the user's next request is admitted the step after.
With more users than slots the requests queue: each is admitted into the first slot to free up,
once it has reached the server (:func:`_queued_timeline`), and its TTFT counts the wait.

So the simulator lays out every request's steps (each request goes to the user that frees up
first, as a closed-loop client hands out prompts), and only then
aggregates the batch composition of each step (decoding sequences, Σ context, prefill tokens) and
prices all steps with one vectorized call of the step-time model. Wall-clock times follow from a
cumulative sum. Results are statistically the same as :func:`alphagate.sim.engine.run_engine`, which
steps the batch one step at a time and also covers open loop, think time, queueing, prefill-budget
contention and batch-size policies; ``tests/statistical`` checks the two against each other.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from alphagate.sim.cost import StepComposition, StepCostModel
from alphagate.sim.engine import RunTrace, Scenario
from alphagate.sim.kernel import (
    acceptance_histogram,
    accepted_drafts,
    accepted_per_position,
    decode_capacity,
    prefill_chunks,
)
from alphagate.sim.workload import ClosedLoop, RequestSet
from alphagate.theory.acceptance import expected_tokens_per_pass

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

__all__ = ["StepPlan", "fast_path_applies", "plan_steps", "run_closed_loop"]


def fast_path_applies(sc: Scenario, cost: StepCostModel | None = None) -> bool:
    """True when the step-space simulator is exact in distribution for this scenario (with
    ``cost``: also when every running sequence fits one step's token budget at its K, so that
    no decode waits for the budget — :func:`alphagate.sim.kernel.decode_capacity`)."""
    arr = sc.arrivals
    if not isinstance(arr, ClosedLoop):
        return False
    batch = min(arr.users, sc.max_num_seqs)
    return (
        sc.draft_steps is None  # drafts of variable length: the step engine
        and arr.think_time_s == 0.0
        and (sc.disable_above_batch is None or sc.disable_above_batch >= batch)
        and sc.k_by_batch is None
        and sc.launched == 0
        and not sc.prefill_apart
        and sc.frontend_s == 0.0
        and sc.request_delay_s == 0.0
        and (
            cost is None
            or batch <= decode_capacity(cost.max_num_batched_tokens, sc.k, cost.draft_slots)
        )
    )


class _DecodeSteps(NamedTuple):
    """Every request's speculative decode steps, flattened (one element per step)."""

    request: IntArray
    local_step: IntArray  # the step's index among its request's decode steps
    accepted: IntArray  # accepted drafts
    emitted: IntArray  # tokens emitted
    before: IntArray  # the request's tokens before this step


def _decode_plan(
    rng: np.random.Generator, need: IntArray, cls: IntArray, thr_table: FloatArray, k: int
) -> _DecodeSteps:
    """Speculative decode steps of every request, flattened.

    Draws are laid out in one flat array with a segment per request sized for its ``need``
    tokens (plus margin); one global cumulative sum and one ``searchsorted`` find where each
    request's output is complete. Requests whose segment fell short are redrawn with a longer
    segment.
    """
    e_min = float(expected_tokens_per_pass(float(thr_table[:, 0].min()), k))
    todo = np.nonzero(need > 0)[0]
    parts: list[tuple[IntArray, ...]] = []
    margin = 1.25
    while todo.size:
        need_todo = need[todo]
        seg_len = np.ceil(need_todo / e_min * margin).astype(np.int64) + 4
        starts = np.cumsum(seg_len) - seg_len
        seg = np.repeat(np.arange(todo.size), seg_len)
        acc = accepted_drafts(rng.random(seg.size), thr_table, cls[todo][seg])
        g = np.cumsum(acc + 1)
        g_start = np.where(starts > 0, g[starts - 1], 0)
        pos = np.searchsorted(g, g_start + need_todo, side="left")
        ok = pos < starts + seg_len
        n_dec = pos - starts + 1
        local = np.arange(seg.size) - starts[seg]
        live = ok[seg] & (local < n_dec[seg])
        seg_l, local_l, acc_l = seg[live], local[live], acc[live]
        before = g[live] - (acc_l + 1) - g_start[seg_l]
        emit = np.minimum(acc_l + 1, need_todo[seg_l] - before)
        parts.append((todo[seg_l], local_l, acc_l, emit, before))
        todo = todo[~ok]
        margin *= 2.0
    if not parts:
        return _DecodeSteps(*(np.zeros(0, dtype=np.int64),) * 5)
    return _DecodeSteps(*(np.concatenate(x) for x in zip(*parts, strict=True)))


@dataclass(frozen=True)
class _Timeline:
    """Every request's place in step space: admitted at ``start``, first token at ``first``;
    ``sent``: the step during which it reached the server (the first ones: step 0)."""

    start: IntArray
    first: IntArray
    finish: IntArray
    n_dec: IntArray
    steps: int
    sent: IntArray

    @classmethod
    def of(cls, start: IntArray, sent: IntArray, n_pre: IntArray, n_dec: IntArray) -> _Timeline:
        first = start + n_pre - 1
        finish = first + n_dec
        return cls(start, first, finish, n_dec, int(finish.max()) + 1, sent)


@dataclass(frozen=True)
class _Batches:
    """Per-step batch composition, shape ``[steps]`` (hist: ``[steps, K + 2]``)."""

    n_decode: IntArray
    ctx_decode: FloatArray
    decode_tokens: FloatArray
    hist: IntArray
    chunks: tuple[IntArray, IntArray, IntArray] | None


def _timeline(req: RequestSet, users: int, n_pre: IntArray, n_dec: IntArray) -> _Timeline:
    """Each request, in order, goes to the user that frees up first (ties: the lower user).

    That is how a closed-loop client hands out its prompts (``vllm bench serve
    --max-concurrency``: the next prompt goes to whichever slot frees first), so every user stays
    busy until the requests run out and the run drains for about one request, not for the spread
    of the users' totals. A request sent when the previous one's last token arrives reaches the
    server while the next step runs, so (with other users keeping the engine busy) it is admitted
    one step later, as the step engine does. Durations in step space are known per request.
    """
    gap = 1 if users > 1 else 0
    # the users' free times as sorted keys f · U + u (f: the step the user can start its next
    # request), unique, so that ties go to the lower user; a request adds its key + step[i]
    step = (n_pre + n_dec + gap).astype(np.int64) * users  # steps to the next admission, × U
    start = np.empty(req.n, dtype=np.int64)
    free = np.arange(users, dtype=np.int64)
    i = 0
    while i < req.n:  # in waves: the next requests take the lowest keys in order, as a heap would,
        m = min(users, req.n - i)  # until a key one of them added is lower than the next one
        h = free[:m]
        added = h + step[i : i + m]
        lower = np.nonzero(h[1:] > np.minimum.accumulate(added)[:-1])[0]
        v = int(lower[0]) + 1 if lower.size else m
        start[i : i + v] = h[:v]
        free = np.sort(np.concatenate((free[v:], added[:v])))
        i += v
    start_a = start // users
    return _Timeline.of(start_a, np.where(start_a > 0, start_a - gap, 0), n_pre, n_dec)


def _queued_timeline(
    req: RequestSet, users: int, slots: int, n_pre: IntArray, n_dec: IntArray
) -> _Timeline:
    """More users than slots: the first ``users`` requests reach the server at step 0, and each
    later one the step after the request it follows finishes (its user's previous one: the
    completions in order). A request is admitted, in order, into the first slot to free up (the
    step after its occupant finishes) once it is ready — it reached the server before the step
    began, as the step engine admits it; while requests wait, the engine never idles.

    One heap operation per request: each admission depends on the completions before it.
    """
    dur = (n_pre + n_dec).astype(np.int64)
    start = np.empty(req.n, dtype=np.int64)
    sent = np.zeros(req.n, dtype=np.int64)
    free = [0] * slots  # the step from which each slot can take a request
    done: list[int] = []  # finish steps of the requests whose users have not sent again
    for j in range(req.n):
        ready = 0
        if j >= users:
            sent[j] = heapq.heappop(done) + 1
            ready = int(sent[j]) + 1
        start[j] = max(heapq.heappop(free), ready)
        finish = int(start[j] + dur[j] - 1)
        heapq.heappush(free, finish + 1)
        heapq.heappush(done, finish)
    return _Timeline.of(start, sent, n_pre, n_dec)


def _speculative_batches(req: RequestSet, t: _Timeline, plan: _DecodeSteps, width: int) -> _Batches:
    d_req, d_local, _, d_emit, d_before = plan
    m = t.steps
    d_step = t.first[d_req] + 1 + d_local
    ctx = np.bincount(d_step, weights=req.prompt_len[d_req] + d_before, minlength=m)
    return _Batches(
        n_decode=np.bincount(d_step, minlength=m),
        ctx_decode=np.asarray(ctx, dtype=np.float64),
        decode_tokens=np.asarray(np.bincount(d_step, weights=d_emit, minlength=m), np.float64),
        hist=np.bincount(d_step * width + d_emit, minlength=m * width).reshape(m, width),
        chunks=(d_req, d_step, d_emit),
    )


def _plain_batches(req: RequestSet, t: _Timeline, width: int) -> _Batches:
    """One token per decode step; context = prompt + (step − first − 1). Per-step sums of
    piecewise-linear terms come from difference arrays."""
    m = t.steps
    on = np.bincount(t.first + 1, minlength=m + 1) - np.bincount(t.finish + 1, minlength=m + 1)
    n_decode = np.cumsum(on)[:m]
    offset = (req.prompt_len - t.first - 1).astype(np.float64)
    off_diff = np.bincount(t.first + 1, weights=offset, minlength=m + 1) - np.bincount(
        t.finish + 1, weights=offset, minlength=m + 1
    )
    hist = np.zeros((m, width), dtype=np.int64)
    hist[:, 1] = n_decode
    return _Batches(
        n_decode=n_decode,
        ctx_decode=np.cumsum(off_diff)[:m] + np.arange(m, dtype=np.float64) * n_decode,
        decode_tokens=n_decode.astype(np.float64),
        hist=hist,
        chunks=None,
    )


def _plain_chunks(t: _Timeline) -> tuple[IntArray, IntArray, IntArray]:
    """Baseline chunk records: one chunk of one token per decode step."""
    n_dec = t.n_dec
    b_req = np.repeat(np.arange(n_dec.size), n_dec)
    b_local = np.arange(b_req.size) - np.repeat(np.cumsum(n_dec) - n_dec, n_dec)
    return b_req, t.first[b_req] + 1 + b_local, np.ones(b_req.size, dtype=np.int64)


@dataclass(frozen=True)
class StepPlan:
    """A closed-loop scenario laid out in step space, before any step is priced: the batch
    composition of every step (the arguments of :meth:`StepCostModel.step_time`, shape
    ``[steps]``), each request's place, and the acceptance draws."""

    k: int
    n_decode: IntArray
    ctx_decode: FloatArray
    prefill_tokens: FloatArray
    prefill_ctx: FloatArray
    prefill_pairs: FloatArray
    running: IntArray
    timeline: _Timeline
    batches: _Batches
    accepted: IntArray  # accepted drafts of every speculative decode step

    @property
    def composition(self) -> StepComposition:
        """The step-time model's arguments for every step."""
        return StepComposition(
            k=self.k,
            n_decode=self.n_decode,
            ctx_decode=self.ctx_decode,
            prefill_tokens=self.prefill_tokens,
            prefill_ctx=self.prefill_ctx,
            prefill_pairs=self.prefill_pairs,
            n_running=self.running,
        )


def plan_steps(sc: Scenario, max_num_batched_tokens: int, rng: np.random.Generator) -> StepPlan:
    """Lay a closed-loop scenario (see :func:`fast_path_applies`) out in step space."""
    if not fast_path_applies(sc):
        raise ValueError(
            "scenario needs the step-by-step engine (open loop, think time, queueing or policy)"
        )
    assert isinstance(sc.arrivals, ClosedLoop)
    req, k = sc.requests, sc.k
    width = k + 2
    need = np.maximum(req.output_len - 1, 0)  # tokens after the first one
    # 1. decode steps of every request, in step space (independent of timing)
    plan = None
    if k > 0:
        thr = np.asarray(sc.unconditional, dtype=np.float64)[:, :k]
        plan = _decode_plan(rng, need, req.class_idx, thr, k)
    n_dec = np.bincount(plan.request, minlength=req.n) if plan is not None else need
    # 2. each user's timeline, then the batch composition of every step
    p_req, p_chunk, p_ctx, p_tok = prefill_chunks(req.prompt_len, max_num_batched_tokens)
    n_pre = np.bincount(p_req, minlength=req.n)
    users = sc.arrivals.users
    t = (
        _timeline(req, users, n_pre, n_dec)
        if users <= sc.max_num_seqs
        else _queued_timeline(req, users, sc.max_num_seqs, n_pre, n_dec)
    )
    m = t.steps
    b = (
        _speculative_batches(req, t, plan, width)
        if plan is not None
        else _plain_batches(req, t, width)
    )
    p_step = t.start[p_req] + p_chunk
    running = np.cumsum(
        np.bincount(t.start, minlength=m + 1) - np.bincount(t.finish + 1, minlength=m + 1)
    )[:m]
    return StepPlan(
        k=k,
        n_decode=b.n_decode,
        ctx_decode=b.ctx_decode,
        prefill_tokens=np.bincount(p_step, weights=p_tok, minlength=m).astype(np.float64),
        prefill_ctx=np.bincount(p_step, weights=p_ctx, minlength=m).astype(np.float64),
        prefill_pairs=np.bincount(
            p_step, weights=p_tok * (p_ctx + 0.5 * p_tok), minlength=m
        ).astype(np.float64),
        running=running,
        timeline=t,
        batches=b,
        accepted=plan.accepted if plan is not None else np.zeros(0, dtype=np.int64),
    )


def run_closed_loop(
    cost: StepCostModel, sc: Scenario, rng: np.random.Generator, *, record_chunks: bool = False
) -> RunTrace:
    """Simulate one closed-loop scenario (see :func:`fast_path_applies`) in step space."""
    plan = plan_steps(sc, cost.max_num_batched_tokens, rng)
    k, t, b, m = sc.k, plan.timeline, plan.batches, plan.timeline.steps
    # 3. price every step at once, then wall-clock times
    dt = cost.step_time(**plan.composition)
    end = np.cumsum(dt)
    # 4. counters (vLLM semantics) and, when asked, the chunk records
    acc = plan.accepted
    chunks = (b.chunks or _plain_chunks(t)) if record_chunks else (np.zeros(0, dtype=np.int64),) * 3
    return RunTrace(
        scenario=sc,
        arrival_s=np.where(t.sent > 0, end[np.maximum(t.sent - 1, 0)], 0.0),
        first_token_s=end[t.first],
        finish_s=end[t.finish],
        n_chunks=t.n_dec + 1,
        step_dt_s=dt,
        step_end_s=end,
        step_k=np.full(m, k, dtype=np.int64),
        step_n_decode=b.n_decode.astype(np.int64),
        step_n_running=plan.running,
        step_tokens=(b.decode_tokens + np.bincount(t.first, minlength=m)).astype(np.int64),
        step_chunk_hist=b.hist,
        num_drafts=int(acc.size),
        num_draft_tokens=int(acc.size) * k,
        num_accepted_tokens=int(acc.sum()),
        accepted_per_pos=accepted_per_position(acceptance_histogram(acc, k))
        if k
        else np.zeros(0, dtype=np.int64),
        chunk_request=chunks[0],
        chunk_step=chunks[1],
        chunk_tokens=chunks[2],
    )
