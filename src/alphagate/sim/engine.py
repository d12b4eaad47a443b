"""Continuous-batching server simulator: one engine step at a time, vectorized over the batch.

Each loop iteration is one engine step. Inside a step all work is array code over the batch's
slots; nothing loops per token or per sequence in Python. One step (vLLM V1 scheduling, simplified):

1. **admit** waiting requests that have reached the engine into free slots (FCFS,
   ≤ max_num_seqs): a request sent at its arrival time reaches the engine ``request_delay_s``
   later, then through the server's front-end when the scenario prices one (``frontend_s``,
   below);
2. **schedule** every decoding sequence (K drafts + 1 verify position each) and give the rest of
   the ``max_num_batched_tokens`` budget to prefill chunks in admission order;
3. **accept** drafts per decoding sequence (:func:`alphagate.sim.kernel.accepted_drafts`; drafts
   of variable length draw the drafted and the accepted tokens together,
   :func:`alphagate.sim.kernel.drafted_and_accepted`, and the step verifies what was drafted);
4. **time** the step with the roofline model and advance the clock;
5. **emit** ``min(a + 1, remaining)`` tokens per decoding sequence as one chunk; a sequence whose
   prefill finished emits its first token; finished requests free their slot (closed loop: the user
   sends its next request after the think time).

The front-end (``frontend_s``): vLLM's API server takes each request through tokenization and
input processing in one process before the engine core sees it
(``vllm/entrypoints/openai/serving_completion.py`` → ``vllm/v1/engine/async_llm.py``), one
request's work after another's. Requests that reach it together leave it together: each waiting
request is processed in one batch that starts when the front-end is free and takes
``frontend_s`` per request, the requests arriving meanwhile wait for the next (a burst of n
simultaneous requests reaches the engine n × ``frontend_s`` later, as a closed loop's users do
when their requests finish in the same step).

This engine covers open and closed loops, think time, queueing, prefill contention, the
front-end and batch-size policies; :mod:`alphagate.sim.closed_loop` is the fast path for the
common closed loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from alphagate.sim.cost import StepCostModel
from alphagate.sim.kernel import (
    acceptance_histogram,
    accepted_drafts,
    accepted_per_position,
    decode_budget,
    decode_capacity,
    drafted_and_accepted,
    prefill_allocation,
)
from alphagate.sim.workload import ClosedLoop, OpenLoop, RequestSet
from alphagate.specs.schedule import k_for_batch

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

__all__ = ["RunTrace", "Scenario", "run_engine"]


@dataclass(frozen=True)
class Scenario:
    """One simulated configuration. ``k = 0`` is the no-speculation baseline."""

    k: int
    arrivals: ClosedLoop | OpenLoop
    requests: RequestSet
    unconditional: FloatArray  # [n_classes, ≥ k]: P(≥ j drafts accepted), j = 1..k
    max_num_seqs: int
    disable_above_batch: int | None = None
    label: str = ""
    #: drafts of variable length: [n_classes, k + 1, k + 1] share of a class's steps drafting L
    #: tokens and accepting a (:func:`alphagate.sim.workload.draft_steps_table`); None: chains
    draft_steps: FloatArray | None = None
    #: vLLM's num_speculative_tokens_per_batch_size: K for a step of n running sequences
    #: (:func:`alphagate.specs.schedule.k_for_batch`), capped at ``k``
    k_by_batch: list[list[int]] | None = None
    #: prefills apart from decodes: every waiting prompt is prefilled whole in the next step, at
    #: no cost to the decoding sequences (a disaggregated prefill with room to spare;
    #: ``explain``'s counterfactual without prefill interference)
    prefill_apart: bool = False
    #: the K the server was started with when it is more than ``k`` (a level that a batch-size
    #: schedule runs with fewer drafts or none): a step of K = 0 still runs the drafter's first
    #: forward, which keeps its KV in step with the target's (vLLM's dynamic speculative
    #: decoding, ``vllm/v1/spec_decode/llm_base_proposer.py``), and the server's speculative
    #: per-step costs; 0: none beyond ``k``
    launched: int = 0
    #: the server's front-end: seconds of work per request, serial (see the module docstring)
    frontend_s: float = 0.0
    #: seconds per request between its send and the front-end (HTTP, the client)
    request_delay_s: float = 0.0


@dataclass
class RunTrace:
    """Everything one scenario produced. Per-step arrays have shape ``[n_steps]``."""

    scenario: Scenario
    # per request, shape [n_requests], in request-index order
    arrival_s: FloatArray
    first_token_s: FloatArray
    finish_s: FloatArray
    n_chunks: IntArray
    # per engine step
    step_dt_s: FloatArray
    step_end_s: FloatArray
    step_k: IntArray
    step_n_decode: IntArray
    step_n_running: IntArray
    step_tokens: IntArray
    step_chunk_hist: IntArray  # [n_steps, k_max + 2]: decoding sequences that emitted j tokens
    # acceptance counters, vLLM semantics (per decoding sequence per speculative step)
    num_drafts: int
    num_draft_tokens: int
    num_accepted_tokens: int
    accepted_per_pos: IntArray  # [k]
    # optional per-chunk records (record_chunks=True): request index, step index, tokens
    chunk_request: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    chunk_step: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    chunk_tokens: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    @property
    def n_steps(self) -> int:
        return int(self.step_dt_s.size)


class _Server:
    """The batch of one simulated server: slot arrays of shape ``[max_num_seqs]``."""

    def __init__(self, sc: Scenario, cost: StepCostModel) -> None:
        req = sc.requests
        self.sc, self.cost, self.n = sc, cost, req.n
        closed = isinstance(sc.arrivals, ClosedLoop)
        self.users = sc.arrivals.users if isinstance(sc.arrivals, ClosedLoop) else req.n
        self.think = sc.arrivals.think_time_s if isinstance(sc.arrivals, ClosedLoop) else 0.0
        slots = min(sc.max_num_seqs, self.users)
        self.arrival = req.arrival_s.astype(np.float64).copy()
        self.issued = min(self.users, self.n) if closed else self.n
        if closed:  # the first `users` requests are sent at t = 0
            self.arrival[:] = np.nan
            self.arrival[: self.issued] = 0.0
        self.closed = closed
        self.k = sc.k
        self.thr = np.asarray(sc.unconditional, dtype=np.float64)[:, : max(sc.k, 1)]
        self.disable = sc.disable_above_batch
        # a step drafting nothing on a server started to speculate still proposes: a batch-size
        # schedule's K = 0, or a level run at K = 0 on the launched server
        self.launched = sc.launched > 0 or (sc.k > 0 and sc.k_by_batch is not None)
        self.req = np.full(slots, -1, dtype=np.int64)
        self.rem = np.zeros(slots, dtype=np.int64)
        self.ctx = np.zeros(slots, dtype=np.int64)
        self.pre = np.zeros(slots, dtype=np.int64)
        self.nchunk = np.zeros(slots, dtype=np.int64)
        self.clock = 0.0
        self.admitted = 0
        self.done = 0
        self.first_tok = np.full(self.n, np.nan)
        self.finish = np.full(self.n, np.nan)
        self.n_chunks = np.zeros(self.n, dtype=np.int64)
        self.accept_hist = np.zeros(max(sc.k, 1) + 1, dtype=np.int64)
        self.steps_cdf = None
        if sc.draft_steps is not None:
            flat = np.asarray(sc.draft_steps, dtype=np.float64).reshape(sc.draft_steps.shape[0], -1)
            self.steps_cdf = np.cumsum(flat / flat.sum(axis=1, keepdims=True), axis=1)
        self.drafted = 0  # draft tokens of every step so far (variable lengths)
        self.step_drafted = 0  # … of this step
        # when each request reaches the engine (the front-end's batches, formed as time passes)
        self.fe = sc.frontend_s > 0.0 or sc.request_delay_s > 0.0
        self.reach = np.full(self.n, np.nan) if self.fe else self.arrival
        self.fe_free = 0.0  # when the front-end's current batch is done
        self.fe_done = 0  # requests through the front-end, in send order

    # 0. the front-end ---------------------------------------------------------------------------
    def frontend(self, until: float, batches: int | None = None) -> None:
        """Form the front-end's batches that start by ``until`` (at most ``batches`` of
        them): a batch starts when the front-end is free and a request waits, takes every
        request waiting then, and ends ``frontend_s`` per request later."""
        sc = self.sc
        while self.fe_done < self.issued and (batches is None or batches > 0):
            enter = self.arrival[self.fe_done : self.issued] + sc.request_delay_s
            start = max(self.fe_free, float(enter[0]))
            if start > until:
                return
            size = int(np.searchsorted(enter, start, side="right"))
            self.fe_free = start + size * sc.frontend_s
            self.reach[self.fe_done : self.fe_done + size] = self.fe_free
            self.fe_done += size
            batches = None if batches is None else batches - 1

    # 1. admit ------------------------------------------------------------------------------
    def admit(self) -> None:
        free = np.nonzero(self.req < 0)[0]
        if free.size == 0 or self.admitted >= self.issued:
            return
        upto = min(self.issued, self.admitted + free.size)
        if self.fe:
            self.frontend(self.clock)
        # a request that arrives as a step ends (a closed-loop user answering the last token)
        # reaches a busy engine while the next step runs — vLLM's loop does not wait for it — and
        # joins the step after; an idle engine takes it at once
        arrived = self.reach[self.admitted : upto]
        ready = arrived < self.clock if (self.req >= 0).any() else arrived <= self.clock
        take = int(np.cumprod(ready).sum())
        if take == 0:
            return
        slots, r = free[:take], np.arange(self.admitted, self.admitted + take)
        self.req[slots] = r
        self.rem[slots] = self.sc.requests.output_len[r]
        self.pre[slots] = self.sc.requests.prompt_len[r]
        self.ctx[slots] = 0
        self.nchunk[slots] = 0
        self.admitted += take

    def wait_for_arrival(self) -> None:
        """No sequence is running: jump the clock to when the next request reaches the engine
        (nothing is sent meanwhile, so the front-end's next batch is known)."""
        if self.admitted < self.issued:
            if self.fe and self.fe_done <= self.admitted:
                self.frontend(np.inf, batches=1)
            self.clock = max(self.clock, float(self.reach[self.admitted]))

    # 2. schedule -----------------------------------------------------------------------------
    def schedule(self, occupied: BoolArray) -> tuple[BoolArray, int, IntArray]:
        """Decoding slots, this step's K, and prefill tokens per slot. Decoding sequences beyond
        what the token budget carries at this K (:func:`decode_capacity`) wait for the next
        step, the latest admitted first, as vLLM's scheduler leaves them."""
        dec = occupied & (self.pre == 0)
        n_run = int(occupied.sum())
        k = self.k if self.disable is None or n_run <= self.disable else 0
        if self.sc.k_by_batch is not None:
            k = min(k, k_for_batch(self.sc.k_by_batch, n_run, self.k))
        slots = self.cost.draft_slots
        cap = decode_capacity(self.cost.max_num_batched_tokens, k, slots)
        if int(dec.sum()) > cap:
            idx = np.nonzero(dec)[0]
            dec = dec.copy()
            dec[idx[np.argsort(self.req[idx], kind="stable")][cap:]] = False
        alloc = np.zeros_like(self.pre)
        prefilling = np.nonzero(self.pre > 0)[0]
        if prefilling.size:
            order = prefilling[np.argsort(self.req[prefilling], kind="stable")]
            budget = (
                int(self.pre[order].sum())
                if self.sc.prefill_apart
                else decode_budget(self.cost.max_num_batched_tokens, int(dec.sum()), k, slots)
            )
            alloc[order] = prefill_allocation(self.pre[order], budget)
        return dec, k, alloc

    # 3. accept -------------------------------------------------------------------------------
    def accept(self, dec: BoolArray, k: int, rng: np.random.Generator) -> IntArray:
        """Tokens each slot emits this step (0 for slots that are not decoding)."""
        emit = np.zeros_like(self.rem)
        idx = np.nonzero(dec)[0]
        self.step_drafted = 0
        if k > 0 and idx.size and self.steps_cdf is not None:
            cls = self.sc.requests.class_idx[self.req[idx]]
            n, a = drafted_and_accepted(rng.random(idx.size), self.steps_cdf, cls)
            # a step whose K is cut (by batch size) proposes at most that many tokens
            n, a = np.minimum(n, k), np.minimum(a, k)
            self.accept_hist[: k + 1] += acceptance_histogram(a[n > 0], k)
            self.step_drafted = int(n.sum())
            self.drafted += self.step_drafted
            emit[idx] = np.minimum(a + 1, self.rem[idx])
        elif k > 0 and idx.size:
            cls = self.sc.requests.class_idx[self.req[idx]]
            a = accepted_drafts(rng.random(idx.size), self.thr[:, :k], cls)
            self.accept_hist[: k + 1] += acceptance_histogram(a, k)
            emit[idx] = np.minimum(a + 1, self.rem[idx])
        else:
            emit[idx] = 1
        return emit

    # 4. time ---------------------------------------------------------------------------------
    def price(self, dec: BoolArray, k: int, alloc: IntArray, n_run: int) -> float:
        if self.sc.prefill_apart and dec.any():
            alloc = np.zeros_like(alloc)
        has = alloc > 0
        p_tok = int(alloc.sum())
        p_ctx = int(self.ctx[has].sum())
        p_pairs = float((alloc * (self.ctx + 0.5 * alloc)).sum())
        n_dec = int(dec.sum())
        variable = self.steps_cdf is not None and k > 0
        proposing = variable or (k == 0 and self.launched)
        # variable lengths: the verify pass holds what each sequence drafted, on average
        drafts = self.step_drafted / max(n_dec, 1) if variable else float(k)
        return self.cost.step_seconds(
            k=drafts,
            proposing=proposing,
            n_decode=n_dec,
            ctx_decode=int(self.ctx[dec].sum()),
            prefill_tokens=p_tok,
            prefill_ctx=p_ctx,
            prefill_pairs=p_pairs,
            n_running=n_run,
        )

    # 5. emit, then retire finished requests -----------------------------------------------------
    def emit(self, dec: BoolArray, emit: IntArray, alloc: IntArray) -> int:
        self.rem -= emit
        self.ctx += emit + alloc
        self.nchunk += dec
        self.pre -= alloc
        completed = (alloc > 0) & (self.pre == 0)
        if completed.any():  # a finished prefill emits the first token
            self.first_tok[self.req[completed]] = self.clock
            self.rem[completed] -= 1
            self.nchunk[completed] += 1
        return int(emit.sum() + completed.sum())

    def retire(self, occupied: BoolArray) -> None:
        fin = occupied & (self.pre == 0) & (self.rem <= 0)
        if not fin.any():
            return
        r = self.req[fin]
        self.finish[r] = self.clock
        self.n_chunks[r] = self.nchunk[fin]
        self.req[fin] = -1
        self.done += r.size
        if self.closed:  # each finished request's user sends the next after the think time
            nxt = np.arange(self.issued, min(self.n, self.issued + r.size))
            self.arrival[nxt] = self.clock + self.think
            self.issued += nxt.size


@dataclass
class _StepLog:
    dt: list[float] = field(default_factory=list)
    end: list[float] = field(default_factory=list)
    k: list[int] = field(default_factory=list)
    n_dec: list[int] = field(default_factory=list)
    n_run: list[int] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    hist: list[IntArray] = field(default_factory=list)
    chunks: list[tuple[IntArray, int, IntArray]] = field(default_factory=list)


def run_engine(
    cost: StepCostModel,
    scenario: Scenario,
    rng: np.random.Generator,
    *,
    record_chunks: bool = False,
    max_steps: int = 50_000_000,
) -> RunTrace:
    """Run one scenario step by step on ``cost``; returns its trace."""
    srv = _Server(scenario, cost)
    log = _StepLog()
    width = max(scenario.k, 1) + 2
    for step in range(max_steps):
        if srv.done >= srv.n:
            break
        srv.admit()
        occupied = srv.req >= 0
        if not occupied.any():
            srv.wait_for_arrival()
            continue
        dec, k, alloc = srv.schedule(occupied)
        emit = srv.accept(dec, k, rng)
        dt = srv.price(dec, k, alloc, int(occupied.sum()))
        srv.clock += dt
        tokens = srv.emit(dec, emit, alloc)
        log.dt.append(dt)
        log.end.append(srv.clock)
        log.k.append(k)
        log.n_dec.append(int(dec.sum()))
        log.n_run.append(int(occupied.sum()))
        log.tokens.append(tokens)
        log.hist.append(np.bincount(emit[dec], minlength=width)[:width])
        if record_chunks:
            log.chunks.append((srv.req[dec], step, emit[dec]))
        srv.retire(occupied)
    else:  # pragma: no cover - guard against a stuck configuration
        raise RuntimeError(f"simulation did not finish within {max_steps} steps")
    return _trace(srv, log, width)


def _trace(srv: _Server, log: _StepLog, width: int) -> RunTrace:
    k = srv.sc.k
    hist_a = srv.accept_hist[: k + 1]
    steps = np.asarray(log.k, dtype=np.int64)
    n_dec = np.asarray(log.n_dec, dtype=np.int64)
    hist = np.stack(log.hist) if log.hist else np.zeros((0, width), dtype=np.int64)
    hist[:, 0] = 0
    if log.chunks:
        c_r = np.concatenate([c[0] for c in log.chunks])
        c_m = np.concatenate(
            [np.full(c[0].size, i, dtype=np.int64) for i, c in enumerate(log.chunks)]
        )
        c_t = np.concatenate([c[2] for c in log.chunks])
    else:
        c_r = c_m = c_t = np.zeros(0, dtype=np.int64)
    return RunTrace(
        scenario=srv.sc,
        arrival_s=srv.arrival,
        first_token_s=srv.first_tok,
        finish_s=srv.finish,
        n_chunks=srv.n_chunks,
        step_dt_s=np.asarray(log.dt),
        step_end_s=np.asarray(log.end),
        step_k=steps,
        step_n_decode=n_dec,
        step_n_running=np.asarray(log.n_run, dtype=np.int64),
        step_tokens=np.asarray(log.tokens, dtype=np.int64),
        step_chunk_hist=hist,
        num_drafts=int(hist_a.sum()) if k else 0,
        num_draft_tokens=srv.drafted if srv.steps_cdf is not None else int((steps * n_dec).sum()),
        num_accepted_tokens=int((np.arange(k + 1) * hist_a).sum()) if k else 0,
        accepted_per_pos=accepted_per_position(hist_a) if k else np.zeros(0, dtype=np.int64),
        chunk_request=c_r,
        chunk_step=c_m,
        chunk_tokens=c_t,
    )
