"""Servers in memory, for the unit tier: handlers of :class:`~alphagate.net.mock.MockTransport`
that answer as vLLM (``/v1/models``, streamed ``/v1/completions``, ``/metrics``) and as a
Prometheus server's HTTP API do — no socket, no process."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlsplit

from alphagate.measure.prom import ACCEPTED, DRAFT_TOKENS, DRAFTS, PER_POS
from alphagate.net.mock import Request, Response

__all__ = ["MockPrometheus", "MockVllm", "exposition"]


def exposition(
    drafts: float,
    draft_tokens: float,
    accepted: float,
    per_pos: list[float],
    model: str = "m",
) -> str:
    """vLLM's spec-decode counters as Prometheus text exposition, one engine."""
    labels = f'engine="0",model_name="{model}"'
    lines = []
    for name, value in ((DRAFTS, drafts), (DRAFT_TOKENS, draft_tokens), (ACCEPTED, accepted)):
        lines += [f"# TYPE {name} counter", f"{name}_total{{{labels}}} {value}"]
    lines.append(f"# TYPE {PER_POS} counter")
    lines += [f'{PER_POS}_total{{{labels},position="{i}"}} {v}' for i, v in enumerate(per_pos)]
    return "\n".join(lines) + "\n"


@dataclass
class MockVllm:
    """A vLLM server with ``k`` draft positions: each streamed request sends ``tokens`` chunks of
    one token, each one draft of which position ``j`` is accepted with the share ``alpha[j]``
    (counted in whole tokens, per request); ``fail`` answers a request instead (by its number)."""

    k: int = 3
    tokens: int = 4
    model: str = "m"
    per_draft: tuple[float, ...] = (1.0, 0.5, 0.0)
    fail: Callable[[int, Request], Response | None] | None = None
    completions: int = 0
    drafts: float = 0.0
    per_pos: list[float] = field(default_factory=list)
    seen: list[Request] = field(default_factory=list)
    version: str = "0.32.0"

    def __call__(self, req: Request) -> Response:
        self.seen.append(req)
        if req.path.endswith("/version"):  # vLLM's GET /version
            return Response.json(json.dumps({"version": self.version}).encode())
        if req.method == "GET" and not req.path.endswith(("/v1/models", "/metrics")):
            return Response(404, reason="Not Found")
        if req.path.endswith("/v1/models"):
            body = {"data": [{"id": self.model, "root": f"/models/{self.model}"}]}
            return Response.json(json.dumps(body).encode())
        if req.path.endswith("/metrics"):
            accepted = sum(self.per_pos)
            return Response.text(
                exposition(self.drafts, self.drafts * self.k, accepted, self.per_pos, self.model)
            )
        n = self.completions
        self.completions += 1
        if self.fail is not None:
            answer = self.fail(n, req)
            if answer is not None:
                return answer
        return self.stream()

    def stream(self) -> Response:
        """One request's stream, its drafts counted."""
        self.drafts += self.tokens
        self.per_pos = [
            (self.per_pos[j] if j < len(self.per_pos) else 0.0) + round(a * self.tokens)
            for j, a in enumerate(self.per_draft[: self.k])
        ]
        return Response(200, chunks=sse(self.tokens), content_type="text/event-stream")


def sse(tokens: int) -> tuple[bytes, ...]:
    """An OpenAI completions stream of ``tokens`` one-token chunks, usage on each, then [DONE]."""
    chunks = []
    for i in range(tokens):
        payload = {"choices": [{"text": "x"}], "usage": {"prompt_tokens": 3,
                                                          "completion_tokens": i + 1}}  # fmt: skip
        chunks.append(b"data: " + json.dumps(payload).encode() + b"\n\n")
    return (*chunks, b"data: [DONE]\n\n")


@dataclass
class MockPrometheus:
    """Prometheus' HTTP API over fixed increases: ``values`` maps a metric name (``DRAFTS`` …) to
    its increase over any window; ``per_pos`` the accepted tokens by position; ``models`` what
    ``count by (model_name)`` lists. Range queries answer ``steps`` points of ``values / steps``.
    """

    values: Mapping[str, float]
    per_pos: tuple[float, ...] = ()
    models: tuple[str, ...] = ("m",)
    scrape_interval: str = "1s"
    steps: int = 5
    seen: list[Request] = field(default_factory=list)

    def __call__(self, req: Request) -> Response:
        self.seen.append(req)
        query = dict(_params(req.url))
        if req.path.endswith("/api/v1/targets"):
            targets = [{"scrapeInterval": self.scrape_interval}]
            return _ok({"activeTargets": targets})
        expr = query.get("query", "")
        if req.path.endswith("/api/v1/query_range"):
            return _ok({"resultType": "matrix", "result": self._range(expr, query)})
        return _ok({"resultType": "vector", "result": self._instant(expr)})

    def _instant(self, expr: str) -> list[dict[str, object]]:
        if expr.startswith("count by (model_name)"):
            return [{"metric": {"model_name": m}, "value": [0, "1"]} for m in self.models]
        if expr.startswith("count("):
            return [{"metric": {}, "value": [0, str(len(self.models))]}] if self.models else []
        if "by (position)" in expr:
            return [
                {"metric": {"position": str(i)}, "value": [0, str(v)]}
                for i, v in enumerate(self.per_pos)
            ]
        if expr.startswith("sum(resets("):
            return [{"metric": {}, "value": [0, "0"]}]
        metric = _metric_of(expr)
        if metric is None or metric not in self.values:
            return []
        return [{"metric": {}, "value": [0, str(self.values[metric])]}]

    def _range(self, expr: str, query: dict[str, str]) -> list[dict[str, object]]:
        metric = _metric_of(expr)
        if metric is None or metric not in self.values:
            return []
        end = float(query["end"])
        step = float(query["step"].removesuffix("s"))
        points = [
            [end - step * (self.steps - 1 - i), str(self.values[metric] / self.steps)]
            for i in range(self.steps)
        ]
        return [{"metric": {}, "values": points}]


def _params(url: str) -> list[tuple[str, str]]:
    return parse_qsl(urlsplit(url).query)


def _metric_of(expr: str) -> str | None:
    """The counter an ``increase(NAME_total…)`` expression reads (the longest name that fits)."""
    names = sorted((DRAFTS, DRAFT_TOKENS, ACCEPTED), key=len, reverse=True)
    return next((n for n in names if f"increase({n}_total" in expr), None)


def _ok(data: object) -> Response:
    return Response.json(json.dumps({"status": "success", "data": data}).encode())
