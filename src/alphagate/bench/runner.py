"""The load generator: closed-loop concurrency levels or scheduled open-loop arrivals, streamed.

Server faults are data: HTTP errors, refused connections, streams that end without ``[DONE]``,
stalls past the timeout and malformed SSE each become a typed failure record; the run goes on.
Each finished request is handed to ``sink`` at once (the CLI appends it to ``requests.jsonl``), so
an interrupted run loses nothing that completed. The HTTP session is injected (tests may pass
their own); time is ``time.perf_counter``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Callable, Iterator
from typing import Any, ClassVar, Literal

import aiohttp
import numpy as np
import orjson
from pydantic import Field, SecretStr

from alphagate.bench.dataset import Prompt
from alphagate.bench.records import LevelSummary, RequestRecord, summarize_level
from alphagate.bench.sse import SSEParser
from alphagate.core.records import Frozen
from alphagate.measure.prom import SpecAcceptance, SpecCounters, parse_spec_counters, spec_delta
from alphagate.sim.workload import arrival_times

__all__ = ["BenchConfig", "BenchRunner", "Level"]


class Level(Frozen):
    """One load level: closed-loop ``concurrency``, or open-loop ``rate`` (capped by concurrency)."""

    label: str
    concurrency: int | None = Field(default=None, ge=1)
    rate: float | None = Field(default=None, gt=0, allow_inf_nan=False)


class BenchConfig(Frozen):
    """One bench run: targets, load levels, request shape and fault limits."""

    targets: tuple[tuple[str, str], ...]  # (name, base URL): ("default", u) or baseline + candidate
    endpoint: Literal["completions", "chat"] = "completions"
    model: str | None = None
    api_key: SecretStr | None = Field(default=None, exclude=True)
    headers: dict[str, str] = Field(default_factory=dict)
    levels: tuple[Level, ...]
    num_prompts: int = Field(default=200, ge=1)
    duration_s: float | None = Field(default=None, gt=0)
    burstiness: float = Field(default=1.0, gt=0)
    warmup: int = Field(default=0, ge=0)
    seed: int = 0
    timeout_s: float = Field(default=60.0, gt=0)
    metrics_urls: tuple[str, ...] | None = None  # None: <target>/metrics
    scrape_metrics: bool = True
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    send_class: bool = True
    max_errors: int | None = Field(default=None, ge=1, description="stop the run after N failures")
    max_error_rate: float | None = Field(
        default=None, ge=0.0, le=1.0, description="stop when failures ÷ requests exceed this"
    )
    max_duration_s: float | None = Field(
        default=None,
        gt=0,
        allow_inf_nan=False,
        description="stop sending after this many seconds in all",
    )

    #: requests a level must have finished before the error rate can stop it
    MIN_REQUESTS_FOR_RATE: ClassVar[int] = 20


def _headers(cfg: BenchConfig) -> dict[str, str]:
    h = dict(cfg.headers)
    if cfg.api_key is not None:
        h["Authorization"] = f"Bearer {cfg.api_key.get_secret_value()}"
    return h


class BenchRunner:
    """Runs every level against every target (alternating targets per level)."""

    def __init__(
        self,
        cfg: BenchConfig,
        prompts: list[Prompt],
        session: aiohttp.ClientSession,
        *,
        sink: Callable[[RequestRecord], None] | None = None,
        on_record: Callable[[RequestRecord], None] | None = None,
        run_id: str = "run",
    ) -> None:
        self.cfg = cfg
        self.run_id = run_id
        self.prompts = prompts
        self.session = session
        self.sink = sink
        self.on_record = on_record
        self._ids = itertools.count()
        self.records: list[RequestRecord] = []
        self.levels: list[LevelSummary] = []  # summaries of the levels that finished
        self.stop_reason: str | None = None  # set when a limit ends the run early
        self.model: str | None = cfg.model
        self._t0 = time.perf_counter()
        self._errors = 0
        self._level_n = self._level_err = 0

    # ---------------------------------------------------------------- run
    async def run(self) -> list[LevelSummary]:
        """Every level against every target, in order; each summary lands in ``self.levels``.

        A limit (``max_errors``, ``max_error_rate``, ``max_duration_s``) stops the run cleanly:
        no new request is sent, requests in flight finish, and ``stop_reason`` says why.
        """
        for level in self.cfg.levels:
            for name, url in self.cfg.targets:
                if self.stop_reason is not None:
                    return self.levels
                self.levels.append(await self.run_level(name, url, level))
        return self.levels

    def stop(self, reason: str) -> None:
        """Send no more requests; the first reason given is kept."""
        if self.stop_reason is None:
            self.stop_reason = reason

    @property
    def stopping(self) -> bool:
        limit = self.cfg.max_duration_s
        if (
            self.stop_reason is None
            and limit is not None
            and time.perf_counter() - self._t0 > limit
        ):
            self.stop(f"max duration {limit:g} s reached")
        return self.stop_reason is not None

    def _check_limits(self, rec: RequestRecord, level_records: int, level_errors: int) -> None:
        cfg = self.cfg
        if rec.ok:
            return
        self._errors += 1
        if cfg.max_errors is not None and self._errors >= cfg.max_errors:
            self.stop(f"{self._errors} failed requests (--max-errors {cfg.max_errors})")
        if (
            cfg.max_error_rate is not None
            and level_records >= cfg.MIN_REQUESTS_FOR_RATE
            and level_errors / level_records > cfg.max_error_rate
        ):
            self.stop(
                f"error rate {level_errors}/{level_records} above --max-error-rate {cfg.max_error_rate:g}"
            )

    def unfinished_levels(self) -> list[LevelSummary]:
        """Summaries of levels that started but did not finish (an interrupted run)."""
        done = {(lv.target, lv.level) for lv in self.levels}
        out = []
        for level in self.cfg.levels:
            for name, url in self.cfg.targets:
                recs = [r for r in self.records if r.target == name and r.level == level.label]
                if recs and (name, level.label) not in done:
                    out.append(
                        summarize_level(
                            name, url, level.label, level.concurrency, level.rate, recs, None
                        )
                    )
        return out

    async def run_level(self, target: str, url: str, level: Level) -> LevelSummary:
        if self.model is None:
            self.model = await self._first_model(url)
        self._level_n = self._level_err = 0
        metrics_urls = list(self.cfg.metrics_urls or (url.rstrip("/") + "/metrics",))
        before = await self._scrape(metrics_urls) if self.cfg.scrape_metrics else None
        start = len(self.records)
        if level.rate is not None:
            await self._open_loop(target, url, level)
        else:
            await self._closed_loop(target, url, level)
        recs = self.records[start:]
        acceptance: SpecAcceptance | None = None
        if before is not None:
            after = await self._scrape(metrics_urls)
            if after is not None and any(c.present for c in after) and len(after) == len(before):
                acceptance = spec_delta(before, after)
        return summarize_level(
            target, url, level.label, level.concurrency, level.rate, recs, acceptance
        )

    async def _first_model(self, url: str) -> str | None:
        try:
            async with self.session.get(
                url.rstrip("/") + "/v1/models", headers=_headers(self.cfg)
            ) as resp:
                data = await resp.json()
                return str(data["data"][0]["id"])
        except (aiohttp.ClientError, KeyError, IndexError, ValueError, asyncio.TimeoutError):
            return None

    async def _scrape(self, urls: list[str]) -> list[SpecCounters] | None:
        out = []
        for u in urls:
            try:
                async with self.session.get(u, headers=_headers(self.cfg)) as resp:
                    if resp.status != 200:
                        return None
                    out.append(parse_spec_counters(await resp.text()))
            except (aiohttp.ClientError, asyncio.TimeoutError, ValueError):
                return None
        return out

    # ---------------------------------------------------------------- load shapes
    def _work(self) -> Iterator[tuple[int, Prompt]]:
        return iter(enumerate(self.prompts))

    async def _closed_loop(self, target: str, url: str, level: Level) -> None:
        work = self._work()
        deadline = (
            None if self.cfg.duration_s is None else time.perf_counter() + self.cfg.duration_s
        )

        async def worker() -> None:
            for i, p in work:
                if self.stopping or (deadline is not None and time.perf_counter() > deadline):
                    return
                await self._request(target, url, level, i, p)

        await asyncio.gather(*(worker() for _ in range(level.concurrency or 1)))

    async def _open_loop(self, target: str, url: str, level: Level) -> None:
        assert level.rate is not None
        rng = np.random.default_rng(self.cfg.seed)
        schedule = arrival_times(rng, len(self.prompts), level.rate, self.cfg.burstiness)
        sem = asyncio.Semaphore(level.concurrency) if level.concurrency else None
        start = time.perf_counter()
        tasks = []
        for (i, p), t in zip(self._work(), schedule, strict=True):
            if self.cfg.duration_s is not None and t > self.cfg.duration_s:
                break
            delay = start + t - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            if self.stopping:
                break
            tasks.append(asyncio.create_task(self._bounded(sem, target, url, level, i, p)))
        await asyncio.gather(*tasks)

    async def _bounded(
        self, sem: asyncio.Semaphore | None, target: str, url: str, level: Level, i: int, p: Prompt
    ) -> None:
        if sem is None:
            await self._request(target, url, level, i, p)
            return
        async with sem:
            await self._request(target, url, level, i, p)

    # ---------------------------------------------------------------- one request
    def _payload(self, p: Prompt) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True},
            "temperature": self.cfg.temperature,
        }
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
        return body

    async def _request(self, target: str, url: str, level: Level, index: int, p: Prompt) -> None:
        rec = await self.one(target, url, level.label, index, p)
        self.records.append(rec)
        self._level_n += 1
        self._level_err += 0 if rec.ok else 1
        self._check_limits(rec, self._level_n, self._level_err)
        if self.sink is not None:
            try:
                self.sink(rec)
            except OSError as exc:  # a full disk: keep what was written, stop cleanly
                self.stop(f"cannot write the records file: {exc.strerror or exc}")
        if self.on_record is not None:
            self.on_record(rec)

    async def one(self, target: str, url: str, level: str, index: int, p: Prompt) -> RequestRecord:
        """Send one streamed request and measure it; failures come back as records, not raises."""
        path = "/v1/chat/completions" if self.cfg.endpoint == "chat" else "/v1/completions"
        state = _Stream()
        send = time.perf_counter()
        err: tuple[str, str] | None = None
        # stall watchdog: one timer per timeout period rather than one per read (aiohttp's
        # sock_read arms a timer for every chunk, which costs ~5% of the client's CPU)
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        limit = self.cfg.timeout_s
        stalled = False
        last_io = loop.time()
        handle: asyncio.TimerHandle | None = None

        def watchdog() -> None:
            nonlocal handle, stalled
            idle = loop.time() - last_io
            if idle >= limit and task is not None:
                stalled = True
                task.cancel()
            else:
                handle = loop.call_later(limit - idle, watchdog)

        handle = loop.call_later(limit, watchdog)
        try:
            timeout = aiohttp.ClientTimeout(total=None, sock_connect=limit)
            async with self.session.post(
                url.rstrip("/") + path,
                json=self._payload(p),
                headers=_headers(self.cfg),
                timeout=timeout,
            ) as resp:
                if resp.status >= 400:
                    body = (await resp.text())[:500]
                    err = (f"http_{resp.status}", _error_message(body))
                else:
                    parser = SSEParser()
                    async for data in resp.content.iter_any():
                        last_io = loop.time()
                        now = time.perf_counter() - send
                        for ev in parser.feed(data):
                            problem = state.event(ev.data, now)
                            if problem is not None:
                                err = problem
                                break
                        if err is not None or state.done:
                            break
                    if err is None and not state.done:
                        err = ("stream_truncated", "the stream ended without [DONE]")
        except asyncio.CancelledError:
            if not stalled:
                raise
            if task is not None and hasattr(task, "uncancel"):
                task.uncancel()
            err = ("stall_timeout", f"no data for {limit:g} s")
        except (aiohttp.ServerTimeoutError, asyncio.TimeoutError):
            err = ("stall_timeout", f"no data for {limit:g} s")
        except aiohttp.ClientConnectorError as exc:
            err = ("connection_refused", str(exc))
        except aiohttp.ClientPayloadError as exc:
            err = ("stream_truncated", str(exc))
        except aiohttp.ClientError as exc:
            err = ("client_error", f"{type(exc).__name__}: {exc}")
        finally:
            handle.cancel()
        tokens, source = state.chunk_tokens()
        end = state.last_s
        return RequestRecord(
            run_id=self.run_id,
            id=next(self._ids),
            target=target,
            level=level,
            cls=p.cls,
            prompt_tokens=state.prompt_tokens,
            output_tokens=state.output_tokens,
            send_s=send - self._t0,
            ttft_s=state.times[0] if state.times else None,
            chunk_times_s=state.times,
            chunk_tokens=tokens,
            tokens_per_chunk_source=source,
            e2e_s=end,
            error_type=None if err is None else err[0],
            error_message=None if err is None else err[1],
            warmup=index < self.cfg.warmup,
        )


def _error_message(body: str) -> str:
    try:
        obj = json.loads(body)
        if isinstance(obj, dict):
            e = obj.get("error", obj)
            if isinstance(e, dict) and "message" in e:
                return str(e["message"])
    except json.JSONDecodeError:
        pass
    return body


class _Stream:
    """Accumulates one SSE stream: chunk times, text sizes, usage."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self.sizes: list[int] = []  # characters per chunk, for apportioning tokens without usage
        self.cum_usage: list[int | None] = []
        self.prompt_tokens: int | None = None
        self.output_tokens: int | None = None
        self.done = False
        self.last_s: float | None = None

    def event(self, data: str, now: float) -> tuple[str, str] | None:
        if data == "[DONE]" or data.strip() == "[DONE]":
            self.done = True
            return None
        try:
            obj = orjson.loads(data)  # the hot path: one parse per streamed chunk
        except orjson.JSONDecodeError:
            return ("malformed_sse", f"not JSON: {data[:80]!r}")
        if type(obj) is not dict:
            return ("malformed_sse", f"not a JSON object: {data[:80]!r}")
        if "error" in obj:
            return ("server_error", _error_message(data))
        usage = obj.get("usage")
        choices = obj.get("choices")
        if choices:
            c0 = choices[0]
            text = c0.get("text")
            if text is None:
                delta = c0.get("delta")
                text = delta.get("content") if delta else None
            if text:
                self.times.append(now)
                self.last_s = now
                self.sizes.append(len(text))
                self.cum_usage.append(usage["completion_tokens"] if usage else None)
        if usage:
            self.prompt_tokens = usage.get("prompt_tokens", self.prompt_tokens)
            self.output_tokens = usage.get("completion_tokens", self.output_tokens)
        return None

    def chunk_tokens(self) -> tuple[list[int], str]:
        """Tokens per chunk: from continuous usage when the server sends it, else apportioned."""
        if self.cum_usage and all(u is not None for u in self.cum_usage):
            cum = [int(u) for u in self.cum_usage if u is not None]
            return [cum[0], *(b - a for a, b in itertools.pairwise(cum))], "usage"
        if not self.sizes:
            return [], "none"
        w = np.maximum(np.asarray(self.sizes, dtype=np.float64), 1.0)
        total = self.output_tokens or len(w)
        share = np.floor(w / w.sum() * total).astype(int)
        share[np.argsort(-(w / w.sum() * total - share))[: int(total - share.sum())]] += 1
        return [int(x) for x in share], "apportioned"
