"""The twin's HTTP surface: OpenAI-compatible completions and chat, /v1/models, /health, /metrics.

Errors use the OpenAI shape ``{"error": {"message", "type", "param", "code"}}``: malformed JSON,
JSON nested deeper than :data:`MAX_JSON_DEPTH`, known fields of the wrong type, ``max_tokens``
< 1, a ``seed`` outside a signed 64-bit integer (vLLM's bound; a negative seed is taken modulo
2**64, as torch takes it) → 400; a missing or wrong Bearer key → 401; a body that does not
arrive within ``request_timeout_s`` → 408. Nothing a client sends makes a 500.
A client that disconnects mid-stream is cancelled and its slot freed at the next step.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from alphagate.core.errors import ConfigError
from alphagate.sim.cost import build_cost_model
from alphagate.specs import ResolvedDeployment, resolve_deployment, speculative_kv_slots
from alphagate.twin.config import TwinConfig
from alphagate.twin.engine import Chunk, TwinEngine, TwinRequest
from alphagate.twin.statslog import log_forever

__all__ = ["CONFIG_KEY", "ENGINE_KEY", "create_app", "serve"]

ENGINE_KEY: web.AppKey[TwinEngine] = web.AppKey("engine", TwinEngine)
CONFIG_KEY: web.AppKey[TwinConfig] = web.AppKey("config", TwinConfig)
STATS_LOG_KEY: web.AppKey[asyncio.Task[None]] = web.AppKey("stats_log")


class StreamOptions(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow")
    include_usage: bool = False
    continuous_usage_stats: bool = False


class _Common(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow")
    model: str | None = None
    max_tokens: int | None = Field(default=None, ge=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    top_p: float | None = None
    seed: int | None = Field(default=None, ge=-(2**63), le=2**63 - 1)
    ignore_eos: bool = False
    n: int = Field(default=1, ge=1, le=1)
    alphagate_class: str | None = None


class CompletionBody(_Common):
    prompt: str | list[str] | list[int]


class Message(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow")
    role: str
    content: str | list[Any] | None = None


class ChatBody(_Common):
    messages: list[Message] = Field(min_length=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)


#: the deepest nesting of arrays and objects a request body may have (a chat body needs 4;
#: json.loads would otherwise hit Python's recursion limit near 1,000 and fail with a 500)
MAX_JSON_DEPTH = 64


def _depth_ok(raw: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether no array or object in ``raw`` (JSON) nests deeper than ``limit``, counted on the
    brackets outside strings before anything is parsed (a body with few brackets at once)."""
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return True
    depth = 0
    for b in _BRACKETS.findall(_STRINGS.sub(b"", raw)):
        depth += 1 if b in (b"[", b"{") else -1
        if depth > limit:
            return False
    return True


_STRINGS = re.compile(rb'"(?:[^"\\]|\\.)*"')
_BRACKETS = re.compile(rb"[\[\]{}]")


def _error(status: int, message: str, kind: str, param: str | None = None) -> web.Response:
    body = {"error": {"message": message, "type": kind, "param": param, "code": status}}
    return web.json_response(body, status=status)


def _count_tokens(text: str) -> int:
    """The twin's tokenizer: one token per whitespace-separated word (at least one)."""
    return max(1, len(text.split()))


def _prompt_tokens(body: CompletionBody | ChatBody) -> int:
    if isinstance(body, ChatBody):
        total = 0
        for m in body.messages:
            content = m.content if isinstance(m.content, str) else json.dumps(m.content or "")
            total += _count_tokens(content) + 4  # role and separators, as chat templates add
        return total
    p = body.prompt
    if isinstance(p, str):
        return _count_tokens(p)
    if p and isinstance(p[0], int):
        return len(p)
    return sum(_count_tokens(str(x)) for x in p)


@web.middleware
async def _auth(request: web.Request, handler: Any) -> web.StreamResponse:
    key = request.app[CONFIG_KEY].api_key
    if (
        key
        and request.path.startswith("/v1/")
        and request.headers.get("Authorization", "") != f"Bearer {key}"
    ):
        return _error(401, "invalid or missing API key", "AuthenticationError")
    resp: web.StreamResponse = await handler(request)
    return resp


