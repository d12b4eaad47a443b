"""``alphagate measure prometheus``: acceptance over a window from a Prometheus server.

Queries the HTTP API (``/api/v1/query`` and ``/api/v1/query_range``,
https://prometheus.io/docs/prometheus/latest/querying/api/) with ``increase()`` over vLLM's
spec-decode counters — ``increase`` handles counter resets — and sums over the selected series:

    sum(increase(vllm:spec_decode_num_drafts_total{SELECTOR}[WINDOW]))
    sum(increase(vllm:spec_decode_num_draft_tokens_total{SELECTOR}[WINDOW]))
    sum(increase(vllm:spec_decode_num_accepted_tokens_total{SELECTOR}[WINDOW]))
    sum by (position) (increase(vllm:spec_decode_num_accepted_tokens_per_pos_total{SELECTOR}[WINDOW]))

``resets()`` over the drafts counter says whether a server restarted inside the window.
With ``step`` the same increases over each step give α over time, so a drop in acceptance after
a traffic shift is visible; with ``by`` (e.g. ``instance``) each replica gets its own series.
``increase`` extrapolates to the window's edges, so the counts are not whole numbers.

Every query goes through one transport (:mod:`alphagate.net`; a test passes a
``MockTransport``), on connections kept alive for the measurement. Credentials in the server's
URL (``http://user:password@prometheus:9090``) are sent as an ``Authorization`` header, never as
userinfo, and the URL is redacted wherever it is shown or written, as is every error
(:mod:`alphagate.core.secrets`). A redirect is not followed (it would carry the credentials to
another host): the error says where it points.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import re
import time
import urllib.parse
from typing import Any

from pydantic import Field, field_validator

from alphagate.core.errors import ConfigError
from alphagate.core.records import Frozen
from alphagate.core.secrets import Secrets, redact, split_credentials
from alphagate.measure.engines import EngineInfo
from alphagate.measure.estimate import Batch, estimate
from alphagate.measure.prom import ACCEPTED, DRAFT_TOKENS, DRAFTS, PER_POS
from alphagate.measure.results import MeasureError, MeasureResult, SeriesPoint
from alphagate.net.client import StreamClient
from alphagate.net.transport import Reply, Transport, TransportError, get

__all__ = ["PrometheusQuery", "measure_prometheus", "parse_duration"]

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h|d|w)$")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}


def parse_duration(text: str) -> float:
    """``90s``, ``30m``, ``1h``, ``7d`` → seconds (Prometheus duration syntax, one unit)."""
    m = _DURATION.match(text.strip())
    if not m:
        raise MeasureError(f"{text!r} is not a duration like 90s, 30m, 1h or 7d")
    seconds = float(m.group(1)) * _UNIT[m.group(2)]
    if seconds <= 0:
        raise MeasureError(f"{text!r}: a duration must be positive")
    return seconds


class PrometheusQuery(Frozen):
    """One measurement from a Prometheus server."""

    url: str = Field(description="the Prometheus server, e.g. http://prometheus:9090")
    selector: str = Field(default="", description='label matchers, e.g. {model_name="llama"}')
    window_s: float = Field(ge=1.0, allow_inf_nan=False, description="seconds, at least 1")
    step_s: float | None = Field(default=None, ge=1.0, allow_inf_nan=False)
    by: str | None = Field(default=None, description="a label to split by, e.g. instance")
    end: float | None = Field(default=None, description="Unix time of the window's end (now)")
    k: int | None = Field(default=None, ge=1, le=64)
    timeout_s: float = Field(default=10.0, gt=0)

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        try:
            parts = urllib.parse.urlsplit(v)
            ok = parts.scheme in ("http", "https") and bool(parts.hostname)
            parts.port  # noqa: B018 — raises ValueError on a bad port
        except ValueError:
            ok = False
        if not ok:
            raise ValueError(f"{redact(v)!r} is not an http(s) URL of a Prometheus server")
        return v

    @property
    def shown(self) -> str:
        """The server's URL as it may be printed and written: credentials and keys redacted."""
        return redact(self.url)

    @field_validator("selector")
    @classmethod
    def _selector(cls, v: str) -> str:
        v = v.strip()
        if v and not (v.startswith("{") and v.endswith("}")):
            raise ValueError(f'{v!r} is not a label selector like {{model_name="llama"}}')
        return v

    @field_validator("by")
    @classmethod
    def _label(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"[a-zA-Z_][a-zA-Z0-9_]*", v):
            raise ValueError(f"{v!r} is not a label name")
        return v


def _dur(seconds: float) -> str:
    return f"{round(seconds)}s"


