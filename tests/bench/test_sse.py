"""SSE parser: byte streams split at every position give the same events."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from alphagate.bench.sse import SSEEvent, SSEParser

STREAM = (
    ": keep-alive comment\r\n"
    'data: {"choices": [{"text": "héllo wörld ✓"}]}\r\n\r\n'
    "event: ping\ndata: line one\ndata: line two\n\n"
    "id: 7\rdata: cr-only\r\r"
    "data: [DONE]\n\n"
).encode()

EXPECTED = [
    SSEEvent('{"choices": [{"text": "héllo wörld ✓"}]}'),
    SSEEvent("line one\nline two", event="ping"),
    SSEEvent("cr-only", id="7"),
    SSEEvent("[DONE]", id="7"),  # the last event ID persists (WHATWG)
]


def _feed_all(parts: list[bytes]) -> list[SSEEvent]:
    p = SSEParser()
    out: list[SSEEvent] = []
    for part in parts:
        out += p.feed(part)
    return out


def test_whole_stream() -> None:
    assert _feed_all([STREAM]) == EXPECTED


def test_split_at_every_position() -> None:
    for i in range(len(STREAM) + 1):
        assert _feed_all([STREAM[:i], STREAM[i:]]) == EXPECTED, i


def test_split_at_every_pair_of_positions() -> None:
    n = len(STREAM)
    for i in range(0, n + 1, 3):
        for j in range(i, n + 1, 5):
            assert _feed_all([STREAM[:i], STREAM[i:j], STREAM[j:]]) == EXPECTED, (i, j)


@given(st.lists(st.integers(0, len(STREAM)), max_size=12))
def test_random_splits(cuts: list[int]) -> None:
    edges = [0, *sorted(cuts), len(STREAM)]
    parts = [STREAM[a:b] for a, b in itertools.pairwise(edges)]
    assert _feed_all(parts) == EXPECTED


def test_byte_by_byte() -> None:
    p = SSEParser()
    out: list[SSEEvent] = []
    for b in STREAM[:-3]:
        out += p.feed(bytes([b]))
    assert out == EXPECTED[:3]
