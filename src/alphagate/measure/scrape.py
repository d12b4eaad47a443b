"""One ``/metrics`` scrape through a transport: ``GET``, UTF-8 text, the spec-decode counters
parsed (:func:`~alphagate.measure.prom.parse_spec_counters`).

``bench`` scrapes each server before and after every level with it, ``measure live`` (and the
gate watching a canary) every interval. A scrape that gives no counters raises
:class:`ScrapeError`, whose :attr:`~ScrapeError.kind` says which step failed; each caller words
the message its users read.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Literal

from alphagate.measure.prom import SpecCounters, parse_spec_counters
from alphagate.net.transport import Transport, TransportError, get

__all__ = ["ScrapeError", "ScrapeFailure", "scrape_counters"]

#: which step of a scrape failed: no answer in time, no connection (or a reply cut short), a
#: status other than 200, a body that is not UTF-8, text that is not Prometheus exposition
ScrapeFailure = Literal["timeout", "unreachable", "status", "not_text", "not_exposition"]


class ScrapeError(Exception):
    """A scrape without counters: ``kind``, and what tells the user more — the transport's or
    the parser's exception (``cause``), the HTTP status and reason, or the body's size."""

    def __init__(
        self,
        kind: ScrapeFailure,
        cause: BaseException | None = None,
        *,
        status: int = 0,
        reason: str = "",
        size: int = 0,
    ) -> None:
        super().__init__(kind)
        self.kind: ScrapeFailure = kind
        self.cause = cause
        self.status = status
        self.reason = reason
        self.size = size


async def scrape_counters(
    transport: Transport,
    url: str,
    headers: Mapping[str, str] | None = None,
    *,
    timeout_s: float,
    model_name: str | None = None,
    engine: str | None = None,
) -> SpecCounters:
    """The spec-decode counters ``url`` exports now (series of ``model_name`` / ``engine`` only,
    when given), read within ``timeout_s``. Raises :class:`ScrapeError`."""
    try:
        reply = await get(transport, url, headers, timeout_s=timeout_s)
    except asyncio.TimeoutError as exc:
        raise ScrapeError("timeout", exc) from None
    except (TransportError, OSError, ValueError) as exc:
        raise ScrapeError("unreachable", exc) from None
    if reply.status != 200:
        raise ScrapeError("status", status=reply.status, reason=reply.reason)
    try:
        text = reply.body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ScrapeError("not_text", exc, size=len(reply.body)) from None
    try:
        return parse_spec_counters(text, model_name=model_name, engine=engine)
    except ValueError as exc:
        raise ScrapeError("not_exposition", exc) from None
