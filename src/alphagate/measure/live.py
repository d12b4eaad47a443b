"""``alphagate measure live``: acceptance from running servers' ``/metrics``, scraped until
enough drafts are seen.

Each endpoint (a replica) is scraped every ``interval_s``; the increase of its counters between
consecutive scrapes is summed (:class:`~alphagate.measure.prom.CounterWindow`), so a replica that
restarts inside the window is counted from its restart, and replicas are summed after that.
Every scrape is :func:`~alphagate.measure.scrape.scrape_counters` through one transport
(:mod:`alphagate.net`; a test passes a ``MockTransport``), its connections kept alive between
scrapes.

Credentials in a URL become an ``Authorization`` header (:mod:`alphagate.core.secrets`); every
URL shown or written, and every error, is redacted. Two URLs of one replica (``127.0.0.1:P`` and
``localhost:P``) are refused: the host is resolved and address, port and path compared.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from pydantic import Field

from alphagate.core.errors import ConfigError
from alphagate.core.records import Frozen
from alphagate.core.secrets import Secrets, redact, split_credentials
from alphagate.measure.engines import EngineInfo, from_sglang_server_info, from_vllm_version
from alphagate.measure.estimate import estimate
from alphagate.measure.prom import CounterWindow, SpecAcceptance, SpecCounters, parse_spec_counters
from alphagate.measure.results import MeasureError, MeasureResult
from alphagate.measure.scrape import ScrapeError, scrape_counters
from alphagate.net.client import StreamClient
from alphagate.net.transport import Transport, TransportError, get

__all__ = [
    "GAUGE_SCRAPES",
    "LiveConfig",
    "LiveWindow",
    "Replica",
    "looks_like_exposition",
    "measure_live",
    "measure_scrape_files",
    "metrics_url",
]

#: Scrapes averaged when a source has only SGLang's accept-length gauge and no --duration.
GAUGE_SCRAPES = 5


class LiveConfig(Frozen):
    """What to scrape, which series to keep, and when to stop."""

    urls: tuple[str, ...] = Field(
        min_length=1, description="server or /metrics URLs, one per replica"
    )
    model_name: str | None = Field(default=None, description="keep series with this model_name")
    engine: str | None = Field(default=None, description="keep series with this engine label")
    min_drafts: int = Field(default=2000, ge=1, description="stop once this many drafts are seen")
    duration_s: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    interval_s: float = Field(default=2.0, gt=0, allow_inf_nan=False)
    timeout_s: float = Field(default=10.0, gt=0, allow_inf_nan=False)
    k: int | None = Field(default=None, ge=1, le=64, description="K, if the server hides it")


def metrics_url(url: str) -> str:
    """A server URL → its ``/metrics``; a URL that already names it is kept (its query too)."""
    return _with_path(url, lambda path: path if path.endswith("/metrics") else path + "/metrics")


def _with_path(url: str, change: Callable[[str], str]) -> str:
    parts = urlsplit(url)
    path = change(parts.path.rstrip("/"))
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, parts.fragment))


@dataclass(frozen=True)
class Replica:
    """One ``/metrics`` endpoint: the URL requested (no credentials; a query is kept, the
    server may take its key there), the URL shown (redacted) and the headers sent."""

    url: str
    shown: str
    headers: dict[str, str] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, url: str) -> Replica:
        """Raises :class:`MeasureError` (the URL redacted) for a URL that cannot be split."""
        try:
            bare, headers = split_credentials(url)
        except ConfigError as exc:
            raise MeasureError(str(exc)) from None
        return cls(metrics_url(bare), redact(metrics_url(url)), headers)

    def where(self) -> tuple[frozenset[str], int | None, str]:
        """(addresses the host resolves to, port, path): two URLs of one server compare equal
        in port and path and share an address."""
        parts = urlsplit(self.url)
        host = (parts.hostname or "").lower()
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            addrs = frozenset(str(i[4][0]) for i in infos) or frozenset({host})
        except (OSError, UnicodeError):
            addrs = frozenset({host})
        return addrs, port, parts.path.rstrip("/") or "/"


def _duplicates(replicas: list[Replica]) -> list[str]:
    """The URLs (shown) that name a replica given before them."""
    where = [r.where() for r in replicas]
    twice = []
    for j, (addrs, port, path) in enumerate(where):
        for i in range(j):
            a, p, q = where[i]
            if p == port and q == path and a & addrs:
                twice.append(f"{replicas[j].shown} (= {replicas[i].shown})")
                break
    return twice


def _error_text(exc: BaseException | None, secrets: Secrets) -> str:
    return redact(f"{type(exc).__name__}: {exc}", secrets)


async def _get_json(transport: Transport, rep: Replica, cfg: LiveConfig, path: str) -> object:
    """``GET`` a path beside the replica's ``/metrics`` as JSON; None when it does not answer."""
    url = _with_path(rep.url, lambda p: p.removesuffix("/metrics") + path)
    try:
        reply = await get(transport, url, rep.headers, timeout_s=cfg.timeout_s)
        if reply.status != 200:
            return None
        return json.loads(reply.body)
    except (TransportError, OSError, asyncio.TimeoutError, ValueError, UnicodeDecodeError):
        return None


