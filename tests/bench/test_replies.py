"""The chunk fast path reads exactly what the validated models read, and defers everything else."""

from __future__ import annotations

import json
from typing import Any

import pytest

from alphagate.bench import replies
from alphagate.bench.replies import ReplyStream

CHUNKS: list[Any] = [
    {"choices": [{"index": 0, "text": " a", "finish_reason": None}]},
    {
        "choices": [{"text": " a", "logprobs": None}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2},
    },
    {"choices": [{"delta": {"role": "assistant", "content": "hi"}}], "usage": None},
    {"choices": [{"delta": {"content": None}, "finish_reason": "stop"}]},
    {"choices": [{"text": "", "delta": {"content": "x"}}]},
    {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 7}},
    {"choices": [{"text": None, "delta": None}]},
    {"usage": {"completion_tokens": 4}},
    {"choices": [{"text": "a"}, {"text": "b"}]},
    {"choices": [{"text": 5}]},
    {"choices": "text"},
    {"choices": None},
    {"choices": [{"delta": "x"}]},
    {"choices": [{"delta": {"content": 3}}]},
    {"choices": [{"text": "a", "delta": "x"}]},
    {"choices": [{"text": "a", "finish_reason": 1}]},
    {"choices": ["a"]},
    {"choices": [{"text": "a"}], "usage": 3},
    {"choices": [{"text": "a"}], "usage": {"completion_tokens": True}},
    {"choices": [{"text": "a"}], "usage": {"completion_tokens": -1}},
    {"choices": [{"text": "a"}], "usage": {"completion_tokens": 2.0}},
    {"choices": [{"text": "a"}], "usage": {"completion_tokens": 2, "prompt_tokens": "3"}},
    {"choices": [{"text": "a"}], "usage": {"prompt_tokens": 3}},
    {"choices": [{"text": "a"}], "alphagate_sent_s": 1.5},
]


def _read(chunks: list[Any]) -> tuple[Any, ...]:
    s = ReplyStream(wall_send=1.0)
    failures = [s.event(json.dumps(c), 0.5 + i) for i, c in enumerate(chunks)]
    return failures, s.times, s.sizes, s.cum_usage, s.output_tokens, s.prompt_tokens, s.delivery


@pytest.mark.parametrize("chunk", CHUNKS, ids=range(len(CHUNKS)))
def test_fast_path_equals_the_models(chunk: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    fast = _read([chunk, chunk])
    monkeypatch.setattr(replies, "_common_chunk", lambda obj: None)
    assert fast == _read([chunk, chunk])


def test_delivery_delay_from_the_twins_send_time() -> None:
    s = ReplyStream(wall_send=100.0)
    s.event(json.dumps({"choices": [{"text": "a"}], "alphagate_sent_s": 100.25}), 0.5)
    assert s.delivery == [pytest.approx(0.25)]
    assert ReplyStream().delivery == []


def test_the_servers_shapes_take_the_fast_path() -> None:
    for chunk in CHUNKS[:8]:
        assert replies._common_chunk(chunk) is not None, chunk
    for chunk in CHUNKS[8:22]:
        assert replies._common_chunk(chunk) is None, chunk


def _read_bytes(payloads: list[bytes]) -> tuple[Any, ...]:
    s = ReplyStream(wall_send=1.0)
    failures = [s.event(p, 0.5 + i) for i, p in enumerate(payloads)]
    return failures, s.times, s.sizes, s.cum_usage, s.output_tokens, s.prompt_tokens, s.done


def _read_text(payloads: list[bytes]) -> tuple[Any, ...]:
    s = ReplyStream(wall_send=1.0)
    failures = [s.event(p.decode("utf-8", "replace"), 0.5 + i) for i, p in enumerate(payloads)]
    return failures, s.times, s.sizes, s.cum_usage, s.output_tokens, s.prompt_tokens, s.done


ODD_PAYLOADS = [
    b"[DONE]",
    b" [DONE] ",
    b"not json",
    b"[1, 2]",
    b'"text"',
    b'{"error": {"message": "overloaded"}}',
    b'{"choices": [{"text": "caf\xc3\xa9"}]}',
    b'{"choices": [{"text": "bad \xff byte"}]}',  # invalid UTF-8: read as text, as before
    b'{"choices": [{"text": "cut \xe2\x9c"}]}',
    b"",
]


@pytest.mark.parametrize(
    "payload",
    [*(json.dumps(c).encode() for c in CHUNKS), *ODD_PAYLOADS],
    ids=range(len(CHUNKS) + len(ODD_PAYLOADS)),
)
def test_bytes_payloads_read_as_their_text(payload: bytes) -> None:
    """The SSE parser hands single-line events over as bytes: the same outcome as the text."""
    assert _read_bytes([payload, payload]) == _read_text([payload, payload])
