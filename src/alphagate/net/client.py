"""The transport that talks to servers: HTTP/1.1 on an asyncio protocol, parsed by llhttp
(``httptools``).

Why not aiohttp: a streamed reply arrives as one network read per engine step per request, and
aiohttp hands each read to the reading coroutine through its ``StreamReader`` — a buffer append,
a waiter woken with ``call_soon``, a task step, ``readany`` — before our code sees a byte.
Profiled over 20,000 streamed requests, that path and the loop's scheduling of it took over half
of the bench client's CPU. Here the bytes go from ``data_received`` through llhttp's chunked
decoding straight into the caller's ``sink`` inside the same callback; the awaiting task wakes
once per request, when the stream is done. GETs (``/v1/models``, ``/metrics``, Prometheus' HTTP
API) go through the same pooled connections: a scrape on a kept-alive connection costs one
round trip and no handshake.

What it does, and only that: ``POST`` (streamed) and ``GET`` to ``http://`` or ``https://`` (the
default TLS context, as aiohttp does), keep-alive connections pooled per host and reused,
chunked, length-delimited and close-delimited bodies; no proxies, redirects or compression (no
caller asks for any). Replies are read as :mod:`alphagate.net.transport` says. A pooled
connection idle for :data:`IDLE_S` is dropped rather than reused (uvicorn, which vLLM and SGLang
serve with, closes idle keep-alive connections after 5 s), and a reused connection that closes
before a single byte of the reply is retried once on a new one: the server closed it while idle
and never saw the request (RFC 9112 §9.3.1).
"""

from __future__ import annotations

import asyncio
import ssl
import time
from typing import cast

import httptools

from alphagate.net.transport import (
    BODY_MAX,
    ConnectError,
    Endpoint,
    ProtocolError,
    Reply,
    Sink,
    StreamTruncated,
    is_json,
    redacted,
)

__all__ = ["IDLE_S", "StreamClient"]

#: a pooled connection idle longer than this is closed instead of reused
IDLE_S = 4.0


class _Conn(asyncio.Protocol):
    """One keep-alive connection; one exchange at a time."""

    def __init__(self, client: StreamClient, key: tuple[str, str, int]) -> None:
        self.client = client
        self.key = key
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.exchanges = 0  # replies completed on this connection
        self.idle_since = 0.0
        self.closed_future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._reset(None, None)

    def _reset(self, waiter: asyncio.Future[Reply] | None, sink: Sink | None) -> None:
        # a new parser per exchange: a stopped reply's leftovers never reach the next one
        self.parser = httptools.HttpResponseParser(self)
        self.waiter = waiter
        self.sink = sink
        self.status = 0
        self.got_bytes = False
        self.headers_done = False
        self.delimited = False  # chunked or Content-Length: the connection's end is not the end
        self.collect = sink is None  # keep the body (no sink, or an error status)
        self.body = bytearray()
        self.now = 0.0
        self.content_type = b""
        self.location = b""
        self.reason = b""

    # -- the exchange
    def send(self, data: bytes, waiter: asyncio.Future[Reply], sink: Sink | None) -> None:
        self._reset(waiter, sink)
        assert self.transport is not None
        self.transport.write(data)

    def _reply(self, stopped: bool) -> Reply:
        return Reply(
            self.status,
            stopped,
            b"" if stopped else bytes(self.body),
            self.content_type.decode("latin-1"),
            self.location.decode("latin-1"),
            self.reason.decode("latin-1"),
        )

    def _finish(self, reply: Reply | BaseException) -> None:
        w, self.waiter, self.sink = self.waiter, None, None
        if w is not None and not w.done():
            if isinstance(reply, BaseException):
                w.set_exception(reply)
            else:
                w.set_result(reply)

    # -- asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        self.now = time.perf_counter()  # one clock reading per read stamps its chunks
        self.got_bytes = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(ProtocolError("the server switched protocols"))
        except httptools.HttpParserError as exc:
            cause = exc.__cause__ or exc.__context__
            if isinstance(cause, BaseException) and not isinstance(cause, Exception):
                raise cause from None
            self._fail(cause if isinstance(cause, Exception) else ProtocolError(str(exc)))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.client._forget(self)
        if self.waiter is not None:
            if self.headers_done and not self.delimited:
                self._finish(self._reply(False))  # ended by close
            elif not self.got_bytes and self.exchanges:
                self._finish(_Stale())
            else:
                why = f": {exc}" if exc else ""
                self._finish(StreamTruncated(f"the connection closed before the reply ended{why}"))
        if not self.closed_future.done():
            self.closed_future.set_result(None)

    # -- llhttp callbacks
    def on_status(self, reason: bytes) -> None:
        self.reason = reason[:200]

    def on_header(self, name: bytes, value: bytes) -> None:
        n = name.lower()
        if n == b"content-length" or (n == b"transfer-encoding" and b"chunked" in value.lower()):
            self.delimited = True
        elif n == b"content-type":
            self.content_type = value[:200]
        elif n == b"location":
            self.location = value[:2000]

    def on_headers_complete(self) -> None:
        self.headers_done = True
        self.status = self.parser.get_status_code()
        if self.sink is not None and (
            self.status >= 300
            or (self.status >= 200 and is_json(self.content_type.decode("latin-1")))
        ):
            # an error's body is the message, a redirect's says where, a JSON body is one
            # whole answer: each kept whole, none of them a stream
            self.sink, self.collect = None, True

    def on_body(self, body: bytes) -> None:
        sink = self.sink
        if sink is not None:
            if sink(body, self.now):
                self._finish(self._reply(True))
        elif self.collect and len(self.body) < BODY_MAX:
            self.body += body[: BODY_MAX - len(self.body)]

    def on_message_complete(self) -> None:
        if self.status < 200:  # 1xx: an interim reply; the parser goes on to the real one
            self.headers_done = False
            self.content_type = self.location = self.reason = b""
            return
        if self.waiter is not None:  # not stopped by the sink already
            self._finish(self._reply(False))
        self.exchanges += 1
        if self.parser.should_keep_alive() and not self.closed:
            self.client._release(self)
        else:
            self.close()

    # -- helpers
    def _fail(self, exc: Exception) -> None:
        self._finish(exc)
        self.close()

    def close(self) -> None:
        if self.transport is not None and not self.closed:
            self.transport.close()


