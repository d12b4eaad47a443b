"""What the bench reads from a server besides its streams: the model it serves (``/v1/models``)
and its spec-decode counters (``/metrics``, :func:`~alphagate.measure.scrape.scrape_counters`)
before and after each level, and the acceptance between the two.

Every read is a ``GET`` through the run's transport, bounded by the stall timeout, with the run's
headers (its key) and a URL's own credentials as an ``Authorization`` header. A read that fails
is no failure of the run: without a model name requests go without one (the server decides), and
a level without counters is summarised without acceptance — a ``--metrics-url`` given that cannot
be read, or counters no decoder produces, is reported once in :attr:`ServerReader.problems`.
"""

from __future__ import annotations

import asyncio
from typing import NamedTuple

import orjson

from alphagate.bench.config import BenchConfig
from alphagate.core.secrets import Secrets, join_path, redact, redact_url, split_credentials
from alphagate.measure.prom import SpecAcceptance, SpecCounters, spec_delta
from alphagate.measure.scrape import ScrapeError, scrape_counters
from alphagate.net.transport import Transport, TransportError, get

__all__ = ["LevelAcceptance", "ModelCard", "ServerReader", "bench_headers"]


def bench_headers(cfg: BenchConfig) -> dict[str, str]:
    """The headers every request of the run carries: ``--header`` values and the API key."""
    h = dict(cfg.headers)
    if cfg.api_key is not None:
        h["Authorization"] = f"Bearer {cfg.api_key.get_secret_value()}"
    return h


class ModelCard(NamedTuple):
    """The first model a server lists: its name, and the checkpoint behind it (``root``)."""

    id: str | None
    root: str | None


class LevelAcceptance(NamedTuple):
    """A level's acceptance from the counters' increase (None without counters), why it is left
    out when the counters cannot be a decoder's, and whether the server speculates: True when
    its ``/metrics`` shows it (vLLM's spec-decode counters, SGLang's accept length at 1 or more),
    False when the engine's own ``/metrics`` was read without that, None when no engine
    ``/metrics`` was read."""

    acceptance: SpecAcceptance | None
    problem: str | None
    speculating: bool | None = None


def _scrape_why(exc: ScrapeError, timeout_s: float) -> str:
    if exc.kind == "timeout":
        return f"no answer within {timeout_s:g} s"
    if exc.kind == "unreachable":
        return redact_url(str(exc.cause) or type(exc.cause).__name__)
    if exc.kind == "status":
        return f"HTTP {exc.status}"
    return "not Prometheus text exposition"


class ServerReader:
    """Reads one run's servers; a ``--metrics-url`` that cannot be read is reported once."""

    def __init__(self, cfg: BenchConfig) -> None:
        self.cfg = cfg
        self.headers = bench_headers(cfg)
        #: levels whose /metrics counters could not be used, and why (their acceptance is left
        #: out): counts no decoder produces, from a wrong --metrics-url or a broken server
        self.problems: list[str] = []
        self._unreadable: set[str] = set()

    def metrics_urls(self, url: str) -> list[str]:
        """Where a target's counters are read: the ``--metrics-url`` list, else its /metrics."""
        return list(self.cfg.metrics_urls or (join_path(url, "/metrics"),))

    async def model(self, transport: Transport, url: str) -> ModelCard:
        """The first model ``url`` lists at /v1/models (None for what it does not say, or when
        it does not answer 200 within the timeout)."""
        try:
            bare, auth = split_credentials(join_path(url, "/v1/models"))
            headers = {**self.headers, **auth}
            reply = await get(transport, bare, headers, timeout_s=self.cfg.timeout_s)
            card = orjson.loads(reply.body)["data"][0] if reply.status == 200 else None
        except (asyncio.TimeoutError, TransportError, OSError, ValueError, KeyError, IndexError,
                TypeError):  # fmt: skip
            return ModelCard(None, None)  # requests go without a model name; the server decides
        if not isinstance(card, dict):
            return ModelCard(None, None)
        # written into the results: a name or path that echoes the key is redacted
        secrets = Secrets.of(urls=(url,), headers=headers)
        root, name = card.get("root"), card.get("id")
        return ModelCard(
            None if name is None else redact(str(name), secrets),
            redact(root, secrets) if isinstance(root, str) and root else None,
        )

    async def counters(self, transport: Transport, urls: list[str]) -> list[SpecCounters] | None:
        """Every URL's spec-decode counters, or None when one cannot be read."""
        out = []
        for u in urls:
            try:
                bare, auth = split_credentials(u)  # user:password@ in a --metrics-url: a header
                counters = await scrape_counters(
                    transport, bare, {**self.headers, **auth}, timeout_s=self.cfg.timeout_s
                )
            except ScrapeError as exc:
                self._unreadable_url(u, _scrape_why(exc, self.cfg.timeout_s))
                return None
            except ValueError as exc:  # a URL that cannot be split
                self._unreadable_url(u, redact_url(str(exc)))
                return None
            out.append(counters)
        return out

    def _unreadable_url(self, url: str, why: str) -> None:
        # the target's own /metrics may not exist: only a --metrics-url given is a problem
        if self.cfg.metrics_urls and url not in self._unreadable:
            self._unreadable.add(url)
            self.problems.append(
                f"{redact_url(url)} could not be read ({why}): no acceptance from it"
            )

    def acceptance(
        self,
        before: list[SpecCounters],
        after: list[SpecCounters] | None,
        *,
        where: str,
        urls: list[str],
    ) -> LevelAcceptance:
        """The acceptance between two scrapes of ``urls`` for the level ``where`` names."""
        if after is None or len(after) != len(before):
            return LevelAcceptance(None, None)
        on = any(c.speculating for c in after)
        # without a sign of speculation, the engine's own /metrics says it is off
        state = True if on else False if all(c.engine for c in after) else None
        if not any(c.present for c in after):
            return LevelAcceptance(None, None, state)
        try:
            return LevelAcceptance(spec_delta(before, after), None, state)
        except ValueError as exc:  # accepted above drafted, a position above the last…
            problem = (
                f"the spec-decode counters of {', '.join(map(redact_url, urls))} "
                f"cannot be a decoder's ({exc}); the level's acceptance is left out"
            )
            self.problems.append(f"{where}: {problem}")
            return LevelAcceptance(None, problem, state)
