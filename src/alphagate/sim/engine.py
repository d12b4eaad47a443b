"""Continuous-batching server simulator, vectorized across the running batch and across scenarios.

Each loop iteration is one engine step for every scenario still running (a *lockstep* batch of
independent simulations sharing one step-time model — e.g. a speculative run and its paired
no-speculation baseline, or a sweep over α, K and concurrency). Inside a step all work is array
code over ``[scenarios, slots]``; nothing loops per token or per sequence in Python.

One step, per scenario (vLLM V1 scheduling, simplified):

1. **admit** waiting requests whose arrival time has passed into free slots (FCFS, ≤ max_num_seqs);
2. **schedule** every decoding sequence (K drafts + 1 verify position each) and give the rest of
   the ``max_num_batched_tokens`` budget to prefill chunks in admission order;
3. **accept**: a sequence accepts ``a`` drafts with P(a ≥ j) = Π_{i≤j} α_i — sampled with one
   uniform per sequence (``a = #{j : U < P(a ≥ j)}``), exact for i.i.d. or per-position α;
4. **time** the step with the roofline model and advance the scenario's clock;
5. **emit** ``min(a + 1, remaining)`` tokens per decoding sequence as one chunk; a sequence whose
   prefill finished emits its first token; finished requests free their slot (closed loop: the user
   sends its next request after the think time).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from alphagate.sim.cost import StepCostModel
from alphagate.sim.workload import ClosedLoop, OpenLoop, RequestSet

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

__all__ = ["RunTrace", "Scenario", "simulate"]


@dataclass(frozen=True)
class Scenario:
    """One simulated configuration. ``k = 0`` is the no-speculation baseline."""

    k: int
    arrivals: ClosedLoop | OpenLoop
    requests: RequestSet
    unconditional: FloatArray  # [n_classes, k]: P(≥ j drafts accepted), j = 1..k
    max_num_seqs: int
    disable_above_batch: int | None = None
    label: str = ""


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


def _stack_requests(scenarios: list[Scenario]) -> tuple[IntArray, IntArray, IntArray, FloatArray]:
    n = {s.requests.n for s in scenarios}
    if len(n) != 1:
        raise ValueError("scenarios simulated together must have the same number of requests")
    prompt = np.stack([s.requests.prompt_len for s in scenarios])
    output = np.stack([s.requests.output_len for s in scenarios])
    cls = np.stack([s.requests.class_idx for s in scenarios])
    arrival = np.stack([s.requests.arrival_s for s in scenarios])
    return prompt, output, cls, arrival


def simulate(
    cost: StepCostModel,
    scenarios: list[Scenario],
    rng: np.random.Generator,
    *,
    record_chunks: bool = False,
    max_steps: int = 50_000_000,
) -> list[RunTrace]:
    """Run ``scenarios`` in lockstep on one step-time model; returns one trace per scenario."""
    n_sc = len(scenarios)
    if n_sc == 0:
        return []
    prompt, output, cls, arrival = _stack_requests(scenarios)
    n_req = prompt.shape[1]
    k_s = np.array([s.k for s in scenarios], dtype=np.int64)  # [S]
    k_max = max(1, int(k_s.max()))
    width = k_max + 2
    closed = np.array([isinstance(s.arrivals, ClosedLoop) for s in scenarios])
    users = np.array(
        [s.arrivals.users if isinstance(s.arrivals, ClosedLoop) else n_req for s in scenarios],
        dtype=np.int64,
    )
    think = np.array(
        [s.arrivals.think_time_s if isinstance(s.arrivals, ClosedLoop) else 0.0 for s in scenarios]
    )
    slots_s = np.array(
        [min(s.max_num_seqs, int(u)) for s, u in zip(scenarios, users, strict=True)], dtype=np.int64
    )
    n_slots = int(slots_s.max())
    disable = np.array(
        [
            s.disable_above_batch if s.disable_above_batch is not None else np.iinfo(np.int64).max
            for s in scenarios
        ],
        dtype=np.int64,
    )
    # thresholds per scenario and class, [S, n_classes, k_max]; zero beyond each scenario's K
    n_cls = int(cls.max()) + 1
    thr_table = np.zeros((n_sc, n_cls, k_max))
    for i, s in enumerate(scenarios):
        if s.k > 0:
            u = np.asarray(s.unconditional, dtype=np.float64)
            if u.shape[0] < n_cls or u.shape[1] < s.k:
                raise ValueError(
                    f"scenario {i}: unconditional table {u.shape} too small for K={s.k}"
                )
            thr_table[i, :, : s.k] = u[:n_cls, : s.k]

    # closed loop: the first `users` requests are sent at t = 0
    issued = np.where(closed, np.minimum(users, n_req), n_req).astype(np.int64)
    for row in np.nonzero(closed)[0]:
        arrival[row, :] = np.nan
        arrival[row, : issued[row]] = 0.0

    sc = np.arange(n_sc)
    slot_ok = np.arange(n_slots)[None, :] < slots_s[:, None]  # [S, N]
    req = np.full((n_sc, n_slots), -1, dtype=np.int64)
    rem = np.zeros((n_sc, n_slots), dtype=np.int64)
    ctx = np.zeros((n_sc, n_slots), dtype=np.int64)
    pre = np.zeros((n_sc, n_slots), dtype=np.int64)
    nchunk = np.zeros((n_sc, n_slots), dtype=np.int64)
    thr = np.zeros((n_sc, n_slots, k_max))
    clock = np.zeros(n_sc)
    admitted = np.zeros(n_sc, dtype=np.int64)
    done = np.zeros(n_sc, dtype=np.int64)
    first_tok = np.full((n_sc, n_req), np.nan)
    finish = np.full((n_sc, n_req), np.nan)
    n_chunks = np.zeros((n_sc, n_req), dtype=np.int64)
    a_hist = np.zeros((n_sc, k_max + 2), dtype=np.int64)
    budget_cap = cost.max_num_batched_tokens
    lookahead = 16

    log_dt: list[FloatArray] = []
    log_end: list[FloatArray] = []
    log_k: list[IntArray] = []
    log_dec: list[IntArray] = []
    log_run: list[IntArray] = []
    log_tok: list[IntArray] = []
    log_hist: list[IntArray] = []
    ch_s: list[IntArray] = []
    ch_r: list[IntArray] = []
    ch_m: list[IntArray] = []
    ch_t: list[IntArray] = []

    for step in range(max_steps):
        live = done < n_req
        if not live.any():
            break
        occupied = req >= 0

        # 1. admit -------------------------------------------------------------------------
        n_free = (slot_ok & ~occupied).sum(1)
        pending = issued - admitted
        look = np.minimum(admitted[:, None] + np.arange(lookahead)[None, :], n_req - 1)
        arr_ahead = arrival[sc[:, None], look]  # [S, lookahead]
        ready = (arr_ahead <= clock[:, None]) & (np.arange(lookahead)[None, :] < pending[:, None])
        n_ready = np.cumprod(ready, axis=1).sum(1)
        take = np.minimum(n_free, n_ready)
        if take.any():
            free = slot_ok & ~occupied
            rank = np.cumsum(free, axis=1) - 1
            new = free & (rank < take[:, None])
            s_new, n_new = np.nonzero(new)
            r_new = admitted[s_new] + rank[s_new, n_new]
            req[s_new, n_new] = r_new
            rem[s_new, n_new] = output[s_new, r_new]
            pre[s_new, n_new] = prompt[s_new, r_new]
            ctx[s_new, n_new] = 0
            nchunk[s_new, n_new] = 0
            thr[s_new, n_new] = thr_table[s_new, cls[s_new, r_new]]
            admitted += take
            occupied = req >= 0

        n_run = occupied.sum(1)
        idle = live & (n_run == 0)
        if idle.any():  # open loop / think time: jump to the next arrival
            nxt = arrival[sc, np.minimum(admitted, n_req - 1)]
            clock = np.where(idle & (admitted < issued), np.maximum(clock, nxt), clock)

        # 2. schedule ------------------------------------------------------------------------
        dec = occupied & (pre == 0)
        n_dec = dec.sum(1)
        k_eff = np.where(n_run <= disable, k_s, 0)
        budget = np.maximum(budget_cap - n_dec * (k_eff + 1), 0)
        prefilling = pre > 0
        if prefilling.any():
            if (pre.sum(1) <= budget).all():
                alloc = pre.copy()
            else:
                alloc = _fcfs_allocation(pre, req, budget)
            p_tok = alloc.sum(1)
            p_ctx = (ctx * (alloc > 0)).sum(1)
            p_pairs = (alloc * (ctx + 0.5 * alloc)).sum(1)
        else:
            alloc = None
            p_tok = p_ctx = np.zeros(n_sc, dtype=np.int64)
            p_pairs = np.zeros(n_sc)

        # 3. accept --------------------------------------------------------------------------
        if (k_eff > 0).any():
            u = rng.random((n_sc, n_slots))
            a = (u[:, :, None] < thr).sum(2)
            a = np.minimum(a, k_eff[:, None])
            a_idx = np.where(dec, a, k_max + 1)
            a_hist += (
                np.bincount(
                    (sc[:, None] * (k_max + 2) + a_idx).ravel(), minlength=n_sc * (k_max + 2)
                ).reshape(n_sc, k_max + 2)
                * (k_eff > 0)[:, None]
            )
            emit = np.where(dec, np.minimum(a + 1, rem), 0)
        else:
            emit = np.where(dec, 1, 0)

        # 4. time ----------------------------------------------------------------------------
        ctx_dec = (ctx * dec).sum(1)
        dt = cost.step_time(k_eff, n_dec, ctx_dec, p_tok, p_ctx, p_pairs, n_run)
        dt = np.where(live & (n_run > 0), dt, 0.0)
        clock = clock + dt

        # 5. emit ----------------------------------------------------------------------------
        rem -= emit
        ctx += emit
        nchunk += dec
        tokens = emit.sum(1)
        if alloc is not None:
            ctx += alloc
            pre -= alloc
            completed = prefilling & (pre == 0)
            if completed.any():
                s_c, n_c = np.nonzero(completed)
                first_tok[s_c, req[s_c, n_c]] = clock[s_c]
                rem[completed] -= 1
                nchunk[completed] += 1
                tokens = tokens + completed.sum(1)

        hist = np.bincount((sc[:, None] * width + emit).ravel(), minlength=n_sc * width).reshape(
            n_sc, width
        )
        hist[:, 0] = 0
        log_dt.append(dt)
        log_end.append(clock)
        log_k.append(k_eff)
        log_dec.append(n_dec)
        log_run.append(n_run)
        log_tok.append(tokens)
        log_hist.append(hist)
        if record_chunks:
            s_d, n_d = np.nonzero(dec)
            ch_s.append(s_d)
            ch_r.append(req[s_d, n_d])
            ch_m.append(np.full(s_d.size, step, dtype=np.int64))
            ch_t.append(emit[s_d, n_d])

        fin = occupied & (pre == 0) & (rem <= 0)
        if fin.any():
            s_f, n_f = np.nonzero(fin)
            r_f = req[s_f, n_f]
            finish[s_f, r_f] = clock[s_f]
            n_chunks[s_f, r_f] = nchunk[s_f, n_f]
            req[s_f, n_f] = -1
            counts = np.bincount(s_f, minlength=n_sc)
            done += counts
            if closed.any():
                _issue_next(s_f, closed, issued, arrival, clock, think, n_req)
    else:  # pragma: no cover - guard against a stuck configuration
        raise RuntimeError(f"simulation did not finish within {max_steps} steps")

    return _traces(
        scenarios,
        arrival,
        first_tok,
        finish,
        n_chunks,
        a_hist,
        k_s,
        (log_dt, log_end, log_k, log_dec, log_run, log_tok, log_hist),
        (ch_s, ch_r, ch_m, ch_t) if record_chunks else None,
    )


def _fcfs_allocation(pre: IntArray, req: IntArray, budget: IntArray) -> IntArray:
    """Give each scenario's prefill budget to its prefilling slots in request (admission) order."""
    s_p, n_p = np.nonzero(pre > 0)
    order = np.lexsort((req[s_p, n_p], s_p))
    s_o, n_o = s_p[order], n_p[order]
    want = pre[s_o, n_o]
    cum = np.cumsum(want)
    seg_start = np.searchsorted(s_o, s_o, side="left")
    before = cum - want - np.where(seg_start > 0, cum[seg_start - 1], 0)
    give = np.clip(budget[s_o] - before, 0, want)
    alloc = np.zeros_like(pre)
    alloc[s_o, n_o] = give
    return alloc


