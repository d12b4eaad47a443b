"""Server replies, validated in one place: the OpenAI streaming chunk and usage shapes.

Each SSE ``data:`` payload is parsed once (orjson) and validated against :class:`Chunk`. Anything
a server can send that does not fit — ``choices`` a string, ``delta`` a string, ``text`` a number,
``usage`` a number or without ``completion_tokens``, usage that goes down between chunks — makes
that request a failure of type ``bad_response`` with the reason; the run goes on.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import numpy as np
import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from alphagate.core.errors import validation_problem

__all__ = ["Chunk", "ReplyStream", "error_message"]

Failure = tuple[str, str]


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)


class Usage(_Open):
    prompt_tokens: int | None = Field(default=None, ge=0)
    completion_tokens: int = Field(ge=0)


class Delta(_Open):
    content: str | None = None


class Choice(_Open):
    text: str | None = None
    delta: Delta | None = None
    finish_reason: str | None = None

    @property
    def content(self) -> str | None:
        return self.text if self.text is not None else (self.delta.content if self.delta else None)


class Chunk(_Open):
    """One streamed chunk of ``/v1/completions`` or ``/v1/chat/completions``."""

    choices: list[Choice] = Field(default_factory=list)
    usage: Usage | None = None


def error_message(body: str) -> str:
    """The ``message`` of an OpenAI-style error body, else the body itself (cut to 500 chars)."""
    try:
        obj = json.loads(body)
    except (json.JSONDecodeError, ValueError):
        return body[:500]
    if isinstance(obj, dict):
        e = obj.get("error", obj)
        if isinstance(e, dict) and "message" in e:
            return str(e["message"])[:500]
    return body[:500]


def _why(exc: ValidationError) -> str:
    return validation_problem(exc, where="chunk")


def _common_chunk(obj: dict[str, object]) -> tuple[str | None, int | None, int | None] | None:
    """The text, ``usage.completion_tokens`` and ``usage.prompt_tokens`` of a chunk of the shape every known server sends (at most one choice,
    ``text`` or ``delta.content`` a string or null, ``usage`` with integer counts), without
    building the models: the hot path, once per streamed chunk. None for anything else, which
    :class:`Chunk` then validates (and explains)."""
    choices = obj.get("choices", _MISSING)
    text = None
    if choices is not _MISSING:
        if type(choices) is not list or len(choices) > 1:
            return None
        if choices:
            c = choices[0]
            if type(c) is not dict:
                return None
            finish = c.get("finish_reason")
            if finish is not None and type(finish) is not str:
                return None
            text = c.get("text")
            if text is not None and type(text) is not str:
                return None
            delta = c.get("delta")
            if delta is not None:
                if type(delta) is not dict:
                    return None
                content = delta.get("content")
                if content is not None and type(content) is not str:
                    return None
                if text is None:
                    text = content
    u = obj.get("usage")
    if u is None:
        return text, None, None
    if type(u) is not dict:
        return None
    done = u.get("completion_tokens")
    if type(done) is not int or done < 0:
        return None
    prompt = u.get("prompt_tokens")
    if prompt is not None and (type(prompt) is not int or prompt < 0):
        return None
    return text, done, prompt


_MISSING = object()


class ReplyStream:
    """Accumulates one SSE stream: chunk times, text sizes, usage."""

    def __init__(self, wall_send: float | None = None, keep_text: bool = False) -> None:
        #: with ``wall_send`` (``time.time()`` at send), each content chunk's server send time
        #: ``alphagate_sent_s`` (the twin's --emit-send-time) gives its delivery delay
        self.wall_send = wall_send
        #: ``--save-text``: the output text, token ids and finish reason, as they stream in
        self.kept: dict[str, Any] | None = (
            {"text": [], "ids": [], "prompt_ids": None, "finish": None} if keep_text else None
        )
        self.delivery: list[float] = []
        self.times: list[float] = []
        self.sizes: list[int] = []  # characters per chunk, for apportioning tokens without usage
        self.cum_usage: list[int | None] = []
        self.prompt_tokens: int | None = None
        self.output_tokens: int | None = None
        self.done = False
        #: JSON chunks received (a stream that is only ``[DONE]`` has none: nothing streamed)
        self.events = 0
        self.last_s: float | None = None
        #: the server's per-request spec-decode counts (vLLM ``metrics.speculative_decoding``,
        #: SGLang ``meta_info``), as sent
        self.spec: dict[str, Any] | None = None

    def event(self, data: str | bytes, now: float) -> Failure | None:
        """Take one ``data:`` payload — str, or UTF-8 bytes (the SSE parser's fast path) —
        and return a failure (type, reason) or None."""
        if isinstance(data, bytes):
            if data == b"[DONE]":  # once per request; orjson would raise on it (~8 µs)
                self.done = True
                return None
            # the hot path: orjson parses the bytes as received; anything but a JSON object
            # ([DONE], not JSON, invalid UTF-8) goes through the text path, which names the fault
            try:
                obj = orjson.loads(data)
            except orjson.JSONDecodeError:
                return self.event(data.decode("utf-8", "replace"), now)
            if type(obj) is not dict or "error" in obj:
                return self.event(data.decode("utf-8", "replace"), now)
        else:
            if data.strip() == "[DONE]":
                self.done = True
                return None
            try:
                obj = orjson.loads(data)  # one parse per streamed chunk
            except orjson.JSONDecodeError:
                return ("malformed_sse", f"not JSON: {data[:80]!r}")
            if type(obj) is not dict:
                return ("malformed_sse", f"not a JSON object: {data[:80]!r}")
            if "error" in obj:
                return ("server_error", error_message(data))
        self.events += 1
        if "metrics" in obj or "meta_info" in obj:
            self._take_spec(obj)
        fast = _common_chunk(obj)
        if fast is not None:
            text, done, prompt = fast
        else:
            try:
                chunk = Chunk.model_validate(obj)
            except ValidationError as exc:
                return ("bad_response", _why(exc))
            text = chunk.choices[0].content if chunk.choices else None
            usage = chunk.usage
            done = None if usage is None else usage.completion_tokens
            prompt = None if usage is None else usage.prompt_tokens
        if self.kept is not None:
            self._keep(obj, text)
        if text:
            if self.wall_send is not None and type(sent := obj.get("alphagate_sent_s")) is float:
                self.delivery.append(self.wall_send + now - sent)
            self.times.append(now)
            self.last_s = now
            self.sizes.append(len(text))
            self.cum_usage.append(done)
        if done is not None:
            if self.output_tokens is not None and done < self.output_tokens:
                return (
                    "bad_response",
                    f"usage.completion_tokens went down from {self.output_tokens} to {done}",
                )
            if prompt is not None:
                self.prompt_tokens = prompt
            self.output_tokens = done
        return None

    def _take_spec(self, obj: dict[str, Any]) -> None:
        """vLLM's ``metrics.speculative_decoding`` (the final usage chunk) or SGLang's
        ``meta_info`` counts, kept as sent (checked when the record is made)."""
        m = obj.get("metrics")
        sd = m.get("speculative_decoding") if type(m) is dict else None
        if type(sd) is dict:
            self.spec = {"source": "vllm", **sd}
            return
        meta = obj.get("meta_info")
        if type(meta) is dict and "spec_verify_ct" in meta:
            self.spec = {"source": "sglang", **meta}

    def _keep(self, obj: dict[str, Any], text: str | None) -> None:
        """Keep the text, vLLM's ``token_ids`` / ``prompt_token_ids`` and the finish reason."""
        assert self.kept is not None
        if text:
            self.kept["text"].append(text)
        choices = obj.get("choices")
        if type(choices) is list and choices and type(choices[0]) is dict:
            c = choices[0]
            ids, prompt_ids = c.get("token_ids"), c.get("prompt_token_ids")
            if type(ids) is list:
                self.kept["ids"].extend(i for i in ids if type(i) is int)
            if type(prompt_ids) is list:
                self.kept["prompt_ids"] = [i for i in prompt_ids if type(i) is int]
            if type(c.get("finish_reason")) is str:
                self.kept["finish"] = c["finish_reason"]

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