class _Stale(Exception):
    """A reused connection closed before any reply: retried on a new one."""


class StreamClient:
    """Requests (streamed POSTs, whole-body GETs) over pooled keep-alive connections. Create
    inside the event loop that uses it; :meth:`aclose` closes every connection."""

    def __init__(self, *, connect_timeout_s: float | None = None) -> None:
        self.connect_timeout_s = connect_timeout_s
        self._idle: dict[tuple[str, str, int], list[_Conn]] = {}
        self._all: set[_Conn] = set()
        self._ssl: ssl.SSLContext | None = None

    async def request(self, ep: Endpoint, body: bytes = b"", sink: Sink | None = None) -> Reply:
        """Send ``body`` and feed the reply's body to ``sink`` as it arrives (without a sink,
        or for a status ≥ 400, the body is kept instead); returns when the sink says stop or
        the reply ends. After a stop the rest of the reply is read and dropped, and the
        connection is reused once it ends (``[DONE]`` comes just before a stream's last chunk).
        Raises :class:`ConnectError`, :class:`StreamTruncated` or :class:`ProtocolError`."""
        if body or ep.method != "GET":
            data = ep.head + b"Content-Length: %d\r\n\r\n" % len(body) + body
        else:
            data = ep.head + b"\r\n"
        for _ in range(2):
            conn = self._take(ep.key) or await self._open(ep.key)
            waiter: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
            conn.send(data, waiter, sink)
            try:
                reply = await waiter
            except _Stale:
                continue
            except BaseException:  # cancelled (Ctrl-C, the stall watchdog): the exchange is lost
                conn.close()
                raise
            return redacted(reply, ep.secrets)
        raise StreamTruncated("the server closed two connections before replying")

    def _take(self, key: tuple[str, str, int]) -> _Conn | None:
        idle = self._idle.get(key)
        now = time.monotonic()
        while idle:
            conn = idle.pop()
            if conn.closed or conn.transport is None or conn.transport.is_closing():
                continue
            if now - conn.idle_since > IDLE_S:
                conn.close()
                continue
            return conn
        return None

    async def _open(self, key: tuple[str, str, int]) -> _Conn:
        scheme, host, port = key
        loop = asyncio.get_running_loop()
        ctx = None
        if scheme == "https":
            if self._ssl is None:
                self._ssl = ssl.create_default_context()
            ctx = self._ssl
        conn = _Conn(self, key)
        try:
            await asyncio.wait_for(
                loop.create_connection(lambda: conn, host, port, ssl=ctx),
                self.connect_timeout_s,
            )
        except asyncio.TimeoutError:
            raise ConnectError(f"cannot connect to {host}:{port}: timed out") from None
        except OSError as exc:
            raise ConnectError(f"cannot connect to {host}:{port}: {exc.strerror or exc}") from exc
        self._all.add(conn)
        return conn

    def _release(self, conn: _Conn) -> None:
        conn.idle_since = time.monotonic()
        self._idle.setdefault(conn.key, []).append(conn)

    def _forget(self, conn: _Conn) -> None:
        self._all.discard(conn)

    async def aclose(self) -> None:
        """Close every connection and wait (up to 5 s) until each has closed."""
        conns = list(self._all)
        self._idle.clear()
        for c in conns:
            c.close()
        pending = [c.closed_future for c in conns if not c.closed_future.done()]
        if pending:  # plain futures: a cancelled wait leaves nothing behind to log
            await asyncio.wait(pending, timeout=5.0)
