"""Server replies, validated in one place: the OpenAI streaming chunk and usage shapes.

Each SSE ``data:`` payload is parsed once (orjson) and validated against :class:`Chunk`. Anything
a server can send that does not fit — ``choices`` a string, ``delta`` a string, ``text`` a number,
``usage`` a number or without ``completion_tokens``, usage that goes down between chunks — makes
that request a failure of type ``bad_response`` with the reason; the run goes on.
"""

from __future__ import annotations

import itertools
import json

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


class ReplyStream:
    """Accumulates one SSE stream: chunk times, text sizes, usage."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self.sizes: list[int] = []  # characters per chunk, for apportioning tokens without usage
        self.cum_usage: list[int | None] = []
        self.prompt_tokens: int | None = None
        self.output_tokens: int | None = None
        self.done = False
        self.last_s: float | None = None

    def event(self, data: str, now: float) -> Failure | None:
        """Take one ``data:`` payload; returns a failure (type, reason) or None."""
        if data.strip() == "[DONE]":
            self.done = True
            return None
        try:
            obj = orjson.loads(data)  # the hot path: one parse per streamed chunk
        except orjson.JSONDecodeError:
            return ("malformed_sse", f"not JSON: {data[:80]!r}")
        if type(obj) is not dict:
            return ("malformed_sse", f"not a JSON object: {data[:80]!r}")
        if "error" in obj:
            return ("server_error", error_message(data))
        try:
            chunk = Chunk.model_validate(obj)
        except ValidationError as exc:
            return ("bad_response", _why(exc))
        usage = chunk.usage
        if chunk.choices:
            text = chunk.choices[0].content
            if text:
                self.times.append(now)
                self.last_s = now
                self.sizes.append(len(text))
                self.cum_usage.append(usage.completion_tokens if usage else None)
        if usage is not None:
            if self.output_tokens is not None and usage.completion_tokens < self.output_tokens:
                return (
                    "bad_response",
                    f"usage.completion_tokens went down from {self.output_tokens} to "
                    f"{usage.completion_tokens}",
                )
            if usage.prompt_tokens is not None:
                self.prompt_tokens = usage.prompt_tokens
            self.output_tokens = usage.completion_tokens
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
