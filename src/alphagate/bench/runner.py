"""The load generator's run loop: closed-loop concurrency levels, scheduled open-loop arrivals
(gamma gaps or a replayed trace), or the knee search of a sweep (:mod:`alphagate.bench.sweep`),
streamed; every level summarised, a server fault one failed record and the run going on.

The runner keeps the loop and hands the rest to one collaborator each: one request sent and
measured (:class:`~alphagate.bench.request.RequestSender`), the fault limits
(:class:`~alphagate.bench.limits.FaultLimits`), the finished records
(:class:`~alphagate.bench.sink.RecordSink`: each handed to the caller's ``sink`` at once, so an
interrupted run loses nothing that completed), and what is read from the servers besides the
streams (:class:`~alphagate.bench.server.ServerReader`: ``/v1/models``, ``/metrics`` around each
level). Every request goes through one transport (:mod:`alphagate.net`: the llhttp client,
whose docstring says why not aiohttp; a test passes a ``MockTransport``); time is
``time.perf_counter``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

import numpy as np

from alphagate.bench.config import BenchConfig, Level
from alphagate.bench.dataset import Prompt
from alphagate.bench.limits import FaultLimits
from alphagate.bench.records import LevelSummary, RequestRecord, merge_runs, summarize_level
from alphagate.bench.request import Ask, RequestSender
from alphagate.bench.server import LevelAcceptance, ServerReader
from alphagate.bench.sink import RecordSink
from alphagate.bench.sweep import KneeSweep
from alphagate.bench.validity import LoopLag, RunValidity, run_validity, twin_lag
from alphagate.core.secrets import redact_url
from alphagate.net.client import StreamClient
from alphagate.net.transport import Transport
from alphagate.sim.workload import arrival_times

__all__ = ["BenchRunner", "LevelPool"]


class LevelPool(Protocol):
    """Sends a level's requests from other processes and hands each record back through
    :meth:`BenchRunner.take` (:class:`alphagate.bench.workers.WorkerPool`)."""

    async def run_level(self, runner: BenchRunner, target: str, url: str, level: Level) -> None:
        """One level against ``url``, returned when its requests have all finished."""


class BenchRunner:
    """Runs every level against every target (alternating targets per level), or a sweep's knee
    search; every level is summarised (with goodput under the config's SLO).

    ``transport``: what every request goes through (None: an llhttp client made in the loop that
    sends, closed by :meth:`aclose`; one given is the caller's to close)."""

    def __init__(
        self,
        cfg: BenchConfig,
        prompts: list[Prompt],
        *,
        sink: Callable[[RequestRecord], None] | None = None,
        on_record: Callable[[RequestRecord], None] | None = None,
        run_id: str = "run",
        pool: LevelPool | None = None,
        t0: float | None = None,
        transport: Transport | None = None,
    ) -> None:
        self.cfg = cfg
        self.pool = pool  # None: requests go from this process
        self.run_id = run_id
        self.prompts = prompts
        self._t0 = time.perf_counter() if t0 is None else t0  # the run's start (perf_counter)
        self.limits = FaultLimits(cfg, self._t0)
        self.sink = RecordSink(self.limits, sink, on_record)
        self.server = ServerReader(cfg)
        self.levels: list[LevelSummary] = []  # summaries of the levels that finished
        self.model: str | None = cfg.model
        self.model_root: str | None = None
        self.levels_run: dict[str, Level] = {}  # every level started, by label, in order
        self.knees = (
            None if cfg.sweep is None else KneeSweep(cfg.sweep, [n for n, _ in cfg.targets])
        )
        self.sender = RequestSender(cfg, run_id=run_id, t0=self._t0)
        self._given = transport
        self._http: Transport | None = transport
        self.repeat = 0  # the run of the current level (--repeats)
        #: the completed runs of each (target, level), merged into one summary when it ends
        self._runs: dict[tuple[str, str], list[LevelSummary]] = {}

    # ---------------------------------------------------------------- the collaborators' state
    @property
    def records(self) -> list[RequestRecord]:
        """Every finished request of the run, in the order they finished."""
        return self.sink.records

    @property
    def stop_reason(self) -> str | None:
        """Why a limit ended the run early (None: it did not)."""
        return self.limits.reason

    @property
    def metrics_problems(self) -> list[str]:
        """Levels whose /metrics counters could not be used, and why."""
        return self.server.problems

    def new_id(self) -> int:
        """The next request number of the run (records are numbered as they finish)."""
        return self.sink.new_id()

    def stop(self, reason: str) -> None:
        """Send no more requests; the first reason given is kept."""
        self.limits.stop(reason)

    @property
    def stopping(self) -> bool:
        return self.limits.stopping

    def take(self, rec: RequestRecord) -> None:
        """A finished request, from this process or a worker: kept, counted against the limits,
        handed to ``sink`` and ``on_record``."""
        self.sink.take(rec)

    # ---------------------------------------------------------------- run
    async def run(self) -> list[LevelSummary]:
        """Every level against every target, in order; each summary lands in ``self.levels``.

        A limit (``max_errors``, ``max_error_rate``, ``max_duration_s``) stops the run cleanly:
        no new request is sent, requests in flight finish, and ``stop_reason`` says why.
        """
        try:
            if self.knees is not None:
                await self.knees.run(self._sweep_level)
                return self.levels
            for level in self.cfg.levels:
                for r in range(self.cfg.repeats):
                    self.repeat = r
                    order = self.cfg.targets if r % 2 == 0 else self.cfg.targets[::-1]
                    for name, url in order:
                        if self.stopping:
                            self._close_level(level)
                            return self.levels
                        run = await self.run_level(name, url, level)
                        self._runs.setdefault((name, level.label), []).append(run)
                self._close_level(level)
            return self.levels
        finally:
            await self.aclose()

    async def aclose(self) -> None:
        """Close the connections of the runner's own client (:meth:`run` does; call it after
        using :meth:`one` directly)."""
        http, self._http = self._http, self._given
        if http is not None and http is not self._given:
            await http.aclose()

    def sweep_level(self, load: float) -> Level:
        """The level a sweep runs at ``load``: a closed loop sends at least two requests per
        user (``max(num_prompts, 2 × concurrency)``); an open loop sends ``num_prompts``."""
        sweep = self.cfg.sweep
        assert sweep is not None
        if sweep.kind == "concurrency":
            c = int(load)
            return Level(
                label=sweep.label(load), concurrency=c, requests=max(self.cfg.num_prompts, 2 * c)
            )
        return Level(label=sweep.label(load), rate=load, requests=self.cfg.num_prompts)

    async def _sweep_level(self, target: str, load: float) -> bool | None:
        if self.stopping:
            return None
        summary = await self.run_level(
            target, dict(self.cfg.targets)[target], self.sweep_level(load)
        )
        self.levels.append(summary)
        if self.stop_reason is not None or summary.goodput is None:
            return None  # cut short: its outcome does not count
        return summary.goodput.meets_slo

    def _close_level(self, level: Level) -> None:
        """The level's runs, one merged summary per target (in the targets' order)."""
        for name, _ in self.cfg.targets:
            runs = self._runs.pop((name, level.label), None)
            if runs:
                self.levels.append(
                    merge_runs(runs, self.sink.of(name, level.label), slo=self.cfg.slo)
                )

    def unfinished_levels(self) -> list[LevelSummary]:
        """Summaries of levels that started but did not finish (an interrupted run): the runs of
        the level that completed, and the records of the one that did not."""
        done = {(lv.target, lv.level) for lv in self.levels}
        out = []
        for level in self.levels_run.values():
            for name, url in self.cfg.targets:
                recs = self.sink.of(name, level.label)
                if recs and (name, level.label) not in done:
                    runs = list(self._runs.get((name, level.label), []))
                    finished = {r.repeat for run in runs for r in run.runs}
                    partial = [r for r in recs if r.repeat not in finished]
                    if partial:
                        runs.append(
                            self._summary(name, url, level, partial, repeat=partial[0].repeat)
                        )
                    out.append(merge_runs(runs, recs, slo=self.cfg.slo))
        return out

    def _summary(
        self,
        target: str,
        url: str,
        level: Level,
        recs: list[RequestRecord],
        read: LevelAcceptance = LevelAcceptance(None, None),
        *,
        repeat: int = 0,
        validity: RunValidity | None = None,
    ) -> LevelSummary:
        return summarize_level(
            target,
            redact_url(url),
            level.label,
            level.concurrency,
            level.rate,
            recs,
            read.acceptance,
            slo=self.cfg.slo,
            time_scale=level.time_scale,
            repeat=repeat,
            validity=validity,
            acceptance_problem=read.problem,
            speculating=read.speculating,
        )

    # ---------------------------------------------------------------- one level
    async def run_level(self, target: str, url: str, level: Level) -> LevelSummary:
        """One run of ``level`` against ``target``: the counters read around it, its records
        summarised with what distorted it."""
        self.levels_run.setdefault(level.label, level)
        await self._discover_model(url)
        self.limits.new_level()
        urls = self.server.metrics_urls(url)
        http = self._transport()
        before = await self.server.counters(http, urls) if self.cfg.scrape_metrics else None
        start = len(self.records)
        lag = LoopLag.start() if self.pool is None else None
        await self._send_level(target, url, level)
        lag_ms = None if lag is None else lag.stop()
        recs = self.records[start:]
        after = None if before is None else await self.server.counters(http, urls)
        read = LevelAcceptance(None, None)
        if before is not None:
            read = self.server.acceptance(before, after, where=f"{target} {level.label}", urls=urls)
        server_lag = None if before is None or after is None else twin_lag(before, after)
        validity = run_validity(recs, lag_ms, server_lag, workers=self.pool is not None)
        return self._summary(target, url, level, recs, read, repeat=self.repeat, validity=validity)

    async def _discover_model(self, url: str) -> None:
        """The model name to send (the first one the server lists) and the checkpoint behind
        it; with ``--model`` given, only the checkpoint, once."""
        if self.model is None:
            self.model, self.model_root = await self.server.model(self._transport(), url)
        elif self.model_root is None and self.levels == []:
            self.model_root = (await self.server.model(self._transport(), url)).root

    async def _send_level(self, target: str, url: str, level: Level) -> None:
        if self.pool is not None:
            await self.pool.run_level(self, target, url, level)
        elif level.rate is not None or level.time_scale is not None:
            indices, times = self.timed_work(level)
            await self.open_loop(
                target, url, level, indices, times, level.concurrency, time.perf_counter()
            )
        else:
            n = level.requests or len(self.prompts)
            await self.closed_loop(
                target, url, level, range(n), level.concurrency or 1, time.perf_counter()
            )

    def _transport(self) -> Transport:
        if self._http is None:
            self._http = StreamClient(connect_timeout_s=self.cfg.timeout_s)
        return self._http

    # ---------------------------------------------------------------- load shapes
    def _schedule(self, level: Level) -> list[float]:
        """Send times (s after the level starts): the trace's, scaled, or gamma arrivals."""
        n = level.requests or len(self.prompts)
        if level.time_scale is not None:
            return [
                (self.prompts[i % len(self.prompts)].arrival_s or 0.0) * level.time_scale
                for i in range(n)
            ]
        assert level.rate is not None
        rng = np.random.default_rng(self.cfg.seed)
        return [float(t) for t in arrival_times(rng, n, level.rate, self.cfg.burstiness)]

    def timed_work(self, level: Level) -> tuple[list[int], list[float]]:
        """An open loop's requests and their send times (s after the level starts), drawn once:
        those within ``duration_s``."""
        times = self._schedule(level)
        if self.cfg.duration_s is not None:
            end = next((i for i, t in enumerate(times) if t > self.cfg.duration_s), len(times))
            times = times[:end]
        return list(range(len(times))), times

    async def closed_loop(
        self,
        target: str,
        url: str,
        level: Level,
        indices: Iterable[int],
        users: int,
        start: float,
    ) -> None:
        """``users`` users, each sending the next of ``indices`` when its last request ends;
        ``duration_s`` counts from ``start`` (perf_counter)."""
        work = iter(indices)
        n = len(self.prompts)
        deadline = None if self.cfg.duration_s is None else start + self.cfg.duration_s

        async def user() -> None:
            for i in work:
                if self.stopping or (deadline is not None and time.perf_counter() > deadline):
                    return
                await self._request(target, url, level, i, self.prompts[i % n])

        await asyncio.gather(*(user() for _ in range(users)))

    async def open_loop(
        self,
        target: str,
        url: str,
        level: Level,
        indices: Sequence[int],
        times: Sequence[float],
        cap: int | None,
        start: float,
    ) -> None:
        """Send request ``indices[j]`` at ``start + times[j]`` (perf_counter), at most ``cap`` in
        flight."""
        sem = asyncio.Semaphore(cap) if cap else None
        n = len(self.prompts)
        tasks = []
        end = self.limits.end
        for i, t in zip(indices, times, strict=True):
            if start + t > end:  # due after --max-duration: not waited for (a far-off send)
                await _sleep_until(end)
                self.limits.out_of_time()
            else:
                await _sleep_until(start + t)
            if self.stopping:
                break
            due = start + t - self._t0
            p = self.prompts[i % n]
            tasks.append(asyncio.create_task(self._bounded(sem, target, url, level, i, p, due)))
        await asyncio.gather(*tasks)

    async def _bounded(
        self,
        sem: asyncio.Semaphore | None,
        target: str,
        url: str,
        level: Level,
        i: int,
        p: Prompt,
        due: float,
    ) -> None:
        if sem is None:
            await self._request(target, url, level, i, p, due)
            return
        async with sem:
            await self._request(target, url, level, i, p, due)

    # ---------------------------------------------------------------- one request
    async def _request(
        self, target: str, url: str, level: Level, index: int, p: Prompt, due: float | None = None
    ) -> None:
        self.take(await self.one(target, url, level.label, index, p, scheduled_s=due))

    async def one(
        self,
        target: str,
        url: str,
        level: str,
        index: int,
        p: Prompt,
        *,
        scheduled_s: float | None = None,
    ) -> RequestRecord:
        """Send one streamed request and measure it; failures come back as records, not raises."""
        ask = Ask(target, url, level, index, p, scheduled_s)
        return await self.sender.one(
            self._transport(), ask, model=self.model, repeat=self.repeat, new_id=self.new_id
        )


#: the event loop's timers wake up to ~1 ms late (epoll rounds its timeout up to whole ms), so
#: an open-loop send sleeps until this long before its time and yields to the loop for the rest:
#: the median send lag falls from ~0.7 ms to ~0.03 ms for ~0.35 ms of client CPU per request
_SPIN_S = 0.001


async def _sleep_until(t: float) -> None:
    """Wait until ``time.perf_counter()`` reaches ``t``, to well under a millisecond."""
    delay = t - time.perf_counter()
    if delay > _SPIN_S:
        await asyncio.sleep(delay - _SPIN_S)
    while time.perf_counter() < t:
        await asyncio.sleep(0)