async def _sglang_server_info(transport: Transport, rep: Replica, cfg: LiveConfig) -> float | None:
    """SGLang without spec-decode metrics: ``/get_server_info`` →
    ``internal_states[0].avg_spec_accept_length``, τ averaged since the server started."""
    info = await _get_json(transport, rep, cfg, "/get_server_info")
    states = info.get("internal_states") if isinstance(info, dict) else None
    first = states[0] if isinstance(states, list) and states else None
    tau = first.get("avg_spec_accept_length") if isinstance(first, dict) else None
    return float(tau) if isinstance(tau, int | float) and not isinstance(tau, bool) else None


def engine_of_metrics(snap: SpecCounters) -> EngineInfo:
    """The engine a scrape's metric names name (no version: a scrape holds none)."""
    if snap.twin_steps is not None:
        return EngineInfo(engine="vllm", source="the alphagate twin's /metrics (vLLM's names)")
    if snap.sglang_accept_length and not snap.series:
        return EngineInfo(engine="sglang", source="metric names (sglang:); no version answered")
    if snap.present:
        return EngineInfo(engine="vllm", source="metric names (vllm:); no version answered")
    return EngineInfo(engine=None, source="no version answered and no known metric names")


async def _engine_info(
    transport: Transport, rep: Replica, cfg: LiveConfig, snap: SpecCounters
) -> EngineInfo:
    """The replica's engine and version: vLLM's ``GET /version``, else SGLang's ``GET
    /get_server_info``; without either, what its metric names say."""
    info = from_vllm_version(await _get_json(transport, rep, cfg, "/version"))
    if info is None:
        info = from_sglang_server_info(await _get_json(transport, rep, cfg, "/get_server_info"))
    return info or engine_of_metrics(snap)


def _scrape_message(exc: ScrapeError, url: str, secrets: Secrets) -> str:
    """What a failed scrape of ``url`` (as shown) tells the user."""
    if exc.kind in ("timeout", "unreachable"):
        return f"cannot reach {url}: {_error_text(exc.cause, secrets)}"
    if exc.kind == "status":
        return f"{url} answered HTTP {exc.status} {exc.reason}".rstrip()
    if exc.kind == "not_text":
        return (
            f"{url} did not return Prometheus text exposition (its body is not UTF-8 text: "
            f"binary, or another encoding; {exc.size:,} bytes)"
        )
    return f"{url} did not return Prometheus text exposition ({_error_text(exc.cause, secrets)})"


