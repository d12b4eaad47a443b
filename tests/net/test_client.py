"""The llhttp client against real sockets on 127.0.0.1: raw asyncio servers that send exactly the
bytes under test (chunked, length- and close-delimited bodies, interim replies, drops, garbage,
idle closes).

Every test hands a connection handler and an exchange to the ``exchange`` fixture, which serves
the handler, makes the client, runs the exchange in an event loop and closes both.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import ssl
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol

import pytest

from alphagate.net.client import StreamClient
from alphagate.net.transport import ConnectError, ProtocolError, StreamTruncated, endpoint

Stats = dict[str, Any]
Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter, Stats], Awaitable[None]]
Exchange = Callable[[StreamClient, str, Stats], Awaitable[None]]


@contextlib.asynccontextmanager
async def raw_server(
    handler: Handler, tls: ssl.SSLContext | None = None
) -> AsyncIterator[tuple[str, Stats]]:
    """A server that hands each connection to ``handler``; yields its URL and shared counters."""
    stats: Stats = {"connections": 0, "requests": [], "writers": []}

    async def on_conn(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        stats["connections"] += 1
        stats["writers"].append(w)
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            await handler(r, w, stats)

    server = await asyncio.start_server(on_conn, "127.0.0.1", 0, ssl=tls)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"{'https' if tls else 'http'}://127.0.0.1:{port}", stats
    finally:
        server.close()
        for w in stats["writers"]:
            w.close()
        await server.wait_closed()


class Run(Protocol):
    def __call__(
        self, handler: Handler, exchange: Exchange, *, tls: ssl.SSLContext | None = None
    ) -> None: ...


@pytest.fixture
def exchange() -> Run:
    """``exchange(handler, body)``: ``body(client, url, stats)`` against a server of
    ``handler``, in a new event loop; the client and the server are closed after it."""

    def run(handler: Handler, body: Exchange, *, tls: ssl.SSLContext | None = None) -> None:
        async def go() -> None:
            async with raw_server(handler, tls) as (url, stats):
                client = StreamClient(connect_timeout_s=5)
                try:
                    await body(client, url, stats)
                finally:
                    await client.aclose()

        asyncio.run(go())

    return run


async def read_request(r: asyncio.StreamReader, stats: Stats) -> bytes:
    head = await r.readuntil(b"\r\n\r\n")
    n = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            n = int(line.split(b":")[1])
    body = await r.readexactly(n)
    stats["requests"].append(head + body)
    return body


def replies(*answers: bytes, forever: bool = False) -> Handler:
    """A handler that reads a request and writes the next of ``answers`` (cycling them)."""

    async def handler(r: asyncio.StreamReader, w: asyncio.StreamWriter, stats: Stats) -> None:
        while True:
            for answer in answers:
                await read_request(r, stats)
                w.write(answer)
                await w.drain()
            if not forever:
                return

    return handler


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


async def sse_forever(r: asyncio.StreamReader, w: asyncio.StreamWriter, stats: Stats) -> None:
    """Keep-alive: every request gets three events and [DONE] as separate chunks."""
    while True:
        await read_request(r, stats)
        w.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n")
        w.write(b"Transfer-Encoding: chunked\r\n\r\n")
        for i in range(3):
            w.write(chunk(b'data: {"i": %d}\n\n' % i))
            await w.drain()
            await asyncio.sleep(0.001)
        w.write(chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
        await w.drain()


def collect(into: list[bytes], stop_on: bytes | None = b"[DONE]") -> Callable[[bytes, float], bool]:
    def sink(data: bytes, t: float) -> bool:
        assert t > 0
        into.append(data)
        return stop_on is not None and stop_on in data

    return sink


def test_streams_reuse_one_connection_and_close_cleanly(exchange: Run) -> None:
    async def body(client: StreamClient, url: str, stats: Stats) -> None:
        ep = endpoint(url + "/v1/completions", {"Authorization": "Bearer x"})
        for n in range(5):
            got: list[bytes] = []
            reply = await client.request(ep, b'{"n": %d}' % n, collect(got))
            assert reply.status == 200 and reply.stopped
            assert b"".join(got).count(b"data: ") == 4
            await asyncio.sleep(0.01)  # the last chunk arrives; the connection is idle
        assert stats["connections"] == 1
        assert len(stats["requests"]) == 5
        first = stats["requests"][0]
        assert first.startswith(b"POST /v1/completions HTTP/1.1\r\n")
        assert b"Authorization: Bearer x\r\n" in first and first.endswith(b'{"n": 0}')
        await client.aclose()
        assert not client._all

    exchange(sse_forever, body)


def test_concurrent_streams_open_one_connection_each(exchange: Run) -> None:
    async def body(client: StreamClient, url: str, stats: Stats) -> None:
        ep = endpoint(url, {})
        outs: list[list[bytes]] = [[] for _ in range(8)]
        replies = await asyncio.gather(*(client.request(ep, b"{}", collect(o)) for o in outs))
        assert all(r.stopped for r in replies)
        assert stats["connections"] == 8
        assert all(b"".join(o).count(b"data: ") == 4 for o in outs)

    exchange(sse_forever, body)


def test_error_status_keeps_the_body_and_no_sink_call(exchange: Run) -> None:
    error = b'{"error": {"message": "model not found"}}'
    not_found = b"HTTP/1.1 404 Not Found\r\nContent-Length: %d\r\n\r\n%s" % (len(error), error)

    async def body(client: StreamClient, url: str, stats: Stats) -> None:
        got: list[bytes] = []
        reply = await client.request(endpoint(url, {}), b"{}", collect(got))
        assert reply.status == 404 and not reply.stopped and reply.reason == "Not Found"
        assert b"model not found" in reply.body and got == []
        # the connection was complete and is reused
        reply = await client.request(endpoint(url, {}), b"{}", collect(got))
        assert reply.status == 404 and stats["connections"] == 1

    exchange(replies(not_found, forever=True), body)


def test_get_collects_a_close_delimited_body(exchange: Run) -> None:
    async def handler(r: asyncio.StreamReader, w: asyncio.StreamWriter, stats: Stats) -> None:
        stats["requests"].append(await r.readuntil(b"\r\n\r\n"))
        w.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n")
        for part in (b"# HELP x\n", b"x 1\n", b"y 2\n"):
            w.write(part)
            await w.drain()
            await asyncio.sleep(0.001)
        w.close()

    async def body(client: StreamClient, url: str, stats: Stats) -> None:
        reply = await client.request(endpoint(url + "/metrics", {}, "GET"))
        assert reply.status == 200 and reply.body == b"# HELP x\nx 1\ny 2\n"
        assert stats["requests"][0].startswith(b"GET /metrics HTTP/1.1\r\n")
        assert b"Content-Length" not in stats["requests"][0]

    exchange(handler, body)


def test_an_interim_100_reply_is_skipped(exchange: Run) -> None:
    async def handler(r: asyncio.StreamReader, w: asyncio.StreamWriter, stats: Stats) -> None:
        await read_request(r, stats)
        w.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        await w.drain()
        w.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        w.write(chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
        await w.drain()

    async def body(client: StreamClient, url: str, stats: Stats) -> None:
        got: list[bytes] = []
        reply = await client.request(endpoint(url, {}), b"{}", collect(got))
        assert reply.status == 200 and reply.stopped and got == [b"data: [DONE]\n\n"]
        assert reply.reason == "OK"

    exchange(handler, body)


def test_a_stream_cut_mid_body_is_truncated_and_what_came_is_kept(exchange: Run) -> None:
    async def handler(r: asyncio.StreamReader, w: asyncio.StreamWriter, stats: Stats) -> None:
        await read_request(r, stats)
        w.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        w.write(chunk(b'data: {"i": 0}\n\n'))
        await w.drain()
        await asyncio.sleep(0.01)
        w.transport.abort()

    async def body(client: StreamClient, url: str, stats: Stats) -> None:
        got: list[bytes] = []
        with pytest.raises(StreamTruncated, match="closed before the reply ended"):
            await client.request(endpoint(url, {}), b"{}", collect(got))
        assert got == [b'data: {"i": 0}\n\n']

    exchange(handler, body)


def test_a_reply_that_is_not_http_is_a_protocol_error(exchange: Run) -> None:
    async def handler(r: asyncio.StreamReader, w: asyncio.StreamWriter, stats: Stats) -> None:
        await read_request(r, stats)
        w.write(b"SSH-2.0-OpenSSH_9.2\r\n\r\n")
        await w.drain()
        await asyncio.sleep(1)

    async def body(client: StreamClient, url: str, stats: Stats) -> None:
        with pytest.raises(ProtocolError):
            await client.request(endpoint(url, {}), b"{}", collect([]))

    exchange(handler, body)


def test_a_refused_connection_names_host_and_port() -> None:
    async def go() -> None:
        async with raw_server(sse_forever) as (url, _):
            pass  # closed: nothing listens on the port any more
        client = StreamClient(connect_timeout_s=2)
        port = url.rsplit(":", 1)[1]
        with pytest.raises(ConnectError, match=f"127.0.0.1:{port}"):
            await client.request(endpoint(url, {}), b"{}", collect([]))
        await client.aclose()

    asyncio.run(go())


def test_an_idle_connection_closed_by_the_server_is_not_reused(exchange: Run) -> None:
    async def handler(r: asyncio.StreamReader, w: asyncio.StreamWriter, stats: Stats) -> None:
        await read_request(r, stats)
        w.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await w.drain()
        await asyncio.sleep(0.02)
        w.close()  # idle timeout, without a Connection: close header

    async def body(client: StreamClient, url: str, stats: Stats) -> None:
        ep = endpoint(url, {}, "GET")
        assert (await client.request(ep)).body == b"ok"
        await asyncio.sleep(0.1)
        assert (await client.request(ep)).body == b"ok"
        assert stats["connections"] == 2 and len(stats["requests"]) == 2

    exchange(handler, body)


def test_a_reused_connection_that_closes_before_replying_is_retried_once(exchange: Run) -> None:
    """The keep-alive race: the server closes a connection as the next request goes out on it
    (here: it reads the second request and closes without a byte). That request goes out again
    on a new connection; a connection that dies the same way twice is an error."""

    async def handler(r: asyncio.StreamReader, w: asyncio.StreamWriter, stats: Stats) -> None:
        await replies(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")(r, w, stats)
        await read_request(r, stats)
        w.transport.abort()

    async def body(client: StreamClient, url: str, stats: Stats) -> None:
        ep = endpoint(url, {}, "GET")
        assert (await client.request(ep)).body == b"ok"
        assert (await client.request(ep)).body == b"ok"  # retried on a second connection
        assert stats["connections"] == 2 and len(stats["requests"]) == 3

    exchange(handler, body)


def test_cancelling_a_request_closes_its_connection(exchange: Run) -> None:
    async def handler(r: asyncio.StreamReader, w: asyncio.StreamWriter, stats: Stats) -> None:
        await read_request(r, stats)
        w.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        await w.drain()
        await asyncio.sleep(30)  # a stall

    async def body(client: StreamClient, url: str, stats: Stats) -> None:
        task = asyncio.create_task(client.request(endpoint(url, {}), b"{}", collect([])))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(0.01)
        assert not client._all  # closed, not pooled

    exchange(handler, body)


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command for a cert")
def test_https_verifies_the_certificate_and_streams_when_it_is_trusted(
    exchange: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1"),
            *("-addext", "subjectAltName=IP:127.0.0.1"),
        ],
        check=True,
        capture_output=True,
    )
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(cert, key)

    async def body(untrusted: StreamClient, url: str, stats: Stats) -> None:
        assert url.startswith("https://")
        ep = endpoint(url, {})
        with pytest.raises(ConnectError, match=r"CERTIFICATE_VERIFY_FAILED|certificate"):
            await untrusted.request(ep, b"{}", collect([]))
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # OpenSSL's default trust store
        trusted = StreamClient()
        got: list[bytes] = []
        reply = await trusted.request(ep, b"{}", collect(got))
        assert reply.status == 200 and b"".join(got).count(b"data: ") == 4
        await trusted.aclose()

    exchange(sse_forever, body, tls=tls)


def test_redirects_and_json_bodies_are_kept_whole_with_their_headers(exchange: Run) -> None:
    """A 307 comes back with its Location, a 200 whose Content-Type is JSON with its whole body
    — neither fed to the sink, which reads streams only; an event stream still is."""
    answers = replies(
        b"HTTP/1.1 307 Temporary Redirect\r\nLocation: http://elsewhere/v1\r\n"
        b"Content-Length: 0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json; charset=utf-8\r\n"
        b'Content-Length: 13\r\n\r\n{"choices":1}',
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
        b"Content-Length: 14\r\n\r\ndata: [DONE]\n\n",
    )

    async def body(client: StreamClient, url: str, stats: Stats) -> None:
        got: list[bytes] = []
        ep = endpoint(url, {})
        moved = await client.request(ep, b"{}", collect(got))
        assert moved.status == 307 and moved.location == "http://elsewhere/v1" and got == []
        whole = await client.request(ep, b"{}", collect(got))
        assert whole.whole_json and whole.body == b'{"choices":1}' and got == []
        stream = await client.request(ep, b"{}", collect(got))
        assert not stream.whole_json and stream.content_type == "text/event-stream"
        assert got == [b"data: [DONE]\n\n"]

    exchange(answers, body)


def test_an_error_body_that_echoes_the_key_comes_back_redacted(exchange: Run) -> None:
    echo = b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 26\r\n\r\ninvalid key sk-canary-1234"

    async def body(client: StreamClient, url: str, stats: Stats) -> None:
        ep = endpoint(url, {"Authorization": "Bearer sk-canary-1234"})
        reply = await client.request(ep, b"{}", collect([]))
        assert reply.status == 401 and reply.body == b"invalid key <redacted>"

    exchange(replies(echo), body)
