"""One request of a bench, sent and measured: a prompt as a streamed completion through a
transport, its stream read into a :class:`~alphagate.bench.records.RequestRecord`.

Server faults are data: HTTP errors, refused connections, streams that end without ``[DONE]``,
stalls past the timeout, requests past their total deadline (a server that trickles bytes never
stalls), redirects, whole JSON bodies and empty streams where a stream was asked for, and
malformed SSE each become a typed failure record. Each network read goes straight from the
transport into the SSE parser, stamped once with ``time.perf_counter``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, Literal, NamedTuple

import orjson

from alphagate.bench.config import BenchConfig
from alphagate.bench.dataset import Prompt
from alphagate.bench.records import RequestRecord, RequestText, spec_of
from alphagate.bench.replies import ReplyStream, error_message
from alphagate.bench.server import bench_headers
from alphagate.bench.sse import EventTooLong, SSEParser
from alphagate.core.secrets import join_path
from alphagate.net.transport import (
    ConnectError,
    Endpoint,
    ProtocolError,
    Reply,
    StreamTruncated,
    Transport,
    endpoint,
)

__all__ = ["Ask", "RequestSender"]

#: (error type, message) of a failed request
Failure = tuple[str, str]


class Ask(NamedTuple):
    """One request of a level: where it goes, which prompt, and when the schedule said to send
    it (open loop and trace replay; seconds after the run started)."""

    target: str
    url: str
    level: str
    nth: int  # the level's n-th request (the first ``warmup`` are warm-up)
    prompt: Prompt
    scheduled_s: float | None = None


class RequestSender:
    """Sends one prompt at a time as a streamed completion and measures it; the request head of
    each URL is prepared once."""

    def __init__(self, cfg: BenchConfig, *, run_id: str, t0: float) -> None:
        self.cfg = cfg
        self.run_id = run_id
        self.t0 = t0  # the run's start (perf_counter)
        self._endpoints: dict[str, Endpoint] = {}

    def payload(self, p: Prompt, model: str | None) -> dict[str, Any]:
        """The JSON body of ``p``'s request: streamed, usage on every chunk."""
        body: dict[str, Any] = {
            "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True},
            "temperature": self.cfg.temperature,
        }
        if model is not None:
            body["model"] = model
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

    async def one(
        self,
        transport: Transport,
        ask: Ask,
        *,
        model: str | None,
        repeat: int,
        new_id: Callable[[], int],
    ) -> RequestRecord:
        """Send ``ask`` through ``transport`` and measure it; a failure comes back as a record,
        not a raise. ``new_id`` numbers the record when it is done."""
        p = ask.prompt
        state = ReplyStream(
            time.time() if self.cfg.probe_send_time else None, keep_text=self.cfg.save_text
        )
        send = time.perf_counter()
        body = self.payload(p, model)
        err = await self._send(transport, ask.url, body, p.max_tokens, state, send)
        tokens, source = state.chunk_tokens()
        spec, spec_problem = spec_of(state.spec)
        return RequestRecord(
            run_id=self.run_id,
            id=new_id(),
            target=ask.target,
            level=ask.level,
            cls=p.cls,
            prompt_tokens=state.prompt_tokens,
            output_tokens=state.output_tokens,
            send_s=send - self.t0,
            scheduled_s=ask.scheduled_s,
            ttft_s=state.times[0] if state.times else None,
            chunk_times_s=state.times,
            chunk_tokens=tokens,
            tokens_per_chunk_source=source,
            e2e_s=state.last_s,
            error_type=None if err is None else err[0],
            error_message=None if err is None else err[1],
            warmup=ask.nth < self.cfg.warmup,
            repeat=repeat,
            spec=spec,
            spec_problem=spec_problem,
            delivery_s=state.delivery if self.cfg.probe_send_time else None,
            text=None if state.kept is None else _saved_text(body, state.kept),
        )

    async def _send(
        self,
        transport: Transport,
        url: str,
        body: dict[str, Any],
        max_tokens: int | None,
        state: ReplyStream,
        send: float,
    ) -> Failure | None:
        """The exchange under its watchdog; every way it can fail as (error type, message)."""
        deadline = self.cfg.request_deadline_s(max_tokens)
        watchdog = _Watchdog(self.cfg.timeout_s, deadline)
        try:
            return await self._exchange(transport, url, body, state, send, watchdog)
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
        self,
        transport: Transport,
        url: str,
        body: dict[str, Any],
        state: ReplyStream,
        send: float,
        watchdog: _Watchdog,
    ) -> Failure | None:
        """POST the request and read its stream into ``state``; returns a failure or None."""
        ep = self._endpoints.get(url)
        if ep is None:
            path = "/v1/chat/completions" if self.cfg.endpoint == "chat" else "/v1/completions"
            headers = {**bench_headers(self.cfg), "Content-Type": "application/json"}
            ep = self._endpoints[url] = endpoint(join_path(url, path), headers)
        payloads, event = SSEParser().payloads, state.event
        problems: list[Failure] = []
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
            data = orjson.dumps(body)
        except TypeError as exc:  # not text (a lone surrogate): the dataset loader refuses it
            return ("client_error", f"the request cannot be sent as JSON: {exc}")
        reply = await transport.request(ep, data, sink)
        return _outcome(reply, problems, state, received, ep)


def _outcome(
    reply: Reply, problems: list[Failure], state: ReplyStream, received: int, ep: Endpoint
) -> Failure | None:
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