def _issue_next(
    s_f: IntArray,
    closed: npt.NDArray[np.bool_],
    issued: IntArray,
    arrival: FloatArray,
    clock: FloatArray,
    think: FloatArray,
    n_req: int,
) -> None:
    """Closed loop: each finished request's user sends the next request after its think time."""
    s_cl = s_f[closed[s_f]]
    if s_cl.size == 0:
        return
    rank = np.arange(s_cl.size) - np.searchsorted(s_cl, s_cl, side="left")
    idx = issued[s_cl] + rank
    ok = idx < n_req
    arrival[s_cl[ok], idx[ok]] = clock[s_cl[ok]] + think[s_cl[ok]]
    issued += np.bincount(s_cl[ok], minlength=issued.size)


def _traces(
    scenarios: list[Scenario],
    arrival: FloatArray,
    first_tok: FloatArray,
    finish: FloatArray,
    n_chunks: IntArray,
    a_hist: IntArray,
    k_s: IntArray,
    logs: tuple[
        list[FloatArray],
        list[FloatArray],
        list[IntArray],
        list[IntArray],
        list[IntArray],
        list[IntArray],
        list[IntArray],
    ],
    chunks: tuple[list[IntArray], list[IntArray], list[IntArray], list[IntArray]] | None,
) -> list[RunTrace]:
    dt, end, kk, dec, run, tok, hist = (np.stack(x) for x in logs)  # [n_steps, S, ...]
    if chunks is not None and chunks[0]:
        c_s, c_r, c_m, c_t = (np.concatenate(x) for x in chunks)
    else:
        c_s = c_r = c_m = c_t = np.zeros(0, dtype=np.int64)
    out: list[RunTrace] = []
    for i, s in enumerate(scenarios):
        steps = np.nonzero(run[:, i] > 0)[0]  # steps where this scenario did work
        k = int(k_s[i])
        hist_a = a_hist[i, : k + 1]
        per_pos = np.array([hist_a[j + 1 :].sum() for j in range(k)], dtype=np.int64)
        drafts = int(hist_a.sum())
        sel = c_s == i
        # map global step index → position within this scenario's steps
        pos = np.searchsorted(steps, c_m[sel])
        out.append(
            RunTrace(
                scenario=s,
                arrival_s=arrival[i].copy(),
                first_token_s=first_tok[i].copy(),
                finish_s=finish[i].copy(),
                n_chunks=n_chunks[i].copy(),
                step_dt_s=dt[steps, i],
                step_end_s=end[steps, i],
                step_k=kk[steps, i],
                step_n_decode=dec[steps, i],
                step_n_running=run[steps, i],
                step_tokens=tok[steps, i],
                step_chunk_hist=hist[steps, i],
                num_drafts=drafts,
                num_draft_tokens=int((kk[:, i] * dec[:, i]).sum()),
                num_accepted_tokens=int((np.arange(k + 1) * hist_a).sum()),
                accepted_per_pos=per_pos,
                chunk_request=c_r[sel],
                chunk_step=pos.astype(np.int64),
                chunk_tokens=c_t[sel],
            )
        )
    return out
