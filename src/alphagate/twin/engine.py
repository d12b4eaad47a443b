"""The twin's engine: one asyncio loop stepping a continuous batch in (scaled) real time.

Each step admits waiting requests (≤ max_num_seqs), gives the prefill budget to prompts in arrival
order, samples every decoding sequence's accepted drafts (one uniform each, as the simulator; with
drafts of variable length — suffix decoding — its drafted and accepted tokens together),
prices the step with the simulator's roofline model, sleeps that long × ``time_scale``, and then
hands each sequence its 1..K+1 new tokens as **one** chunk. Counters follow vLLM V1's semantics.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from alphagate.sim.cost import StepCostModel
from alphagate.sim.kernel import (
    acceptance_histogram,
    accepted_drafts,
    accepted_per_position,
    decode_budget,
    drafted_and_accepted,
    prefill_allocation,
)
from alphagate.sim.workload import draft_steps_table, unconditional_table
from alphagate.specs.deployment import speculative_kv_slots
from alphagate.specs.workload import sample_lengths
from alphagate.twin.config import TwinConfig
from alphagate.twin.metrics import TwinMetrics
from alphagate.twin.statslog import IntervalStats

__all__ = ["Chunk", "StepRecord", "TwinEngine", "TwinRequest"]

#: the twin gives up the time it is behind its modelled clock past this (and counts it)
RESYNC_S = 0.05

WORDS = (
    "the",
    "model",
    "drafts",
    "tokens",
    "and",
    "verifies",
    "them",
    "in",
    "one",
    "pass",
    "so",
    "accepted",
    "ones",
    "are",
    "free",
)


@dataclass
class Chunk:
    """Tokens produced for one request in one engine step."""

    tokens: int
    text: str
    finish_reason: str | None
    sent_s: float  # loop time when the step ended (the twin's send timestamp)


@dataclass
class TwinRequest:
    rid: str
    prompt_tokens: int
    max_tokens: int
    class_idx: int
    rng: np.random.Generator | None
    queue: asyncio.Queue[Chunk] = field(default_factory=asyncio.Queue)
    prefilled: int = 0
    generated: int = 0
    cancelled: bool = False
    finished: bool = False
    hit_limit: bool = False
    word: int = 0
    #: vLLM's per-request spec-decode accumulator (``RequestSpecDecodeMetrics``): steps that
    #: accepted exactly j drafts, draft tokens proposed, and per step at ``detailed``
    histogram: list[int] = field(default_factory=list)
    draft_tokens: int = 0
    per_step_accepted: list[int] = field(default_factory=list)
    per_step_drafted: list[int] = field(default_factory=list)
    #: loop times (s): submitted, admitted to the batch, first and last token
    queued_s: float = 0.0
    scheduled_s: float = 0.0
    first_token_s: float = 0.0
    last_token_s: float = 0.0

    def spec_decode_metrics(self, k: int) -> dict[str, object]:
        """``metrics.speculative_decoding`` as vLLM's ``RequestSpecDecodeMetrics.to_dict``
        builds it (``vllm/v1/metrics/stats.py``): the histogram of accepted drafts per step
        (bonus excluded), τ including the bonus token, ρ over proposed drafts."""
        hist = self.histogram or [0] * (k + 1)
        steps = sum(hist)
        accepted = sum(j * c for j, c in enumerate(hist))
        out: dict[str, object] = {
            "mean_acceptance_length": 1.0 + accepted / steps if steps else 1.0,
            "draft_acceptance_rate": accepted / self.draft_tokens if self.draft_tokens else 0.0,
            "acceptance_histogram": list(hist),
            "num_spec_steps": steps,
            "num_accepted_draft_tokens": accepted,
            "num_draft_tokens": self.draft_tokens,
            "num_spec_tokens": k,
        }
        if self.per_step_accepted:
            out["per_step_accepted"] = list(self.per_step_accepted)
            out["per_step_drafted"] = list(self.per_step_drafted)
        return out

    def timing_metrics(self, time_scale: float) -> dict[str, float | None]:
        """vLLM's per-request timing (``build_per_request_timing_metrics``), in the twin's model
        time (loop time ÷ time scale)."""
        scale = 1e3 / time_scale if time_scale > 0 else 1e3
        gen = self.generated
        decode = self.last_token_s - self.first_token_s
        infer = self.last_token_s - self.scheduled_s
        return {
            "time_to_first_token_ms": (self.first_token_s - self.scheduled_s) * scale,
            "generation_time_ms": decode * scale,
            "queue_time_ms": (self.scheduled_s - self.queued_s) * scale,
            "mean_itl_ms": decode / (gen - 1) * scale if gen > 1 else None,
            "tokens_per_second": gen / (infer * scale / 1e3) if infer > 0 else None,
        }


class StepRecord(NamedTuple):
    """One engine step, kept (the last 20,000) for tests and benchmarks; a tuple, not an object
    with a ``__dict__``, and few enough that a full garbage collection stays near 3 ms."""

    end_s: float
    model_dt_s: float
    n_decode: int
    tokens: int
    k: int
    prefill_tokens: int


class TwinEngine:
    """Owns the batch; HTTP handlers submit requests and read their chunk queues."""

    def __init__(
        self, config: TwinConfig, cost: StepCostModel, kv_room_tokens: int | None = None
    ) -> None:
        self.config = config
        self.kv_room_tokens = kv_room_tokens
        #: each running sequence's draft and lookahead slots beyond its own tokens
        self._spec_slots = speculative_kv_slots(config.deployment.drafter, config.k)
        self.cost = cost
        self.metrics = TwinMetrics(config)
        self.interval = IntervalStats()  # for the periodic SpecDecoding log line
        self.k = config.k
        self._k_step = config.k  # the K of the step being run (a batch-size schedule)
        classes = config.workload.classes
        self._thr = unconditional_table(classes, config.k)  # [n_classes, max(k, 1)]
        table = draft_steps_table(classes, config.k)  # drafts of variable length, else None
        self._steps_cdf = None if table is None else np.cumsum(table.reshape(len(classes), -1), 1)
        self._drafted = np.zeros(0, dtype=np.int64)
        self._shares = np.asarray([c.share for c in classes])
        self._rng = np.random.default_rng(config.seed)
        self._waiting: deque[TwinRequest] = deque()
        self._running: list[TwinRequest] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._ids = itertools.count()
        self.steps: deque[StepRecord] = deque(maxlen=20_000)  # the last ~minutes of steps
        self.max_num_seqs = config.deployment.max_num_seqs
        self.class_names = [c.name for c in classes]

    # ---------------------------------------------------------------- lifecycle
    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def take_interval(self) -> IntervalStats:
        """The spec-decode counts since the last call; a new interval starts."""
        done, self.interval = self.interval, IntervalStats()
        return done

    # ---------------------------------------------------------------- requests
    def pick_class(self, name: str | None, rng: np.random.Generator | None) -> int:
        if name is not None and name in self.class_names:
            return self.class_names.index(name)
        r = rng if rng is not None else self._rng
        return int(r.choice(self._shares.size, p=self._shares / self._shares.sum()))

    def output_length(
        self, max_tokens: int | None, ignore_eos: bool, rng: np.random.Generator | None
    ) -> tuple[int, bool]:
        """Tokens to generate and whether the length limit (not EOS) ends the request."""
        cap = max_tokens if max_tokens is not None else self.config.max_model_len
        if ignore_eos and max_tokens is not None:
            return max_tokens, True
        natural = int(
            sample_lengths(
                self.config.workload.output_len, 1, rng if rng is not None else self._rng
            )[0]
        )
        return (cap, True) if natural >= cap else (natural, False)

    def submit(
        self,
        prompt_tokens: int,
        max_tokens: int,
        hit_limit: bool,
        class_idx: int,
        rng: np.random.Generator | None,
    ) -> TwinRequest:
        req = TwinRequest(
            f"{next(self._ids)}", prompt_tokens, max_tokens, class_idx, rng, hit_limit=hit_limit
        )
        req.queued_s = self._now()
        if self.k > 0 and self.config.per_request_spec_decode_metrics != "none":
            req.histogram = [0] * (self.k + 1)
        self._waiting.append(req)
        self.metrics.prompt_tokens.inc(prompt_tokens)
        self._wake.set()
        return req

    def _now(self) -> float:
        try:
            return asyncio.get_running_loop().time()
        except RuntimeError:  # submitted outside a loop (tests)
            return 0.0

    def cancel(self, req: TwinRequest) -> None:
        req.cancelled = True

    @property
    def n_running(self) -> int:
        return len(self._running)

    @property
    def n_waiting(self) -> int:
        return len(self._waiting)

    # ---------------------------------------------------------------- the loop
    async def _loop(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time()
        while True:
            if not self._running and not self._waiting:
                self._wake.clear()
                await self._wake.wait()
                deadline = loop.time()
            # steps run back to back on a deadline clock, so a late wake-up (the event loop rounds
            # timeouts up to whole milliseconds) is made up in the next step and the mean step
            # length equals the model's; if the host falls far behind, resynchronise
            if loop.time() - deadline > RESYNC_S:
                deadline = loop.time()
                self.metrics.twin_resyncs.inc()
            dt = self._step_plan()
            if dt is None:
                await asyncio.sleep(0)
                continue
            deadline += dt * self.config.time_scale
            await asyncio.sleep(max(0.0, deadline - loop.time()))
            now = loop.time()
            self.metrics.twin_steps.inc()
            self.metrics.twin_lag.inc(max(0.0, now - deadline))
            self._step_emit(now, dt)

    def _step_plan(self) -> float | None:
        """Admit, schedule and sample; returns the step's simulated duration (or None if idle)."""
        self._running = [r for r in self._running if not r.cancelled]
        while self._waiting and len(self._running) < self.max_num_seqs and self._fits():
            r = self._waiting.popleft()
            if not r.cancelled:
                r.scheduled_s = self._now()
                self._running.append(r)
        if not self._running:
            return None
        run = self._running
        k = self._k_step = self.config.k_at(len(run))
        decoding = [r for r in run if r.prefilled >= r.prompt_tokens]
        prefilling = [r for r in run if r.prefilled < r.prompt_tokens]
        budget = decode_budget(self.cost.max_num_batched_tokens, len(decoding), k)
        want = np.fromiter((r.prompt_tokens - r.prefilled for r in prefilling), np.int64)
        alloc = prefill_allocation(want, budget)
        self._alloc = [(r, int(a)) for r, a in zip(prefilling, alloc, strict=True) if a > 0]
        done_before = np.fromiter((r.prefilled for r, _ in self._alloc), np.float64)
        take = np.fromiter((a for _, a in self._alloc), np.float64)
        n = len(decoding)
        self._decoding = decoding
        self._accepted = np.zeros(n, dtype=np.int64)
        self._drafted = np.full(n, k, dtype=np.int64)
        if n and k > 0:
            u = self._rng.random(n)
            for i, r in enumerate(decoding):
                if r.rng is not None:
                    u[i] = r.rng.random()
            cls = np.fromiter((r.class_idx for r in decoding), dtype=np.int64, count=n)
            if self._steps_cdf is None:
                self._accepted = accepted_drafts(u, self._thr[:, :k], cls)
            else:
                self._drafted, self._accepted = drafted_and_accepted(u, self._steps_cdf, cls)
        ctx = float(sum(r.prompt_tokens + r.generated - 1 for r in decoding))
        variable = self._steps_cdf is not None and k > 0
        return self.cost.step_seconds(
            # drafts of variable length: the verify pass holds what each sequence drafted
            k=float(self._drafted.sum()) / n if variable and n else k,
            # a schedule's K = 0 on a speculative server still runs the drafter's first forward
            # (vLLM's dynamic speculative decoding, vllm/v1/spec_decode/llm_base_proposer.py)
            proposing=variable or (k == 0 and self.config.speculative),
            n_decode=n,
            ctx_decode=ctx,
            prefill_tokens=float(take.sum()),
            prefill_ctx=float(done_before.sum()),
            prefill_pairs=float((take * (done_before + 0.5 * take)).sum()),
            n_running=len(run),
        )

    def _held_tokens(self, r: TwinRequest) -> int:
        return r.prompt_tokens + r.max_tokens + self._spec_slots

    def _fits(self) -> bool:
        """Whether the first waiting request's whole length fits the KV room left (first come,
        first served: a request that does not fit holds the ones behind it back)."""
        if self.kv_room_tokens is None or self._waiting[0].cancelled:
            return True
        held = sum(self._held_tokens(r) for r in self._running)
        return held + self._held_tokens(self._waiting[0]) <= self.kv_room_tokens

    def _step_emit(self, now: float, dt: float) -> None:
        m = self.metrics
        k_eff = self._k_step
        tokens_out = 0
        n = len(self._decoding)
        drafted = self._drafted  # a step that drafted nothing is not a draft (vLLM's scheduler)
        if n and k_eff > 0 and drafted.any():
            acc = self._accepted[drafted > 0]
            m.num_drafts.inc(acc.size)
            m.num_draft_tokens.inc(int(drafted.sum()))
            m.num_accepted_tokens.inc(int(acc.sum()))
            per_pos = accepted_per_position(acceptance_histogram(acc, k_eff))
            for pos, c in enumerate(per_pos):
                if c:
                    m.accepted_per_pos[pos].inc(int(c))
            self.interval.add(
                acc.size, int(drafted.sum()), int(acc.sum()), [int(c) for c in per_pos]
            )
        detailed = self.config.per_request_spec_decode_metrics == "detailed"
        for i, r in enumerate(self._decoding):
            if r.cancelled:
                continue
            if r.histogram and k_eff > 0 and drafted[i] > 0:  # where the counters count it
                a = int(self._accepted[i])
                r.histogram[a] += 1
                r.draft_tokens += int(drafted[i])
                if detailed:
                    r.per_step_accepted.append(a)
                    r.per_step_drafted.append(int(drafted[i]))
            e = min(int(self._accepted[i]) + 1, r.max_tokens - r.generated)
            tokens_out += self._give(r, e, now)
        for r, take in self._alloc:
            r.prefilled += take
            if r.prefilled >= r.prompt_tokens and not r.cancelled:
                tokens_out += self._give(r, 1, now)
        m.generation_tokens.inc(tokens_out)
        self.steps.append(StepRecord(now, dt, n, tokens_out, k_eff, sum(t for _, t in self._alloc)))
        self._running = [r for r in self._running if not (r.finished or r.cancelled)]
        m.running.set(len(self._running))
        m.waiting.set(len(self._waiting))

    def _give(self, r: TwinRequest, tokens: int, now: float) -> int:
        if tokens <= 0:
            return 0
        if r.generated == 0:
            r.first_token_s = now
        r.last_token_s = now
        r.generated += tokens
        done = r.generated >= r.max_tokens
        words = [WORDS[(r.word + j) % len(WORDS)] for j in range(tokens)]
        r.word += tokens
        reason = ("length" if r.hit_limit else "stop") if done else None
        r.queue.put_nowait(Chunk(tokens, " " + " ".join(words), reason, now))
        if done:
            r.finished = True
            self.metrics.success(reason or "stop").inc()
        return tokens

    def reset_metrics(self) -> None:
        """Drop every counter back to zero, as a restarted server would (test hook)."""
        self.metrics = TwinMetrics(self.config)