class _Api:
    """The server's HTTP API through one transport: the URL's credentials sent as an
    ``Authorization`` header, its query (a key a proxy takes) kept, every URL and message shown
    redacted."""

    def __init__(self, q: PrometheusQuery, transport: Transport) -> None:
        try:
            bare, headers = split_credentials(q.url)
        except ConfigError as exc:
            raise MeasureError(str(exc)) from None
        self.q, self.transport, self.bare, self.headers = q, transport, bare, headers
        self.secrets = Secrets.of(urls=(q.url,), headers=headers)

    def url(self, path: str, params: dict[str, str]) -> str:
        parts = urllib.parse.urlsplit(self.bare)
        query = "&".join(x for x in (parts.query, urllib.parse.urlencode(params)) if x)
        return urllib.parse.urlunsplit(
            (parts.scheme, parts.netloc, parts.path.rstrip("/") + path, query, "")
        )

    async def reply(self, path: str, params: dict[str, str]) -> Reply:
        """``GET`` an API path; raises :class:`MeasureError` when there is no reply."""
        try:
            return await get(
                self.transport, self.url(path, params), self.headers, timeout_s=self.q.timeout_s
            )
        except asyncio.TimeoutError:
            why = f"no answer within {self.q.timeout_s:g} s"
        except (TransportError, OSError, ValueError) as exc:
            why = redact(str(exc) or type(exc).__name__, self.secrets)
        raise MeasureError(f"cannot reach Prometheus at {self.q.shown}: {why}")

    async def result(self, path: str, params: dict[str, str]) -> list[dict[str, Any]]:
        """The ``data.result`` of an API answer; raises :class:`MeasureError` (every URL and
        message redacted) on anything else."""
        shown, secrets = self.q.shown, self.secrets
        reply = await self.reply(path, params)
        _check_status(reply, shown, secrets)
        try:
            data = json.loads(reply.body)
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise MeasureError(
                f"{shown} did not answer with Prometheus API JSON (is it Prometheus?)"
            ) from None
        if not isinstance(data, dict) or data.get("status") != "success":
            err = data.get("error") if isinstance(data, dict) else None
            why = redact(str(err), secrets) if err else "not a success response"
            raise MeasureError(f"Prometheus at {shown}: {why}")
        inner = data.get("data")
        result = inner.get("result") if isinstance(inner, dict) else None
        if not isinstance(result, list) or not all(isinstance(r, dict) for r in result):
            raise MeasureError(
                f"{shown} answered {path} without a data.result list (is it Prometheus?)"
            )
        return result

    async def instant(self, expr: str, at: float) -> list[dict[str, Any]]:
        return await self.result("/api/v1/query", {"query": expr, "time": f"{at:.3f}"})


def _check_status(reply: Reply, shown: str, secrets: Secrets) -> None:
    """Raise :class:`MeasureError` for a reply that is not a 2xx: a redirect says where it
    points, an error what the server said (the API's ``error`` field where it sent JSON)."""
    if 300 <= reply.status < 400:
        where = reply.location or "no Location given"
        raise MeasureError(
            f"Prometheus at {shown} redirected to {redact(where, secrets)} (HTTP "
            f"{reply.status}): give the URL it points to"
        )
    if reply.status >= 400:
        detail: object = reply.body.decode("utf-8", "replace")[:300]
        with contextlib.suppress(json.JSONDecodeError, AttributeError):
            detail = json.loads(str(detail)).get("error", detail)
        raise MeasureError(
            f"Prometheus at {shown} refused the query ({reply.status}): "
            f"{redact(str(detail), secrets)}"
        )


