"""``measure prometheus`` against Prometheus' HTTP API answered in memory (a ``MockTransport``):
the queries sent, the counts read back, credentials as a header, and every way the server can
refuse — no network. ``test_prometheus.py`` runs the same against Debian's real server."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from alphagate.core.secrets import REDACTED
from alphagate.measure.prom import ACCEPTED, DRAFT_TOKENS, DRAFTS
from alphagate.measure.prometheus import PrometheusQuery, measure_prometheus
from alphagate.measure.results import MeasureError, MeasureResult
from alphagate.net.mock import Handler, MockTransport, Request, Response
from alphagate.net.transport import ConnectError
from tests.mock_servers import MockPrometheus

CANARY = "sk-canary-77aa"
COUNTS = {DRAFTS: 1000.0, DRAFT_TOKENS: 3000.0, ACCEPTED: 1500.0}


def _measure(handler: Handler, url: str = "http://prom:9090", **kw: Any) -> MeasureResult:
    q = PrometheusQuery(url=url, window_s=600, end=1_000_000.0, **kw)
    return measure_prometheus(q, transport=MockTransport(handler))


def test_the_window_s_counts_come_back_with_the_promql_that_read_them() -> None:
    prom = MockPrometheus(COUNTS, per_pos=(800.0, 500.0, 200.0))
    m = _measure(prom, selector='{model_name="m"}')
    e = m.overall
    assert (e.num_drafts, e.k) == (1000.0, 3)
    assert e.draft_acceptance_rate == pytest.approx(0.5)
    assert e.alpha_by_pos[0] == pytest.approx(0.8)
    first = parse_qs(urlsplit(prom.seen[0].url).query)
    assert first["query"] == [f'sum(increase({DRAFTS}_total{{model_name="m"}}[600s]))']
    assert first["time"] == ["1000000.000"]
    assert m.promql[0] == first["query"][0]
    # the window in ten pieces for the interval: range queries at a step of 60 s
    ranges = [r for r in prom.seen if r.path == "/api/v1/query_range"]
    assert ranges and all(parse_qs(urlsplit(r.url).query)["step"] == ["60s"] for r in ranges)


def test_a_step_gives_a_series_and_its_gaps() -> None:
    prom = MockPrometheus(COUNTS, per_pos=(800.0, 500.0, 200.0), steps=5)
    m = _measure(prom, step_s=60)
    assert len(m.series) == 5
    assert all(p.draft_acceptance_rate == pytest.approx(0.5) for p in m.series)
    assert any("10 steps" in n and "5 of" in n for n in m.notes)


def test_credentials_go_as_a_header_and_the_query_key_stays() -> None:
    prom = MockPrometheus(COUNTS, per_pos=(800.0, 500.0, 200.0))
    m = _measure(prom, url=f"http://user:{CANARY}@prom:9090/?token={CANARY}")
    assert all(r.headers.get("Authorization", "").startswith("Basic ") for r in prom.seen)
    assert all(r.url.startswith("http://prom:9090/api/v1/") for r in prom.seen)
    assert all(parse_qs(urlsplit(r.url).query)["token"] == [CANARY] for r in prom.seen)
    assert CANARY not in m.source and REDACTED in m.source


def _refuse(req: Request) -> Response:
    raise ConnectError(f"cannot connect to prom:9090: refused {req.headers.get('Authorization')}")


@pytest.mark.parametrize(
    ("handler", "says", "code"),
    [
        (_refuse, "cannot reach Prometheus at", 2),
        (
            lambda req: Response.json(
                b'{"status": "error", "error": "parse error at char 3"}', 400
            ),
            r"refused the query \(400\): parse error at char 3",
            2,
        ),
        (
            lambda req: Response.text("<html>hi</html>"),
            "did not answer with Prometheus API JSON",
            2,
        ),
        (lambda req: Response(301, location="https://prom/"), "redirected to https://prom/", 2),
        (MockPrometheus({}, models=()), "holds no vllm:spec_decode_num_drafts_total series", 2),
        (MockPrometheus({}, models=("other",)), "fewer than two samples", 3),
        (MockPrometheus({DRAFTS: 0.0, DRAFT_TOKENS: 0.0}), "no drafts in the last 600s", 3),
    ],
)
def test_every_refusal_is_a_clear_error(handler: Handler, says: str, code: int) -> None:
    with pytest.raises(MeasureError, match=says) as info:
        _measure(handler, url=f"http://user:{CANARY}@prom:9090")
    assert info.value.exit_code == code
    assert CANARY not in str(info.value)


def test_a_refusal_that_echoes_the_key_is_redacted() -> None:
    def echo(req: Request) -> Response:
        body = f'{{"status": "error", "error": "bad key {CANARY}"}}'.encode()
        return Response.json(body, 401)

    with pytest.raises(MeasureError, match="refused the query") as info:
        _measure(echo, url=f"http://user:{CANARY}@prom:9090")
    assert CANARY not in str(info.value) and REDACTED in str(info.value)
