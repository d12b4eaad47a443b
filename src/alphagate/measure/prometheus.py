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
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from pydantic import Field, field_validator

from alphagate.core.records import Frozen
from alphagate.measure.estimate import estimate
from alphagate.measure.prom import ACCEPTED, DRAFT_TOKENS, DRAFTS, PER_POS
from alphagate.measure.results import MeasureError, MeasureResult, SeriesPoint

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
    window_s: float = Field(gt=0, allow_inf_nan=False)
    step_s: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    by: str | None = Field(default=None, description="a label to split by, e.g. instance")
    end: float | None = Field(default=None, description="Unix time of the window's end (now)")
    k: int | None = Field(default=None, ge=1, le=64)
    timeout_s: float = Field(default=10.0, gt=0)

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


def _get(q: PrometheusQuery, path: str, params: dict[str, str]) -> list[dict[str, Any]]:
    url = q.url.rstrip("/") + path + "?" + urllib.parse.urlencode(params)
    try:
        with urllib.request.urlopen(url, timeout=q.timeout_s) as resp:
            body = resp.read()
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode("utf-8", "replace")[:300]
        with contextlib.suppress(json.JSONDecodeError, AttributeError):
            detail = json.loads(detail).get("error", detail)
        raise MeasureError(
            f"Prometheus at {q.url} refused the query ({exc.code}): {detail}"
        ) from None
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        raise MeasureError(f"cannot reach Prometheus at {q.url}: {exc}") from None
    try:
        data = json.loads(body)
    except json.JSONDecodeError:
        raise MeasureError(
            f"{q.url} did not answer with Prometheus API JSON (is it Prometheus?)"
        ) from None
    if not isinstance(data, dict) or data.get("status") != "success":
        err = data.get("error") if isinstance(data, dict) else None
        raise MeasureError(f"Prometheus at {q.url}: {err or 'not a success response'}")
    result = data.get("data", {}).get("result", [])
    return result if isinstance(result, list) else []


def _instant(q: PrometheusQuery, expr: str, at: float) -> list[dict[str, Any]]:
    return _get(q, "/api/v1/query", {"query": expr, "time": f"{at:.3f}"})


def _value(series: list[dict[str, Any]]) -> float:
    total = 0.0
    for s in series:
        v = float(s["value"][1])
        total += v if math.isfinite(v) else 0.0
    return total


def _expr(metric: str, q: PrometheusQuery, rng: str, by: str | None) -> str:
    inner = f"increase({metric}_total{q.selector}[{rng}])"
    return f"sum by ({by}) ({inner})" if by else f"sum({inner})"


def _totals(
    q: PrometheusQuery, at: float, by: str | None, promql: list[str]
) -> dict[str, dict[str, float]]:
    """{label value (or "") → {drafts, draft_tokens, accepted}} over the window ending at ``at``."""
    rng = _dur(q.window_s)
    out: dict[str, dict[str, float]] = {}
    for key, metric in (("drafts", DRAFTS), ("draft_tokens", DRAFT_TOKENS), ("accepted", ACCEPTED)):
        expr = _expr(metric, q, rng, by)
        promql.append(expr)
        for s in _instant(q, expr, at):
            label = s.get("metric", {}).get(by, "") if by else ""
            out.setdefault(label, {})[key] = _value([s])
    return out


def _available(q: PrometheusQuery, at: float) -> str:
    rows = _instant(q, f"count by (model_name) ({DRAFTS}_total)", at)
    names = sorted(str(r.get("metric", {}).get("model_name", "")) for r in rows)
    return ", ".join(names) or "none"


def _series(
    q: PrometheusQuery, end: float, promql: list[str]
) -> tuple[list[SeriesPoint], list[str]]:
    assert q.step_s is not None
    step = _dur(q.step_s)
    params = {"start": f"{end - q.window_s + q.step_s:.3f}", "end": f"{end:.3f}", "step": step}
    points: dict[tuple[float, str], dict[str, float]] = {}
    for key, metric in (("drafts", DRAFTS), ("draft_tokens", DRAFT_TOKENS), ("accepted", ACCEPTED)):
        expr = _expr(metric, q, step, q.by)
        promql.append(f"{expr}   (range: step {step})")
        for s in _get(q, "/api/v1/query_range", {"query": expr, **params}):
            inst = s.get("metric", {}).get(q.by, "") if q.by else ""
            for t, v in s.get("values", []):
                points.setdefault((float(t), inst), {})[key] = float(v)
    expected = round(q.window_s / q.step_s)
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
    notes = []
    per_inst = len({i for _, i in points}) or 1
    if len(points) < expected * per_inst:
        notes.append(
            f"the range has gaps: {len(points)} of {expected * per_inst} steps have data "
            "(the servers were down, not scraped, or idle)"
        )
    return out, notes


def measure_prometheus(q: PrometheusQuery) -> MeasureResult:
    """Acceptance over the window (and its series); raises :class:`MeasureError`."""
    end = q.end if q.end is not None else time.time()
    promql: list[str] = []
    totals = _totals(q, end, None, promql).get("", {})
    if not totals or totals.get("draft_tokens", 0.0) <= 0:
        if not totals:
            seen = _available(q, end)
            if seen == "none":
                raise MeasureError(
                    f"{q.url} holds no {DRAFTS}_total series at all: speculation is off, or "
                    "Prometheus does not scrape the servers"
                )
            raise MeasureError(
                f"the selector {q.selector or '{}'} matched no spec-decode series at {q.url}; "
                f"model_name values there: {seen}"
            )
        raise MeasureError(
            f"no drafts in the last {_dur(q.window_s)} at {q.url}: idle, or speculation is off",
            exit_code=3,
        )
    pos_expr = f"sum by (position) (increase({PER_POS}_total{q.selector}[{_dur(q.window_s)}]))"
    promql.append(pos_expr)
    per_pos: dict[int, float] = {}
    for s in _instant(q, pos_expr, end):
        per_pos[int(s.get("metric", {}).get("position", "0"))] = _value([s])
    k = q.k or ((max(per_pos) + 1) if per_pos else None)
    counts = [per_pos.get(i, 0.0) for i in range(k or 0)] if per_pos else []
    overall = estimate(
        totals.get("drafts", 0.0), totals["draft_tokens"], totals.get("accepted", 0.0), counts, k
    )
    replicas = {}
    if q.by:
        for label, t in _totals(q, end, q.by, promql).items():
            replicas[label] = estimate(
                t.get("drafts", 0.0), t.get("draft_tokens", 0.0), t.get("accepted", 0.0), [], k
            )
    resets_expr = f"sum(resets({DRAFTS}_total{q.selector}[{_dur(q.window_s)}]))"
    promql.append(resets_expr)
    reset = _value(_instant(q, resets_expr, end)) > 0
    series, notes = _series(q, end, promql) if q.step_s else ([], [])
    notes.append("increase() extrapolates to the window's edges: counts are not whole numbers")
    return MeasureResult(
        verb="measure prometheus",
        source=f"{q.url} {q.selector or '{}'}",
        window_start=end - q.window_s,
        window_end=end,
        window_s=q.window_s,
        overall=overall,
        series=series,
        replicas=replicas,
        counter_reset=reset,
        promql=promql,
        notes=notes,
    )
