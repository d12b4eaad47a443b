"""One ``/metrics`` scrape, and ``measure live`` on top of it, through a ``MockTransport``: what
is sent, what each kind of failure says, and the window's counts — no network."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from alphagate.core.secrets import REDACTED
from alphagate.measure.live import LiveConfig, LiveWindow, measure_live
from alphagate.measure.prom import SpecCounters
from alphagate.measure.results import MeasureError, MeasureResult
from alphagate.measure.scrape import ScrapeError, scrape_counters
from alphagate.net.mock import Handler, MockTransport, Request, Response
from alphagate.net.transport import ConnectError
from tests.mock_servers import MockVllm, exposition

PAGE = exposition(100, 300, 150, [80, 50, 20], model="llama")
CANARY = "sk-canary-5e3f"


def _scrape(handler: Handler, **kw: Any) -> SpecCounters:
    mock = MockTransport(handler)
    return asyncio.run(scrape_counters(mock, "http://h:8000/metrics", timeout_s=1.0, **kw))


def test_a_scrape_reads_the_counters_of_the_series_asked_for() -> None:
    snap = _scrape(lambda req: Response.text(PAGE))
    assert (snap.drafts, snap.draft_tokens, snap.accepted) == (100, 300, 150)
    assert snap.per_pos == {0: 80, 1: 50, 2: 20}
    other = _scrape(lambda req: Response.text(PAGE), model_name="other")
    assert other.present and not other.matched and other.models_seen == {"llama"}


async def _slow(req: Request) -> Response:
    await asyncio.Event().wait()  # never replies: the timeout is the only way out
    return Response.text(PAGE)


def _refuse(req: Request) -> Response:
    raise ConnectError("cannot connect to h:8000: Connection refused")


@pytest.mark.parametrize(
    ("handler", "kind"),
    [
        (_slow, "timeout"),
        (_refuse, "unreachable"),
        (lambda req: Response(404, b"no", reason="Not Found"), "status"),
        (lambda req: Response(200, b"\x89PNG\r\n\x1a\n\xff\xfe"), "not_text"),
        (lambda req: Response.text("<html>{not prometheus</html>"), "not_exposition"),
    ],
)
def test_each_failure_has_its_kind(handler: Handler, kind: str) -> None:
    with pytest.raises(ScrapeError) as info:
        asyncio.run(
            scrape_counters(MockTransport(handler), "http://h:8000/metrics", timeout_s=0.05)
        )
    assert info.value.kind == kind


def _live(handler: Handler, url: str = "http://h:8000", **kw: Any) -> MeasureResult:
    cfg = LiveConfig(urls=(url,), interval_s=0.001, **kw)
    return measure_live(cfg, transport=MockTransport(handler))


def test_measure_live_counts_the_increase_between_scrapes() -> None:
    server = MockVllm(k=3, tokens=10, model="llama")

    def handler(req: Request) -> Response:
        if req.path.endswith("/metrics"):
            server.stream()  # ten more drafts between every two scrapes
        return server(req)

    m = _live(handler, min_drafts=50)
    e = m.overall
    assert e is not None and e.k == 3
    assert e.num_drafts >= 50 and e.num_drafts % 10 == 0
    assert e.draft_acceptance_rate == pytest.approx((1.0 + 0.5) / 3)
    assert m.models == ["llama"]
    # the first scrape counts nothing: every increase comes after it
    scrapes = [r for r in server.seen if r.path.endswith("/metrics")]
    assert e.num_drafts == 10 * (len(scrapes) - 1)
    # and the reading says where it came from: vLLM's GET /version, asked once
    assert m.engine is not None and (m.engine.engine, m.engine.version) == ("vllm", "0.32.0")
    assert m.engine.source == "GET /version"
    assert sum(r.path.endswith("/version") for r in server.seen) == 1


def test_credentials_in_the_url_are_a_header_and_never_shown() -> None:
    seen: list[Request] = []

    def handler(req: Request) -> Response:
        seen.append(req)
        return Response.text(exposition(len(seen) * 10, len(seen) * 30, 0, []))

    m = _live(handler, url=f"http://user:{CANARY}@h:8000/?token={CANARY}", min_drafts=10)
    assert all(r.headers.get("Authorization", "").startswith("Basic ") for r in seen)
    assert all("@" not in r.url and r.url.startswith("http://h:8000/") for r in seen)
    assert any(r.url.startswith("http://h:8000/metrics?") for r in seen)
    assert CANARY not in m.source and REDACTED in m.source


@pytest.mark.parametrize(
    ("handler", "says"),
    [
        (_refuse, "cannot reach http://h:8000/metrics: ConnectError: cannot connect"),
        (lambda req: Response(404, reason="Not Found"), "answered HTTP 404 Not Found"),
        (lambda req: Response(200, b"\x89PNG\xff\xfe binary"), "not UTF-8 text"),
        (lambda req: Response.text("<html>{</html>"), "did not return Prometheus text"),
        (lambda req: Response.text("up 1\n"), "speculation is off"),
    ],
)
def test_a_source_that_cannot_be_read_is_a_clear_error(handler: Handler, says: str) -> None:
    with pytest.raises(MeasureError, match=says):
        _live(handler)


def test_an_error_names_no_secret() -> None:
    def echo(req: Request) -> Response:
        raise ConnectError(f"refused {req.headers['Authorization']} at {req.url}")

    with pytest.raises(MeasureError) as info:
        _live(echo, url=f"http://{CANARY}@h:8000/metrics?api_key={CANARY}")
    assert CANARY not in str(info.value) and REDACTED in str(info.value)


def test_sglang_without_counters_falls_back_to_server_info() -> None:
    def handler(req: Request) -> Response:
        if req.path == "/get_server_info":
            return Response.json(b'{"internal_states": [{"avg_spec_accept_length": 2.5}]}')
        return Response.text('sglang:num_running_reqs{model_name="glm"} 0.0\n')

    m = _live(handler)
    assert m.overall.sglang_accept_length == pytest.approx(2.5)
    assert any("since the server started" in n for n in m.notes)


def test_a_replica_that_blips_after_the_first_scrape_is_noted_and_skipped() -> None:
    calls = {"n": 0}

    def handler(req: Request) -> Response:
        if not req.path.endswith("/metrics"):  # GET /version, /get_server_info: no answer
            return Response(404, reason="Not Found")
        calls["n"] += 1
        if calls["n"] == 2:
            return Response(503, reason="Service Unavailable")
        return Response.text(exposition(calls["n"] * 10, calls["n"] * 30, 0, []))

    win = LiveWindow(LiveConfig(urls=("http://h:8000",)), transport=MockTransport(handler))
    for _ in range(3):
        asyncio.run(win.scrape())
    assert len(win.notes) == 1 and "HTTP 503 Service Unavailable" in win.notes[0]
    assert win.result().overall.num_drafts == 20