async def _scrape(
    transport: Transport, rep: Replica, cfg: LiveConfig, secrets: Secrets
) -> SpecCounters:
    url = rep.shown
    try:
        snap = await scrape_counters(
            transport, rep.url, rep.headers, timeout_s=cfg.timeout_s,
            model_name=cfg.model_name, engine=cfg.engine,
        )  # fmt: skip
    except ScrapeError as exc:
        raise MeasureError(_scrape_message(exc, url, secrets)) from None
    if not snap.present:
        tau = await _sglang_server_info(transport, rep, cfg)
        if tau is not None:
            snap.present = snap.matched = snap.since_boot = True
            snap.sglang_accept_length.append(tau)
    if not snap.present:
        raise MeasureError(
            f"{url} exports no speculative-decoding counters: speculation is off on this server, "
            "or it is not vLLM / SGLang"
        )
    if not snap.matched:
        seen = ", ".join(sorted(snap.models_seen)) or "none"
        raise MeasureError(
            f"no spec-decode series at {url} match model_name={cfg.model_name!r} "
            f"engine={cfg.engine!r}; model_name values there: {seen}"
        )
    return snap


@dataclass(frozen=True)
class _Totals:
    """Counts summed over replicas since the first scrape, at one scrape round."""

    t: float
    drafts: float
    draft_tokens: float
    accepted: float
    per_pos: tuple[float, ...]


class LiveWindow:
    """Counters of every replica since the first scrape: scrape, then read the acceptance over
    everything seen, or over a sliding window of the last ``window_s`` seconds."""

    def __init__(
        self,
        cfg: LiveConfig,
        sources: list[str] | None = None,
        *,
        transport: Transport | None = None,
    ) -> None:
        """``sources``: the replicas, when not ``cfg.urls`` (saved scrapes: one server).
        ``transport``: what scrapes go through (None: a client of its own per :meth:`scrape`,
        so that each may run in an event loop of its own). Raises :class:`MeasureError` for a
        URL that cannot be split or two URLs of one replica."""
        self.cfg = cfg
        self.transport = transport
        self.secrets = Secrets.of(urls=cfg.urls)
        if sources is not None:
            self.replicas = [Replica(s, s) for s in sources]
        else:
            self.replicas = [Replica.of(u) for u in cfg.urls]
            for r in self.replicas:
                self.secrets |= Secrets.of(headers=r.headers)
            twice = _duplicates(self.replicas)
            if twice:
                raise MeasureError(
                    f"a replica given twice would be counted twice: {', '.join(twice)}"
                )
        self.urls = [r.shown for r in self.replicas]
        self.windows = [CounterWindow() for _ in self.replicas]
        self.history: list[_Totals] = []
        self.notes: list[str] = []
        self.models: set[str] = set()  # model_name labels of the counters summed
        self.t0 = time.time()
        self.scrapes = 0
        self.since_boot = False
        self.engines: list[EngineInfo] = []  # each replica's, read at the first scrape

    async def scrape(self) -> None:
        """Scrape every replica once. The first scrape must reach all of them (else
        :class:`MeasureError`); later, a replica that blips is noted and skipped."""
        transport = self.transport or StreamClient(connect_timeout_s=self.cfg.timeout_s)
        try:
            snaps = await self._round(transport)
        finally:
            if transport is not self.transport:
                await transport.aclose()
        self.add(snaps, time.time())

    async def _round(self, transport: Transport) -> list[SpecCounters | None]:
        if self.scrapes == 0:
            first = list(
                await asyncio.gather(
                    *(_scrape(transport, r, self.cfg, self.secrets) for r in self.replicas)
                )
            )
            self.engines = list(
                await asyncio.gather(
                    *(
                        _engine_info(transport, r, self.cfg, s)
                        for r, s in zip(self.replicas, first, strict=True)
                    )
                )
            )
            return list(first)
        snaps: list[SpecCounters | None] = []
        for r in self.replicas:
            try:
                snaps.append(await _scrape(transport, r, self.cfg, self.secrets))
            except MeasureError as exc:
                self.notes.append(f"{time.strftime('%H:%M:%S')}: {exc}")
                snaps.append(None)
        return snaps

    def add(self, snaps: list[SpecCounters | None], t: float) -> None:
        """One scrape round, taken at Unix time ``t`` (None: that replica was not reached)."""
        for w, snap in zip(self.windows, snaps, strict=True):
            if snap is not None:
                w.add(snap)
                self.models |= snap.models_counted
                self.since_boot |= self.scrapes == 0 and snap.since_boot
        self.scrapes += 1
        k = max((max(w.per_pos) + 1 for w in self.windows if w.per_pos), default=0)
        self.history.append(
            _Totals(
                t,
                sum(w.drafts for w in self.windows),
                sum(w.draft_tokens for w in self.windows),
                sum(w.accepted for w in self.windows),
                tuple(sum(w.per_pos.get(i, 0.0) for w in self.windows) for i in range(k)),
            )
        )

    @property
    def gauge_only(self) -> bool:
        """No replica exports counts: SGLang's accept-length gauge (or server info) only."""
        return all(
            w.last is not None
            and not w.last.per_pos
            and not w.last.drafts
            and w.last.sglang_accept_length
            for w in self.windows
        )

    def _acceptance(self, window_s: float | None) -> tuple[SpecAcceptance, float]:
        hist = self.history
        start = 0
        if window_s is not None and len(hist) > 1:
            cutoff = hist[-1].t - window_s
            start = max((i for i, h in enumerate(hist) if h.t <= cutoff), default=0)
        base, last = hist[start], hist[-1]
        k = len(last.per_pos)
        counts = [last.per_pos[i] - (base.per_pos[i] if i < len(base.per_pos) else 0.0)
                  for i in range(k)]  # fmt: skip
        batches = [
            (b.drafts - a.drafts, b.draft_tokens - a.draft_tokens, b.accepted - a.accepted)
            for a, b in zip(hist[start:], hist[start + 1 :], strict=False)
        ]
        try:
            est = estimate(
                last.drafts - base.drafts,
                last.draft_tokens - base.draft_tokens,
                last.accepted - base.accepted,
                counts,
                self.cfg.k,
                batches=batches,
            )
        except ValueError as exc:
            raise MeasureError(f"{', '.join(self.urls)}: inconsistent counters: {exc}") from None
        sg = [x for w in self.windows for x in w.sglang]
        acc = SpecAcceptance(
            **(est.model_dump() | {"sglang_accept_length": sum(sg) / len(sg) if sg else None}),
            counter_reset=any(w.resets for w in self.windows),
            sources=len(self.windows),
        )
        return acc, base.t

    def result(self, window_s: float | None = None) -> MeasureResult:
        """The acceptance since the first scrape, or over the last ``window_s`` seconds (from
        the scrape at or before its start). Raises :class:`MeasureError` on inconsistent counts."""
        acc, start = self._acceptance(window_s) if self.history else (None, self.t0)
        now = time.time()
        notes = list(self.notes)
        if self.gauge_only:
            notes.append(
                "SGLang's /get_server_info: τ averaged since the server started, not over this "
                "window"
                if self.since_boot
                else "SGLang exports an interval gauge (sglang:spec_accept_length), no counts: τ "
                "is the mean of the scrapes, without a confidence interval"
            )
        if any(w.appeared for w in self.windows):
            notes.append("an engine appeared inside the window: counted from its start")
        engine, differ = _one_engine(self.engines, self.urls)
        if differ:
            notes.append(differ)
        return MeasureResult(
            verb="measure live",
            source=", ".join(self.urls),
            window_start=start,
            window_end=now,
            window_s=now - start,
            overall=acc,
            counter_reset=acc.counter_reset if acc else False,
            sources=len(self.windows),
            models=sorted(self.models),
            notes=notes,
            engine=engine,
        )