async def _parse(
    request: web.Request, model: type[CompletionBody] | type[ChatBody]
) -> CompletionBody | ChatBody | web.Response:
    timeout = request.app[CONFIG_KEY].request_timeout_s
    try:
        data = await asyncio.wait_for(request.read(), timeout)
    except TimeoutError:
        return _error(
            408, f"the request body did not arrive within {timeout:g} s", "RequestTimeout"
        )
    if not _depth_ok(data):
        return _error(
            400,
            f"request body nests arrays or objects deeper than {MAX_JSON_DEPTH} levels",
            "BadRequestError",
        )
    try:
        raw = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        return _error(400, "request body is not valid JSON", "BadRequestError")
    if not isinstance(raw, dict):
        return _error(400, "request body must be a JSON object", "BadRequestError")
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(x) for x in first["loc"])
        if first["type"] == "greater_than_equal" and loc in ("max_tokens", "max_completion_tokens"):
            # vLLM's own wording for this one (checked against the 0.32 CPU build)
            return _error(
                400,
                f"{loc} must be at least 1, got {first['input']}. (parameter={loc}, value={first['input']})",
                "BadRequestError",
                loc,
            )
        return _error(400, f"{loc}: {first['msg']}", "BadRequestError", loc)


def _class_from(body: CompletionBody | ChatBody, served: str) -> str | None:
    if body.alphagate_class:
        return body.alphagate_class
    if body.model and body.model.startswith(served + ":"):
        return body.model.split(":", 1)[1]
    return None


async def _handle(request: web.Request, kind: Literal["completion", "chat"]) -> web.StreamResponse:
    cfg = request.app[CONFIG_KEY]
    engine = request.app[ENGINE_KEY]
    parsed = await _parse(request, ChatBody if kind == "chat" else CompletionBody)
    if isinstance(parsed, web.Response):
        return parsed
    body = parsed
    if (
        body.model is not None
        and body.model != cfg.served_model_name
        and not body.model.startswith(cfg.served_model_name + ":")
    ):
        return _error(
            404,
            f"The model `{body.model}` does not exist. Valid aliases: {cfg.served_model_name}.",
            "NotFoundError",
            "model",
        )
    max_tokens = (
        body.max_completion_tokens
        if isinstance(body, ChatBody) and body.max_completion_tokens
        else body.max_tokens
    )
    prompt_tokens = _prompt_tokens(body)
    if prompt_tokens + (max_tokens or 1) > cfg.max_model_len:
        return _error(
            400,
            f"prompt ({prompt_tokens}) + max_tokens exceeds max_model_len {cfg.max_model_len}",
            "BadRequestError",
            "max_tokens",
        )
    # vLLM takes any signed 64-bit seed; numpy wants one ≥ 0 (-1 → 2**64 - 1, as torch's)
    rng = np.random.default_rng(body.seed % 2**64) if body.seed is not None else None
    cls = engine.pick_class(_class_from(body, cfg.served_model_name), rng)
    n_out, hit_limit = engine.output_length(max_tokens, body.ignore_eos, rng)
    n_out = min(n_out, cfg.max_model_len - prompt_tokens)
    req = engine.submit(prompt_tokens, n_out, hit_limit, cls, rng)
    reply = _Reply(
        cfg=cfg,
        engine=engine,
        req=req,
        kind=kind,
        rid=("chatcmpl-" if kind == "chat" else "cmpl-") + uuid.uuid4().hex[:24],
        created=int(time.time()),
        prompt_tokens=prompt_tokens,
    )
    if body.stream:
        return await _stream(request, reply, body.stream_options or StreamOptions())
    return await _whole(reply)


@dataclass(frozen=True)
class _Reply:
    """One request's reply: what its chunks, or its whole response, carry."""

    cfg: TwinConfig
    engine: TwinEngine
    req: TwinRequest
    kind: Literal["completion", "chat"]
    rid: str
    created: int
    prompt_tokens: int

    def envelope(self, obj: str, choices: list[dict[str, Any]]) -> dict[str, Any]:
        """The fields every OpenAI response object starts with."""
        return {
            "id": self.rid,
            "object": obj,
            "created": self.created,
            "model": self.cfg.served_model_name,
            "choices": choices,
        }

    def usage(self, completion_tokens: int) -> dict[str, int]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": self.prompt_tokens + completion_tokens,
        }

    def metrics(self) -> dict[str, Any]:
        """vLLM's per-request ``metrics`` object (``PerRequestMetrics``): timing with
        --enable-per-request-metrics, ``speculative_decoding`` with
        --per-request-spec-decode-metrics (speculation on)."""
        out: dict[str, Any] = {}
        if self.cfg.enable_per_request_metrics:
            timing = self.req.timing_metrics(self.cfg.time_scale)
            out.update({k: v for k, v in timing.items() if v is not None})
        if self.req.histogram:
            out["speculative_decoding"] = self.req.spec_decode_metrics(self.engine.k)
        return out


