"""The HTTP seam: what a transport is given (a prepared :class:`Endpoint` and a body), what it
gives back (a :class:`Reply`), how it fails, and :func:`get` for a whole-body ``GET``.

A transport reads a reply's body one of two ways. With a ``sink`` (a streamed ``POST``: the
bench's completions) each network read goes to ``sink(bytes, perf_counter)`` as it arrives until
the sink says stop; without one (``GET /metrics``, ``/v1/models``, Prometheus' HTTP API) the body
comes back whole. A reply that is not a stream — a redirect (3xx), an error (≥ 400) or a 2xx
whose ``Content-Type`` is JSON — is kept whole even when a sink was given: the caller says what
each is. The body of an error or a redirect (status ≥ 300) and its ``Location`` come back with
every secret the request carried redacted (:mod:`alphagate.core.secrets`): a server that echoes
the key it refused must not get it written into a record or a message. A 2xx body is the
caller's data (a ``/metrics`` page, an API's JSON), left as sent — redacting a page costs more
than parsing it — and each caller redacts what of it it shows.

:class:`~alphagate.net.client.StreamClient` is the transport that talks to servers;
:class:`~alphagate.net.mock.MockTransport` answers from a function, for tests without a network.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Protocol
from urllib.parse import urlsplit

from alphagate.core.secrets import Secrets, redact

__all__ = [
    "BODY_MAX",
    "ConnectError",
    "Endpoint",
    "ProtocolError",
    "Reply",
    "Sink",
    "StreamTruncated",
    "Transport",
    "TransportError",
    "endpoint",
    "get",
    "is_json",
    "redacted",
]

#: at most this much of a reply's body is kept (a ``/metrics`` page is a few hundred kB)
BODY_MAX = 32 * 1024 * 1024

#: the reader of a streamed body: (bytes of one network read, perf_counter when read) → stop?
Sink = Callable[[bytes, float], bool]


class TransportError(Exception):
    """The exchange failed: no connection, a reply cut short, or bytes that are not HTTP."""


class ConnectError(TransportError, OSError):
    """The connection could not be opened (refused, unreachable, DNS, TLS handshake, timeout)."""


class StreamTruncated(TransportError):
    """The connection closed before the reply ended."""


class ProtocolError(TransportError):
    """The server's bytes are not HTTP/1.1."""


@dataclass(frozen=True)
class Endpoint:
    """One method and URL with the request head prepared (all but ``Content-Length``): built
    once per URL by :func:`endpoint`, sent many times."""

    key: tuple[str, str, int]  # (scheme, host, port): the pool
    head: bytes = field(repr=False)  # request line and headers (a key among them: not shown)
    method: str = "POST"
    #: what the request carries that a reply must not echo (header values, URL keys)
    secrets: Secrets = field(default_factory=Secrets, repr=False)
    url: str = field(default="", repr=False)
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class Reply:
    """How an exchange ended: ``stopped`` when the sink asked to stop (the caller has what it
    wanted); otherwise the reply ended on its own. ``body``: the whole body when there was no
    sink, the status was ≥ 300, or a 2xx body was JSON (cut at :data:`BODY_MAX`); else empty.
    ``content_type``, ``location``: those headers, as sent (empty when absent); ``reason``: the
    status line's reason phrase."""

    status: int
    stopped: bool
    body: bytes = b""
    content_type: str = ""
    location: str = ""
    reason: str = ""

    @property
    def whole_json(self) -> bool:
        """A 2xx reply with a JSON body (kept whole, not streamed)."""
        return 200 <= self.status < 300 and is_json(self.content_type)

    def streams(self, sink: Sink | None) -> bool:
        """Whether this reply's body goes to ``sink``: a 2xx that is not JSON, when there is one."""
        return sink is not None and 200 <= self.status < 300 and not is_json(self.content_type)


class Transport(Protocol):
    """Sends requests and reads their replies (see the module docstring for the two ways)."""

    async def request(self, ep: Endpoint, body: bytes = b"", sink: Sink | None = None) -> Reply:
        """Send ``body`` to ``ep``; returns when the sink says stop or the reply ends. Raises
        :class:`TransportError` (or ``OSError`` for a connection reset mid-exchange)."""

    async def aclose(self) -> None:
        """Release every connection."""


def is_json(content_type: str) -> bool:
    """``application/json`` or ``…+json``, parameters ignored."""
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


def endpoint(url: str, headers: Mapping[str, str], method: str = "POST") -> Endpoint:
    """Prepare ``METHOD url`` with ``headers``; a bad URL or header raises ValueError (the URL
    redacted, a header's value never shown)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL: {redact(url)!r}")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    default = (parts.scheme == "https" and port == 443) or (parts.scheme == "http" and port == 80)
    host = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    lines = [f"{method} {target} HTTP/1.1", f"Host: {host if default else f'{host}:{port}'}"]
    if "accept" not in {k.lower() for k in headers}:
        lines.append("Accept: */*")
    for k, v in headers.items():
        if k.lower() in ("host", "content-length", "transfer-encoding", "connection"):
            continue
        if any(c in k + v for c in "\r\n\0") or not k or ":" in k:
            raise ValueError(f"header {k!r} has a character that HTTP does not allow")
        lines.append(f"{k}: {v}")
    try:
        head = ("\r\n".join(lines) + "\r\n").encode("latin-1")
    except UnicodeEncodeError as exc:
        raise ValueError(f"a header is not Latin-1 text: {exc}") from None
    secrets = Secrets.of(urls=(url,), headers=headers)
    key = (parts.scheme, parts.hostname, port)
    return Endpoint(key, head, method, secrets, url, dict(headers))


def redacted(reply: Reply, secrets: Secrets) -> Reply:
    """``reply`` with the body and ``Location`` of an error or redirect redacted (they may echo
    what was sent)."""
    if reply.status < 300 or not (reply.body or reply.location):
        return reply
    return replace(
        reply,
        body=secrets.redact_bytes(reply.body) if reply.body else reply.body,
        location=secrets.redact(reply.location),
    )


async def get(
    transport: Transport, url: str, headers: Mapping[str, str] | None = None, *, timeout_s: float
) -> Reply:
    """``GET url`` with its whole body, within ``timeout_s`` in all. Raises ``TimeoutError``,
    :class:`TransportError`, ``OSError``, or ``ValueError`` for a URL or header HTTP cannot
    carry."""
    ep = endpoint(url, headers or {}, "GET")
    return await asyncio.wait_for(transport.request(ep), timeout_s)
