"""``calibrate``'s live sweep against a vLLM answered in memory (a ``MockTransport``): every
level's requests, scrapes and model lookup go through the transport given, credentials as a
header, and a failing server named with its status and message — no network.
``test_sweep.py`` runs the sweep against real servers on 127.0.0.1."""

from __future__ import annotations

import json
from typing import Any

import pytest

from alphagate.calibrate.sweep import MIN_REQUESTS, LiveSweep, run_live_sweep
from alphagate.core.errors import ConfigError
from alphagate.net.mock import MockTransport, Request, Response
from tests.mock_servers import MockVllm

CANARY = "sk-canary-0c1d"


def _sweep(**kw: Any) -> LiveSweep:
    base: dict[str, Any] = {
        "urls": (f"http://user:{CANARY}@vllm:8000",),
        "concurrencies": (1, 2),
        "requests_per_user": 1,
        "prompt_tokens": 8,
        "output_tokens": 4,
        "prefill_probe_tokens": 16,
        "warmup_requests": 1,
    }
    return LiveSweep(**(base | kw))


def test_every_level_goes_through_the_transport_given() -> None:
    server = MockVllm(k=3, tokens=4)
    mock = MockTransport(server)
    observations, runs = run_live_sweep(_sweep(), transport=mock)
    posts = [r for r in mock.requests if r.method == "POST"]
    # the warm-up, then two concurrency levels and the prefill probe of MIN_REQUESTS each
    assert len(posts) == 1 + 3 * MIN_REQUESTS
    asked = [json.loads(r.body)["max_tokens"] for r in posts]
    assert asked == [4] * (1 + 2 * MIN_REQUESTS) + [8] * MIN_REQUESTS
    assert all(r.headers["Authorization"].startswith("Basic ") for r in mock.requests)
    assert all("@" not in r.url for r in mock.requests)
    assert [o.label for o in observations] == ["c1", "c2", "prefill-probe"]
    assert all(o.k == 3 for o in observations)
    assert [len(run.records) for run in runs] == [2 * MIN_REQUESTS, MIN_REQUESTS]
    assert all(CANARY not in run.url for run in runs)


def test_a_failing_server_is_named_with_its_status_and_message() -> None:
    def loading(n: int, req: Request) -> Response:
        body = b'{"error": {"message": "the model is still loading", "code": 503}}'
        return Response.json(body, 503)

    with pytest.raises(ConfigError) as info:
        run_live_sweep(_sweep(), transport=MockTransport(MockVllm(fail=loading)))
    said = str(info.value)
    assert "the warm-up did not complete" in said and "HTTP 503: the model is still loading" in said
    assert CANARY not in said


def _merged_stream(tokens: int) -> tuple[bytes, ...]:
    """A loaded baseline's stream: vLLM merges the tokens a slow reader has not taken yet, so
    chunks carry two tokens although nothing speculates."""
    chunks = []
    for i in range(0, tokens, 2):
        payload = {"choices": [{"text": "xx"}], "usage": {"prompt_tokens": 3,
                                                           "completion_tokens": i + 2}}  # fmt: skip
        chunks.append(b"data: " + json.dumps(payload).encode() + b"\n\n")
    return (*chunks, b"data: [DONE]\n\n")


def _baseline(metrics: str | None) -> Any:
    """A vLLM without speculation whose /metrics answers ``metrics`` (None: 404)."""
    server = MockVllm(k=0, tokens=4)

    def handle(req: Request) -> Response:
        if req.path.endswith("/metrics"):
            if metrics is None:
                return Response(404, reason="Not Found")
            return Response.text(metrics)
        if req.method == "POST":
            return Response(200, chunks=_merged_stream(4), content_type="text/event-stream")
        return server(req)

    return handle


def test_a_baseline_whose_stream_merges_tokens_is_not_taken_for_speculation() -> None:
    """Two tokens per chunk from a server whose own /metrics has no spec-decode counters: the
    stream merged them (a loaded server), and the levels are a baseline's (K = 0). Without a
    /metrics to tell, the same stream is refused: it may be a speculating server."""
    vllm_metrics = "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 0\n"
    observations, _ = run_live_sweep(_sweep(), transport=MockTransport(_baseline(vllm_metrics)))
    assert [o.k for o in observations] == [0, 0, 0]
    with pytest.raises(ConfigError, match="tokens per chunk — the server speculates"):
        run_live_sweep(_sweep(), transport=MockTransport(_baseline(None)))
    other = "# TYPE proxy_requests counter\nproxy_requests_total 3\n"  # not the engine's own
    with pytest.raises(ConfigError, match="tokens per chunk"):
        run_live_sweep(_sweep(), transport=MockTransport(_baseline(other)))
