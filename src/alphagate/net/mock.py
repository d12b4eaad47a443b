"""An in-memory transport for tests: each request goes to a function that answers it, as httpx's
``MockTransport`` does (https://www.python-httpx.org/advanced/transports/#mock-transports).

The reply is read by the rules the real client follows (:mod:`alphagate.net.transport`): a 2xx
that is not JSON streams to the sink, one :attr:`Response.chunks` item per network read, until
the sink says stop; anything else comes back whole (an error's body redacted). A handler fails
an exchange by raising (:class:`~alphagate.net.transport.ConnectError` for a refused
connection) or by a response whose :attr:`~Response.error` is raised after its chunks (a stream
cut short).
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from alphagate.net.transport import BODY_MAX, Endpoint, Reply, Sink, redacted

__all__ = ["Handler", "MockTransport", "Request", "Response"]


@dataclass(frozen=True)
class Request:
    """What the handler is asked: the method, the URL as prepared, the headers and the body."""

    method: str
    url: str
    headers: Mapping[str, str]
    body: bytes = b""

    @property
    def path(self) -> str:
        """The URL's path, without the query."""
        return urlsplit(self.url).path


@dataclass(frozen=True)
class Response:
    """A handler's answer: ``body`` whole, or ``chunks`` (one network read each)."""

    status: int = 200
    body: bytes = b""
    chunks: Sequence[bytes] = ()
    content_type: str = ""
    location: str = ""
    reason: str = ""
    #: raised after the chunks are read (a stream cut short: ``StreamTruncated``)
    error: BaseException | None = field(default=None, repr=False)

    @classmethod
    def text(cls, text: str, status: int = 200, content_type: str = "text/plain") -> Response:
        """A whole UTF-8 body."""
        return cls(status, text.encode(), content_type=content_type)

    @classmethod
    def json(cls, data: bytes, status: int = 200) -> Response:
        """A whole JSON body, already encoded."""
        return cls(status, data, content_type="application/json")

    def reads(self) -> Sequence[bytes]:
        return self.chunks or ((self.body,) if self.body else ())


Handler = Callable[[Request], Response | Awaitable[Response]]


class MockTransport:
    """A :class:`~alphagate.net.transport.Transport` answered by ``handler``; every request it
    was asked is kept in :attr:`requests`."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.requests: list[Request] = []
        self.closed = False

    async def request(self, ep: Endpoint, body: bytes = b"", sink: Sink | None = None) -> Reply:
        req = Request(ep.method, ep.url, ep.headers, body)
        self.requests.append(req)
        answer = self.handler(req)
        resp = await answer if inspect.isawaitable(answer) else answer
        head = Reply(resp.status, False, b"", resp.content_type, resp.location, resp.reason)
        if head.streams(sink):
            assert sink is not None
            for data in resp.reads():
                if sink(data, time.perf_counter()):
                    return Reply(head.status, True, b"", head.content_type, "", head.reason)
            if resp.error is not None:
                raise resp.error
            return head
        if resp.error is not None:
            raise resp.error
        whole = b"".join(resp.reads())[:BODY_MAX]
        return redacted(
            Reply(head.status, False, whole, head.content_type, head.location, head.reason),
            ep.secrets,
        )

    async def aclose(self) -> None:
        self.closed = True