def _one_engine(engines: list[EngineInfo], urls: list[str]) -> tuple[EngineInfo | None, str]:
    """The replicas' engine, when they agree; else none, and which reported what."""
    if not engines:
        return None, ""
    kinds = {(e.engine, e.version) for e in engines}
    if len(kinds) == 1:
        return engines[0], ""
    shown = "; ".join(f"{u}: {e.label()}" for u, e in zip(urls, engines, strict=True))
    return (
        EngineInfo(engine=None, source="replicas of different engines or versions"),
        f"the replicas report different engines or versions, summed together: {shown}",
    )


async def _watch(
    cfg: LiveConfig,
    on_update: Callable[[MeasureResult], bool | None] | None,
    transport: Transport | None,
) -> MeasureResult:
    client = transport or StreamClient(connect_timeout_s=cfg.timeout_s)
    try:
        return await _scrape_until_enough(LiveWindow(cfg, transport=client), on_update)
    finally:
        if transport is None:
            await client.aclose()


async def _scrape_until_enough(
    win: LiveWindow, on_update: Callable[[MeasureResult], bool | None] | None
) -> MeasureResult:
    cfg = win.cfg
    await win.scrape()
    while True:
        await asyncio.sleep(cfg.interval_s)
        await win.scrape()
        result = win.result()
        if on_update is not None and on_update(result):
            return result  # the caller has seen enough
        drafts = result.overall.num_drafts if result.overall else 0.0
        if drafts >= cfg.min_drafts:
            return result
        if win.gauge_only and cfg.duration_s is None and win.scrapes >= GAUGE_SCRAPES:
            return result  # no counts will ever come: an average of a few scrapes
        if cfg.duration_s is not None and time.time() - win.t0 >= cfg.duration_s:
            return result.model_copy(
                update={
                    "notes": [*result.notes, f"stopped at --duration with {drafts:,.0f} drafts"]
                }
            )