def _sse(payload: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


def _stream_choice(kind: str, chunk: Chunk, *, first: bool) -> dict[str, Any]:
    """One streamed chunk's choice: a delta (the first names the role) or a text piece."""
    if kind == "chat":
        delta: dict[str, Any] = {"content": chunk.text}
        if first:
            delta = {"role": "assistant", "content": chunk.text}
        return {
            "index": 0,
            "delta": delta,
            "logprobs": None,
            "finish_reason": chunk.finish_reason,
            "stop_reason": None,
        }
    return {
        "index": 0,
        "text": chunk.text,
        "logprobs": None,
        "finish_reason": chunk.finish_reason,
        "stop_reason": None,
    }


async def _stream(request: web.Request, reply: _Reply, opts: StreamOptions) -> web.StreamResponse:
    """Server-sent events: a chunk per engine step, the usage chunk when asked, ``[DONE]``."""
    resp = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
    )
    try:
        await resp.prepare(request)
        await _stream_chunks(resp, reply, opts)
        if opts.include_usage:
            final = {
                **reply.envelope(_CHUNK_OBJECT[reply.kind], []),
                "usage": reply.usage(reply.req.generated),
            }
            metrics = reply.metrics()
            if metrics:  # vLLM: metrics ride on the final usage chunk only
                final["metrics"] = metrics
            await resp.write(_sse(final))
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
    except (ConnectionResetError, ConnectionError, RuntimeError):
        reply.engine.cancel(reply.req)
    except BaseException:
        reply.engine.cancel(reply.req)
        raise
    return resp


async def _stream_chunks(resp: web.StreamResponse, reply: _Reply, opts: StreamOptions) -> None:
    """Each chunk as the engine emits it, up to the one that finishes the request."""
    first = True
    delivered = 0  # tokens sent so far (the queue may already hold later chunks)
    while True:
        chunk = await reply.req.queue.get()
        choice = _stream_choice(reply.kind, chunk, first=first)
        first = False
        payload = reply.envelope(_CHUNK_OBJECT[reply.kind], [choice])
        if reply.cfg.emit_send_time:
            payload["alphagate_sent_s"] = time.time()
        delivered += chunk.tokens
        if opts.include_usage and opts.continuous_usage_stats:
            payload["usage"] = reply.usage(delivered)
        await resp.write(_sse(payload))
        if chunk.finish_reason is not None:
            return


async def _whole(reply: _Reply) -> web.Response:
    """The whole reply once the request finishes."""
    parts: list[str] = []
    reason = None
    try:
        while reason is None:
            chunk = await reply.req.queue.get()
            parts.append(chunk.text)
            reason = chunk.finish_reason
    except BaseException:
        reply.engine.cancel(reply.req)
        raise
    text = "".join(parts)
    extra: dict[str, Any] = {}
    metrics = reply.metrics()
    if metrics:
        extra["metrics"] = metrics
    if reply.kind == "chat":
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": text},
            "logprobs": None,
            "finish_reason": reason,
        }
    else:
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": reason}
    return web.json_response(
        {
            **reply.envelope(_WHOLE_OBJECT[reply.kind], [choice]),
            "usage": reply.usage(reply.req.generated),
            **extra,
        }
    )


_CHUNK_OBJECT: dict[str, str] = {"chat": "chat.completion.chunk", "completion": "text_completion"}
_WHOLE_OBJECT: dict[str, str] = {"chat": "chat.completion", "completion": "text_completion"}


async def _completions(request: web.Request) -> web.StreamResponse:
    return await _handle(request, "completion")


async def _chat(request: web.Request) -> web.StreamResponse:
    return await _handle(request, "chat")


