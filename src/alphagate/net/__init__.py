"""The one HTTP seam: a :class:`~alphagate.net.transport.Transport` sends a request and reads
its reply; every client in alphagate (the bench's streams, ``/v1/models``, ``/metrics``,
Prometheus' HTTP API) goes through one.

- :mod:`alphagate.net.transport` — the protocol, the prepared request (:class:`Endpoint`), the
  reply, the errors, and :func:`get`;
- :mod:`alphagate.net.client` — the real one: HTTP/1.1 on an asyncio protocol, parsed by llhttp;
- :mod:`alphagate.net.mock` — an in-memory one for tests, answered by a function (as httpx's
  ``MockTransport``).
"""