def _number(v: object) -> float | None:
    """A sample value as Prometheus sends it (a string); None when absent or not finite."""
    try:
        x = float(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _value(series: list[dict[str, Any]]) -> float:
    total = 0.0
    for s in series:
        pair = s.get("value")
        x = _number(pair[1]) if isinstance(pair, list) and len(pair) == 2 else None
        total += x or 0.0
    return total


def _expr(metric: str, q: PrometheusQuery, rng: str, by: str | None) -> str:
    inner = f"increase({metric}_total{q.selector}[{rng}])"
    return f"sum by ({by}) ({inner})" if by else f"sum({inner})"


#: the three counters of a window's totals, by the key they are kept under
_COUNTS = (("drafts", DRAFTS), ("draft_tokens", DRAFT_TOKENS), ("accepted", ACCEPTED))


async def _totals(
    api: _Api, at: float, by: str | None, promql: list[str]
) -> dict[str, dict[str, float]]:
    """{label value (or "") → {drafts, draft_tokens, accepted}} over the window ending at ``at``."""
    rng = _dur(api.q.window_s)
    out: dict[str, dict[str, float]] = {}
    for key, metric in _COUNTS:
        expr = _expr(metric, api.q, rng, by)
        promql.append(expr)
        for s in await api.instant(expr, at):
            label = s.get("metric", {}).get(by, "") if by else ""
            out.setdefault(label, {})[key] = _value([s])
    return out


async def _available(api: _Api, at: float) -> str:
    rows = await api.instant(f"count by (model_name) ({DRAFTS}_total)", at)
    names = sorted(str(r.get("metric", {}).get("model_name", "")) for r in rows)
    return ", ".join(names) or "none"


async def _matched_now(api: _Api, at: float) -> bool:
    """Some series match the selector at ``at`` (they exist, even if the window is too short)."""
    return _value(await api.instant(f"count({DRAFTS}_total{api.q.selector})", at)) > 0


async def _scrape_interval_s(api: _Api) -> float:
    """The longest scrape interval of the server's active targets (``/api/v1/targets``); 60 s
    when the server does not say."""
    try:
        reply = await api.reply("/api/v1/targets", {"state": "active"})
        if reply.status >= 300:
            return 60.0
        targets = json.loads(reply.body)["data"]["activeTargets"]
        found = [parse_duration(t["scrapeInterval"]) for t in targets if t.get("scrapeInterval")]
    except (OSError, ValueError, KeyError, TypeError, MeasureError):
        return 60.0
    return max(found, default=60.0)


async def _range(
    api: _Api, end: float, step: float, scrape: float, by: str | None, promql: list[str]
) -> dict[tuple[float, str], dict[str, float]]:
    """Increases over each step of ``[end − window, end]`` on the step grid, each over at least
    two scrape intervals (fewer samples give no increase)."""
    q = api.q
    rng = _dur(max(step, 2 * scrape))
    params = {"start": f"{end - q.window_s + step:.3f}", "end": f"{end:.3f}", "step": _dur(step)}
    points: dict[tuple[float, str], dict[str, float]] = {}
    for key, metric in _COUNTS:
        expr = _expr(metric, q, rng, by)
        promql.append(f"{expr}   (range: step {_dur(step)})")
        for s in await api.result("/api/v1/query_range", {"query": expr, **params}):
            inst = s.get("metric", {}).get(by, "") if by else ""
            for pair in s.get("values", []) or []:
                if not (isinstance(pair, list) and len(pair) == 2):
                    continue
                t, v = _number(pair[0]), _number(pair[1])
                if t is not None and v is not None:
                    points.setdefault((t, inst), {})[key] = v
    return points


def _series_points(points: dict[tuple[float, str], dict[str, float]]) -> list[SeriesPoint]:
    out = []
    for (t, inst), v in sorted(points.items()):
        d, dt, a = v.get("drafts", 0.0), v.get("draft_tokens", 0.0), v.get("accepted", 0.0)
        out.append(
            SeriesPoint(
                end=t,
                instance=inst or None,
                num_drafts=d,
                draft_acceptance_rate=a / dt if dt > 0 else None,
                mean_acceptance_length=1.0 + a / d if d > 0 else None,
            )
        )
    return out


async def _series(
    api: _Api, end: float, scrape: float, replicas: set[str], promql: list[str]
) -> tuple[list[SeriesPoint], list[str]]:
    q = api.q
    assert q.step_s is not None
    points = await _range(api, end, q.step_s, scrape, q.by, promql)
    expected = math.floor((q.window_s - q.step_s) / q.step_s + 1e-9) + 1  # points on the grid
    notes = []
    if q.step_s < 2 * scrape:
        notes.append(
            f"each point covers two scrape intervals ({_dur(2 * scrape)}), more than the step"
        )
    instances = {i for _, i in points} | (replicas if q.by else set())
    for inst in sorted(instances) or [""]:
        have = sum(1 for _, i in points if i == inst)
        if have < expected:
            who = f"{q.by}={inst}: " if q.by else ""
            notes.append(
                f"{who}the range has gaps: {have} of {expected} steps have data (down, not "
                "scraped, or idle)"
            )
    return _series_points(points), notes


async def _no_drafts(api: _Api, end: float, totals: dict[str, float]) -> MeasureError:
    """Why the window holds no draft tokens: no series at all, a window shorter than two
    samples, a selector that matches nothing, or an idle window."""
    q = api.q
    if totals:
        return MeasureError(
            f"no drafts in the last {_dur(q.window_s)} at {q.shown}: idle, or speculation is off",
            exit_code=3,
        )
    seen = await _available(api, end)
    if seen == "none":
        return MeasureError(
            f"{q.shown} holds no {DRAFTS}_total series at all: speculation is off, or "
            "Prometheus does not scrape the servers"
        )
    if await _matched_now(api, end):
        return MeasureError(
            f"the window {_dur(q.window_s)} holds fewer than two samples of the matching "
            "series: widen --window to at least twice the scrape interval",
            exit_code=3,
        )
    return MeasureError(
        f"the selector {q.selector or '{}'} matched no spec-decode series at {q.shown}; "
        f"model_name values there: {seen}"
    )


async def _per_position(api: _Api, end: float, promql: list[str]) -> list[float]:
    """Accepted tokens at each draft position over the window."""
    q = api.q
    pos_expr = f"sum by (position) (increase({PER_POS}_total{q.selector}[{_dur(q.window_s)}]))"
    promql.append(pos_expr)
    per_pos: dict[int, float] = {}
    for s in await api.instant(pos_expr, end):
        with contextlib.suppress(ValueError):
            per_pos[int(s.get("metric", {}).get("position", "0"))] = _value([s])
    return [per_pos.get(i, 0.0) for i in range(max(per_pos) + 1)] if per_pos else []


async def _batches(api: _Api, end: float, scrape: float) -> list[Batch]:
    """Ten pieces of the window, for intervals that do not assume independent steps (none when
    a piece is shorter than two scrape intervals)."""
    piece = api.q.window_s / 10
    if piece < 2 * scrape:
        return []
    grid = await _range(api, end, piece, scrape, None, [])
    return [
        (v.get("drafts", 0.0), v.get("draft_tokens", 0.0), v.get("accepted", 0.0))
        for _, v in sorted(grid.items())
    ]


async def _measure(q: PrometheusQuery, transport: Transport) -> MeasureResult:
    api = _Api(q, transport)
    end = q.end if q.end is not None else time.time()
    promql: list[str] = []
    totals = (await _totals(api, end, None, promql)).get("", {})
    if not totals or totals.get("draft_tokens", 0.0) <= 0:
        raise await _no_drafts(api, end, totals)
    counts = await _per_position(api, end, promql)
    scrape = await _scrape_interval_s(api)
    batches = await _batches(api, end, scrape)
    by = await _totals(api, end, q.by, promql) if q.by else {}
    try:
        # increase() extrapolates each series to the window's edges on its own, and stops a
        # counter's extrapolation at its zero (Prometheus' extrapolatedRate): a counter that
        # started inside the window's first scrape interval is extrapolated less than the
        # others, so the per-position counts may differ from the accepted total by up to what
        # one scrape interval adds at the start, 1.1 intervals of the window
        overall = estimate(
            totals.get("drafts", 0.0), totals["draft_tokens"], totals.get("accepted", 0.0),
            counts, q.k, batches=batches, sum_tol=max(1e-3, min(0.5, 1.1 * scrape / q.window_s)),
        )  # fmt: skip
        k = overall.k
        replicas = {
            label: estimate(
                t.get("drafts", 0.0), t.get("draft_tokens", 0.0), t.get("accepted", 0.0), [], k
            )
            for label, t in by.items()
        }
    except ValueError as exc:
        raise MeasureError(f"{q.shown}: inconsistent counts over the window: {exc}") from None
    resets_expr = f"sum(resets({DRAFTS}_total{q.selector}[{_dur(q.window_s)}]))"
    promql.append(resets_expr)
    reset = _value(await api.instant(resets_expr, end)) > 0
    series, notes = await _series(api, end, scrape, set(replicas), promql) if q.step_s else ([], [])
    notes.append("increase() extrapolates to the window's edges: counts are not whole numbers")
    return MeasureResult(
        verb="measure prometheus",
        source=f"{q.shown} {q.selector or '{}'}",
        window_start=end - q.window_s,
        window_end=end,
        window_s=q.window_s,
        overall=overall,
        series=series,
        replicas=replicas,
        counter_reset=reset,
        promql=promql,
        notes=notes,
        engine=EngineInfo(
            engine="vllm",
            source="Prometheus series vllm:spec_decode_*; Prometheus holds no version",
        ),
    )


def measure_prometheus(q: PrometheusQuery, *, transport: Transport | None = None) -> MeasureResult:
    """Acceptance over the window (and its series), every query through ``transport`` (None: a
    client of its own, in an event loop of its own); raises :class:`MeasureError`."""

    async def run() -> MeasureResult:
        client = transport or StreamClient(connect_timeout_s=q.timeout_s)
        try:
            return await _measure(q, client)
        finally:
            if transport is None:
                await client.aclose()

    return asyncio.run(run())
