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


# ---------------------------------------------------------------- payloads(): the client's path


def _text(p: bytes | str) -> str:
    return p.decode("utf-8", "replace") if isinstance(p, bytes) else p


def _payloads_all(parts: list[bytes]) -> list[str]:
    p = SSEParser()
    out: list[str] = []
    for part in parts:
        out += [_text(x) for x in p.payloads(part)]
    return out


#: \n line endings only (what vLLM, SGLang and the twin send): the bytes fast path throughout
LF_STREAM = (
    'data: {"choices": [{"text": "héllo ✓"}]}\n\n'
    ": keep-alive\n\n"
    "event: ping\ndata: line one\ndata: line two\n\n"
    "data:no space\n\n"
    "\n\n"
    "id: 7\n\n"
    'data: {"choices": [{"text": "x"}]}\n\n'
    "data: [DONE]\n\n"
).encode()

LF_EXPECTED = [
    '{"choices": [{"text": "héllo ✓"}]}',
    "line one\nline two",
    "no space",
    '{"choices": [{"text": "x"}]}',
    "[DONE]",
]


def test_payloads_split_across_reads_at_every_position() -> None:
    assert _payloads_all([LF_STREAM]) == LF_EXPECTED
    for i in range(len(LF_STREAM) + 1):
        assert _payloads_all([LF_STREAM[:i], LF_STREAM[i:]]) == LF_EXPECTED, i
    for i in range(0, len(LF_STREAM) + 1, 3):
        for j in range(i, len(LF_STREAM) + 1, 7):
            parts = [LF_STREAM[:i], LF_STREAM[i:j], LF_STREAM[j:]]
            assert _payloads_all(parts) == LF_EXPECTED, (i, j)


def test_payloads_of_a_single_data_line_are_the_bytes_received() -> None:
    out = SSEParser().payloads(b'data: {"a": 1}\n\ndata: [DONE]\n\n')
    assert out == [b'{"a": 1}', b"[DONE]"]


def test_payloads_with_crlf_at_every_position() -> None:
    """CRLF (and lone CR) line endings go through the general parser, with the same events."""
    want = [ev.data for ev in EXPECTED]
    for i in range(len(STREAM) + 1):
        assert _payloads_all([STREAM[:i], STREAM[i:]]) == want, i


def test_payloads_switch_to_the_general_parser_mid_stream() -> None:
    stream = LF_STREAM.replace(b"data: [DONE]\n\n", b"data: a\r\n\r\ndata: [DONE]\r\n\r\n")
    want = [*LF_EXPECTED[:-1], "a", "[DONE]"]
    for i in range(len(stream) + 1):
        assert _payloads_all([stream[:i], stream[i:]]) == want, i


def test_payloads_of_a_cut_stream_end_without_the_partial_event() -> None:
    p = SSEParser()
    assert p.payloads(b'data: {"a": 1}\n\ndata: {"b"') == [b'{"a": 1}']
    assert p.payloads(b": 2}\n") == []  # the event is not complete until its blank line


_PIECES = [
    b"data: ",
    b"data:",
    b"event: e",
    b"id: 1",
    b": c",
    b"\n",
    b"\n",
    b"\n\n",
    b"\r\n",
    b"\r",
    b'{"a": 1}',
    b"[DONE]",
    "é✓".encode(),
    b"\xe2\x9c",  # a cut UTF-8 sequence
    b"\xff",
]


@given(
    st.lists(st.sampled_from(_PIECES), max_size=30),
    st.lists(st.integers(0, 200), max_size=8),
)
def test_payloads_equal_the_general_parser(pieces: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(pieces)
    edges = [0, *sorted(c for c in cuts if c <= len(stream)), len(stream)]
    parts = [stream[a:b] for a, b in itertools.pairwise(edges)]
    assert _payloads_all(parts) == [ev.data for ev in _feed_all([stream])]


def test_an_event_without_data_is_not_dispatched() -> None:
    """WHATWG: "If the data buffer is an empty string, set the data buffer and the event type
    buffer to the empty string and return" — ``event: ping`` alone is no event, and its type
    does not leak into the next one."""
    stream = b"event: ping\n\nid: 3\n\ndata: a\n\nevent: ping\r\n\r\ndata: b\n\n"
    want = [SSEEvent("a", id="3"), SSEEvent("b", id="3")]
    for i in range(len(stream) + 1):
        assert _feed_all([stream[:i], stream[i:]]) == want, i
        assert _payloads_all([stream[:i], stream[i:]]) == ["a", "b"], i
    assert SSEParser().payloads(b"event: ping\n\n") == []


def test_an_event_past_the_size_limit_raises_before_it_is_buffered_whole() -> None:
    """A line without end (or one of 64 MiB) raises EventTooLong once the pending bytes pass
    MAX_EVENT_BYTES, on both paths, however the bytes are split; an event just under it is
    dispatched."""
    import pytest

    from alphagate.bench.sse import MAX_EVENT_BYTES, EventTooLong

    piece = b"x" * 65_536
    for head in (b"data: ", b"data: \r\n"):  # the bytes path, and the general one (a \r)
        p = SSEParser()
        p.payloads(head)
        fed = len(head)
        with pytest.raises(EventTooLong, match="4 MiB"):
            while fed <= MAX_EVENT_BYTES + len(piece):
                fed += len(piece)
                p.payloads(piece)
        assert fed > MAX_EVENT_BYTES  # it took the whole limit, not less
    with pytest.raises(EventTooLong):
        SSEParser().payloads(b"data: " + b"y" * (MAX_EVENT_BYTES + 1) + b"\n\n")
    with pytest.raises(EventTooLong):
        SSEParser().feed(b"data: " + b"y" * (MAX_EVENT_BYTES + 1))
    just = b"data: " + b"z" * (MAX_EVENT_BYTES - 16) + b"\n\n"
    assert len(SSEParser().payloads(just)[0]) == MAX_EVENT_BYTES - 16