def _root(cfg: TwinConfig) -> str:
    """The checkpoint the modelled deployment would load (vLLM's ``root`` at /v1/models)."""
    from alphagate.core.errors import ConfigError
    from alphagate.specs.models import checkpoint_for

    dep = cfg.deployment
    try:
        return checkpoint_for(dep.model, dep.weight_dtype)[0]
    except ConfigError:
        return dep.model


async def _models(request: web.Request) -> web.Response:
    cfg = request.app[CONFIG_KEY]
    data = [
        {
            "id": cfg.served_model_name,
            "object": "model",
            "created": 0,
            "owned_by": "alphagate",
            "root": _root(cfg),  # as vLLM: the checkpoint behind the served name
            "max_model_len": cfg.max_model_len,
        }
    ]
    return web.json_response({"object": "list", "data": data})


async def _health(request: web.Request) -> web.Response:
    return web.Response(status=200)


async def _metrics(request: web.Request) -> web.Response:
    engine = request.app[ENGINE_KEY]
    return web.Response(
        body=engine.metrics.exposition(),
        headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"},
    )


def _kv_room(config: TwinConfig, resolved: ResolvedDeployment) -> int | None:
    """The KV room in tokens; a room that cannot hold one request of ``max_model_len`` (and its
    draft and lookahead slots) is refused at start, as vLLM refuses it."""
    room = config.kv_room_tokens(resolved)
    slots = speculative_kv_slots(config.deployment.drafter, config.k)
    if room is not None and room < config.max_model_len + slots:
        raise ConfigError(
            f"--kv-cache-memory-bytes {config.kv_cache_memory_bytes} holds {room:,} tokens, "
            f"fewer than one request of --max-model-len {config.max_model_len} (+ {slots} "
            "draft and lookahead slots) needs: raise it, or lower --max-model-len",
            "kv_cache_memory_bytes",
        )
    return room


def create_app(config: TwinConfig) -> web.Application:
    """The twin as an aiohttp application (start it with ``web.run_app`` or an ``AppRunner``)."""
    resolved = resolve_deployment(config.deployment, config.workload)
    engine = TwinEngine(config, build_cost_model(resolved), _kv_room(config, resolved))
    app = web.Application(middlewares=[_auth], client_max_size=64 * 2**20)
    app[CONFIG_KEY] = config
    app[ENGINE_KEY] = engine

    async def _start(app: web.Application) -> None:
        app[ENGINE_KEY].start()
        if config.log_stats_interval_s > 0 and config.k > 0:
            app[STATS_LOG_KEY] = asyncio.get_running_loop().create_task(
                log_forever(app[ENGINE_KEY].take_interval, config.log_stats_interval_s)
            )

    async def _stop(app: web.Application) -> None:
        task = app.get(STATS_LOG_KEY)
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await app[ENGINE_KEY].stop()

    app.on_startup.append(_start)
    app.on_cleanup.append(_stop)
    app.router.add_post("/v1/completions", _completions)
    app.router.add_post("/v1/chat/completions", _chat)
    app.router.add_get("/v1/models", _models)
    app.router.add_get("/health", _health)
    app.router.add_get("/metrics", _metrics)
    return app


#: the listening socket's accept queue (Linux caps it at ``net.core.somaxconn``). aiohttp's
#: default, 128, resets connections when thousands of clients connect at once (10,000 streams
#: opened together lost a third of them); uvicorn, which vLLM and SGLang serve with, uses 2048
LISTEN_BACKLOG = 4096


def serve(
    config: TwinConfig,
    host: str,
    port: int,
    on_listening: Callable[[int], None] | None = None,
) -> None:
    """Serve the twin until interrupted (blocking).

    The socket is bound here first, so ``on_listening`` gets the port actually listened on (the
    one the system chose for ``port=0``) before the first request can arrive; a host that does
    not resolve or a port in use raises ``OSError``. A handler is cancelled when its client
    disconnects (so an abandoned request stops generating), and a connection that has not sent
    a whole request within ``request_timeout_s`` is closed.
    """
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET  # an IPv6 address: ::1, ::
    sock = socket.create_server(
        (host, port), family=family, backlog=LISTEN_BACKLOG, reuse_port=False
    )
    if on_listening is not None:
        on_listening(int(sock.getsockname()[1]))
    web.run_app(
        create_app(config),
        sock=sock,
        print=None,
        access_log=None,
        handler_cancellation=True,
        keepalive_timeout=config.request_timeout_s,
    )