def measure_live(
    cfg: LiveConfig,
    on_update: Callable[[MeasureResult], bool | None] | None = None,
    *,
    transport: Transport | None = None,
) -> MeasureResult:
    """Scrape until ``min_drafts`` drafts, ``duration_s``, or ``on_update`` (called with the
    window's result after every scrape) returns true; every scrape goes through ``transport``
    (None: one client for the whole watch, its connections kept alive between scrapes); raises
    :class:`MeasureError`."""
    return asyncio.run(_watch(cfg, on_update, transport))


def looks_like_exposition(path: Path) -> bool:
    """A saved ``/metrics`` scrape (Prometheus text exposition), not a JSON results file."""
    try:
        head = path.read_bytes()[:4096].lstrip()
    except OSError:
        return False
    return not head.startswith((b"{", b"[")) and (head.startswith(b"#") or b"vllm:" in head)


def measure_scrape_files(
    paths: list[Path],
    *,
    model_name: str | None = None,
    engine: str | None = None,
    k: int | None = None,
) -> MeasureResult:
    """Acceptance between saved ``/metrics`` scrapes of one server (``curl …/metrics >
    before.txt``, then after), in the order given: the counters' increase, with the same rules as
    live scrapes (a restart counted from zero, one batch per interval). Raises
    :class:`MeasureError` naming the file that is not a scrape."""
    if len(paths) < 2:
        raise MeasureError(
            "saved scrapes need at least two files of the same server, before and after "
            f"(got {len(paths)}: {', '.join(map(str, paths)) or 'none'})"
        )
    cfg = LiveConfig(urls=tuple(str(p) for p in paths), model_name=model_name, engine=engine, k=k)
    win = LiveWindow(cfg, sources=[str(paths[0])])
    times = []
    for p in paths:
        if not p.is_file():
            raise MeasureError(f"scrape file not found (or not a file): {p}")
        try:
            text = p.read_text(encoding="utf-8")
            snap = parse_spec_counters(text, model_name=model_name, engine=engine)
        except UnicodeDecodeError:
            raise MeasureError(f"{p}: not a UTF-8 text file (a saved /metrics scrape)") from None
        except ValueError as exc:
            raise MeasureError(f"{p}: not Prometheus text exposition ({exc})") from None
        if not snap.present:
            raise MeasureError(f"{p}: no speculative-decoding counters (speculation off?)")
        if not snap.matched:
            seen = ", ".join(sorted(snap.models_seen)) or "none"
            raise MeasureError(f"{p}: no series match model_name={model_name!r} (seen: {seen})")
        times.append(p.stat().st_mtime)
        win.add([snap], times[-1])
        win.engines = [engine_of_metrics(snap)]
    res = win.result()
    span = times[-1] - times[0]
    return res.model_copy(
        update={
            "source": "saved scrapes " + " → ".join(p.name for p in paths),
            "window_start": times[0] if span > 0 else None,
            "window_end": times[-1] if span > 0 else None,
            "window_s": span if span > 0 else None,
            "notes": [*res.notes, "window from the files' modification times"]
            if span > 0
            else res.notes,
        }
    )
