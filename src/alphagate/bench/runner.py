"""The load generator's run loop: closed-loop concurrency levels, scheduled open-loop arrivals
(gamma gaps or a replayed trace), or the knee search of a sweep (:mod:`alphagate.bench.sweep`),
streamed.

Server faults are data: HTTP errors, refused connections, streams that end without ``[DONE]``,
stalls past the timeout, requests past their total deadline (a server that trickles bytes never
stalls), redirects, whole JSON bodies and empty streams where a stream was asked for, and
malformed SSE each become a typed failure record; the run goes on. The runner keeps the loop and
hands the rest to one collaborator each: the fault limits (:class:`~alphagate.bench.limits.
FaultLimits`), the finished records (:class:`~alphagate.bench.sink.RecordSink`: each handed to
the caller's ``sink`` at once, so an interrupted run loses nothing that completed), and what is
read from the servers besides the streams (:class:`~alphagate.bench.server.ServerReader`:
``/v1/models``, ``/metrics`` around each level). Every request goes through one transport
(:mod:`alphagate.net`: the llhttp client, whose docstring says why not aiohttp; a test passes a
``MockTransport``); time is ``time.perf_counter``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal, Protocol

import numpy as np
import orjson

from alphagate.bench.config import BenchConfig, Level
from alphagate.bench.dataset import Prompt
from alphagate.bench.limits import FaultLimits
from alphagate.bench.records import (
    LevelSummary,
    RequestRecord,
    RequestText,
    merge_runs,
    spec_of,
    summarize_level,
)
from alphagate.bench.replies import ReplyStream, error_message
from alphagate.bench.server import LevelAcceptance, ServerReader, bench_headers
from alphagate.bench.sink import RecordSink
from alphagate.bench.sse import EventTooLong, SSEParser
from alphagate.bench.sweep import KneeSweep
from alphagate.bench.validity import LoopLag, RunValidity, run_validity, twin_lag
from alphagate.core.secrets import join_path, redact_url
from alphagate.net.client import StreamClient
from alphagate.net.transport import (
    ConnectError,
    Endpoint,
    ProtocolError,
    Reply,
    StreamTruncated,
    Transport,
    endpoint,
)
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
        self._given = transport
        self._http: Transport | None = transport
        self._endpoints: dict[str, Endpoint] = {}
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
    def _payload(self, p: Prompt) -> dict[str, Any]:
        body: dict[str, Any] = {
            "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True},
            "temperature": self.cfg.temperature,
        }
        if self.model is not None:
            body["model"] = self.model
        if self.cfg.endpoint == "chat":
            body["messages"] = (
                p.messages
                if p.messages is not None
                else [{"role": "user", "content": p.prompt or ""}]
            )
        else:
            body["prompt"] = p.prompt if p.prompt is not None else p.as_text()
        if p.max_tokens is not None:
            body["max_tokens"] = p.max_tokens
        if p.ignore_eos:
            body["ignore_eos"] = True
        if p.cls is not None and self.cfg.send_class:
            body["alphagate_class"] = p.cls
        if self.cfg.save_text:
            body["return_token_ids"] = True  # vLLM's extension; other servers ignore it
        return body

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
        state = ReplyStream(
            time.time() if self.cfg.probe_send_time else None, keep_text=self.cfg.save_text
        )
        send = time.perf_counter()
        err = await self._send(url, p, state, send)
        tokens, source = state.chunk_tokens()
        spec, spec_problem = spec_of(state.spec)
        return RequestRecord(
            run_id=self.run_id,
            id=self.new_id(),
            target=target,
            level=level,
            cls=p.cls,
            prompt_tokens=state.prompt_tokens,
            output_tokens=state.output_tokens,
            send_s=send - self._t0,
            scheduled_s=scheduled_s,
            ttft_s=state.times[0] if state.times else None,
            chunk_times_s=state.times,
            chunk_tokens=tokens,
            tokens_per_chunk_source=source,
            e2e_s=state.last_s,
            error_type=None if err is None else err[0],
            error_message=None if err is None else err[1],
            warmup=index < self.cfg.warmup,
            repeat=self.repeat,
            spec=spec,
            spec_problem=spec_problem,
            delivery_s=state.delivery if self.cfg.probe_send_time else None,
            text=None if state.kept is None else _saved_text(self._payload(p), state.kept),
        )

    async def _send(
        self, url: str, p: Prompt, state: ReplyStream, send: float
    ) -> tuple[str, str] | None:
        """The exchange under its watchdog; every way it can fail as (error type, message)."""
        deadline = self.cfg.request_deadline_s(p.max_tokens)
        watchdog = _Watchdog(self.cfg.timeout_s, deadline)
        try:
            return await self._exchange(url, p, state, send, watchdog)
        except asyncio.CancelledError:
            if watchdog.fired is None:
                raise
            watchdog.uncancel()
            if watchdog.fired == "stall":
                return ("stall_timeout", f"no data for {self.cfg.timeout_s:g} s")
            return (
                "request_timeout",
                f"not finished after {deadline:g} s in all (--request-timeout; data kept "
                f"coming, each gap under the {self.cfg.timeout_s:g} s stall timeout)",
            )
        except ValueError as exc:  # a header HTTP cannot carry (the CLI refuses it before)
            return ("client_error", str(exc))
        except ConnectError as exc:
            return ("connection_refused", str(exc))
        except StreamTruncated as exc:
            return ("stream_truncated", str(exc))
        except ProtocolError as exc:
            return ("client_error", f"the server's reply is not HTTP/1.1: {exc}")
        except OSError as exc:  # the connection failed mid-exchange (reset, broken pipe)
            return ("stream_truncated", f"{type(exc).__name__}: {exc}")
        finally:
            watchdog.stop()

    async def _exchange(
        self, url: str, p: Prompt, state: ReplyStream, send: float, watchdog: _Watchdog
    ) -> tuple[str, str] | None:
        """POST the request and read its stream into ``state``; returns a failure or None."""
        ep = self._endpoints.get(url)
        if ep is None:
            path = "/v1/chat/completions" if self.cfg.endpoint == "chat" else "/v1/completions"
            headers = {**bench_headers(self.cfg), "Content-Type": "application/json"}
            ep = self._endpoints[url] = endpoint(join_path(url, path), headers)
        payloads, event = SSEParser().payloads, state.event
        problems: list[tuple[str, str]] = []
        received = 0  # body bytes read

        def sink(data: bytes, t: float) -> bool:
            # one network read, stamped once (several events per read under load)
            nonlocal received
            watchdog.last = t
            received += len(data)
            now = t - send
            try:
                events = payloads(data)
            except EventTooLong as exc:  # a line or event that never ends: not a stream
                problems.append(("malformed_sse", str(exc)))
                return True
            for payload in events:
                problem = event(payload, now)
                if problem is not None:
                    problems.append(problem)
                    return True
            return state.done

        try:
            body = orjson.dumps(self._payload(p))
        except TypeError as exc:  # not text (a lone surrogate): the dataset loader refuses it
            return ("client_error", f"the request cannot be sent as JSON: {exc}")
        reply = await self._transport().request(ep, body, sink)
        return _outcome(reply, problems, state, received, ep)


def _outcome(
    reply: Reply, problems: list[tuple[str, str]], state: ReplyStream, received: int, ep: Endpoint
) -> tuple[str, str] | None:
    """What a finished exchange was: None for a whole stream, else (error type, message)."""
    status = reply.status
    if 300 <= status < 400:
        where = ep.secrets.redact(reply.location) if reply.location else "no Location given"
        return (
            f"http_{status}",
            f"redirected to {where} (HTTP {status}): the bench does not follow redirects; "
            "give the URL it points to",
        )
    if status >= 400:
        text = reply.body.decode("utf-8", "replace")
        return (f"http_{status}", error_message(text[:2000]))
    if reply.whole_json:
        said = ep.secrets.redact(error_message(reply.body.decode("utf-8", "replace")[:2000]))
        return (
            "not_a_stream",
            f"the server answered {status} with a JSON body, not a stream (does it ignore "
            f'"stream": true?): {said[:200]}',
        )
    if problems:
        return problems[0]
    if state.done:
        if state.events == 0:
            return (
                "empty_stream",
                "the stream ended with [DONE] before any chunk: nothing streamed",
            )
        return None
    if received == 0:
        return ("empty_stream", f"the server answered {status} with an empty body: no SSE event")
    return ("stream_truncated", "the stream ended without [DONE]")


#: the event loop's timers wake up to ~1 ms late (epoll rounds its timeout up to whole ms), so
#: an open-loop send sleeps until this long before its time and yields to the loop for the rest:
#: the median send lag falls from ~0.7 ms to ~0.03 ms for ~0.35 ms of client CPU per request
_SPIN_S = 0.001


def _saved_text(body: dict[str, Any], kept: dict[str, Any]) -> RequestText:
    """``--save-text``: the request as sent and the output as streamed."""
    return RequestText(
        prompt=body.get("prompt"),
        messages=body.get("messages"),
        prompt_token_ids=kept["prompt_ids"],
        output="".join(kept["text"]),
        output_token_ids=kept["ids"] or None,
        finish_reason=kept["finish"],
        temperature=float(body.get("temperature", 0.0)),
    )


async def _sleep_until(t: float) -> None:
    """Wait until ``time.perf_counter()`` reaches ``t``, to well under a millisecond."""
    delay = t - time.perf_counter()
    if delay > _SPIN_S:
        await asyncio.sleep(delay - _SPIN_S)
    while time.perf_counter() < t:
        await asyncio.sleep(0)


class _Watchdog:
    """Cancels the current task after ``limit`` seconds without data (``fired = "stall"``), or
    ``total`` seconds after it started however the data comes (``fired = "deadline"``: a
    server that sends one byte a second never stalls).

    One timer per timeout period rather than one per read (a timer per chunk cost ~5% of the
    client's CPU when aiohttp's ``sock_read`` armed one). The reader marks each read by setting
    :attr:`last` (``time.perf_counter()``), an attribute store rather than a call.
    """

    def __init__(self, limit: float, total: float) -> None:
        self.limit = limit
        self.fired: Literal["stall", "deadline"] | None = None
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        self.last = time.perf_counter()  # the last read
        self.deadline = self.last + total
        self._handle = self._loop.call_later(min(limit, total), self._check)

    def _check(self) -> None:
        now = time.perf_counter()
        idle = now - self.last
        if self._task is not None and (idle >= self.limit or now >= self.deadline):
            self.fired = "stall" if idle >= self.limit else "deadline"
            self._task.cancel()
        else:
            wait = min(self.limit - idle, self.deadline - now)
            self._handle = self._loop.call_later(max(wait, 0.0), self._check)

    def uncancel(self) -> None:
        if self._task is not None and hasattr(self._task, "uncancel"):
            self._task.uncancel()

    def stop(self) -> None:
        self._handle.cancel()
