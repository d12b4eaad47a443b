"""The in-memory transport follows the real client's rules: a 2xx that is not JSON streams to
the sink one read at a time until it says stop, anything else comes back whole (an error's body
redacted), and a handler's error is raised after its chunks."""

from __future__ import annotations

import asyncio

import pytest

from alphagate.core.secrets import REDACTED
from alphagate.net.mock import MockTransport, Request, Response
from alphagate.net.transport import Endpoint, Reply, StreamTruncated, endpoint


def _ep() -> Endpoint:
    return endpoint("http://h:8000/v1/completions?x=1", {"Authorization": "Bearer s3cret"})


def _send(mock: MockTransport, got: list[bytes] | None = None, stop_after: int = 99) -> Reply:
    def sink(data: bytes, t: float) -> bool:
        assert got is not None
        got.append(data)
        return len(got) >= stop_after

    return asyncio.run(mock.request(_ep(), b"{}", None if got is None else sink))


def test_every_request_is_kept_as_asked() -> None:
    mock = MockTransport(lambda req: Response.text("ok"))
    _send(mock)
    (req,) = mock.requests
    assert req == Request(
        "POST", "http://h:8000/v1/completions?x=1", {"Authorization": "Bearer s3cret"}, b"{}"
    )
    assert req.path == "/v1/completions"


def test_a_stream_goes_to_the_sink_read_by_read_until_it_says_stop() -> None:
    mock = MockTransport(
        lambda req: Response(200, chunks=[b"a", b"b", b"c"], content_type="text/event-stream")
    )
    got: list[bytes] = []
    reply = _send(mock, got)
    assert got == [b"a", b"b", b"c"] and not reply.stopped and reply.body == b""
    got = []
    reply = _send(mock, got, stop_after=2)
    assert got == [b"a", b"b"] and reply.stopped


def test_json_and_errors_come_back_whole_and_an_errors_echo_is_redacted() -> None:
    mock = MockTransport(lambda req: Response.json(b'{"a": 1}'))
    got: list[bytes] = []
    assert _send(mock, got).body == b'{"a": 1}' and got == []
    err = MockTransport(lambda req: Response.text("bad key s3cret", status=401))
    reply = _send(err, [])
    assert reply.status == 401 and reply.body == f"bad key {REDACTED}".encode()


def test_a_handlers_error_is_raised_after_its_chunks() -> None:
    cut = StreamTruncated("the stream was cut")
    mock = MockTransport(
        lambda req: Response(200, chunks=[b"a"], content_type="text/event-stream", error=cut)
    )
    got: list[bytes] = []
    with pytest.raises(StreamTruncated):
        _send(mock, got)
    assert got == [b"a"]


def test_an_async_handler_is_awaited_and_closing_is_recorded() -> None:
    async def handler(req: Request) -> Response:
        await asyncio.sleep(0)
        return Response.text("late")

    mock = MockTransport(handler)
    assert _send(mock).body == b"late"
    asyncio.run(mock.aclose())
    assert mock.closed
