"""The bench's run loop against a vLLM answered in memory (a ``MockTransport``): records, the
acceptance between two scrapes, server faults as typed records, the fault limits and the sink —
no network. ``test_bench_faults.py`` and ``test_bench_twin.py`` run it against real servers."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from alphagate.bench.config import BenchConfig, Level
from alphagate.bench.dataset import Prompt
from alphagate.bench.records import LevelSummary, RequestRecord, merge_runs, summarize_level
from alphagate.bench.runner import BenchRunner
from alphagate.net.mock import MockTransport, Request, Response
from alphagate.net.transport import ConnectError, StreamTruncated
from tests.mock_servers import MockVllm, exposition, sse

URL = "http://vllm:8000"


def _config(**kw: Any) -> BenchConfig:
    base: dict[str, Any] = {
        "targets": (("default", URL),),
        "levels": (Level(label="c2", concurrency=2),),
        "num_prompts": 6,
    }
    return BenchConfig(**(base | kw))


def _run(
    cfg: BenchConfig, handler: Callable[[Request], Response], **kw: Any
) -> tuple[BenchRunner, MockTransport]:
    mock = MockTransport(handler)
    prompts = [Prompt("a b c", None, None, 4, True)] * cfg.num_prompts
    runner = BenchRunner(cfg, prompts, transport=mock, **kw)
    asyncio.run(runner.run())
    return runner, mock


def test_a_closed_loop_streams_every_request_and_reads_the_counters_around_it() -> None:
    server = MockVllm(k=3, tokens=4)
    sunk: list[RequestRecord] = []
    runner, mock = _run(_config(), server, sink=sunk.append)
    assert sorted(r.id for r in runner.records) == list(range(6)) and sunk == runner.records
    assert all(r.ok and r.output_tokens == 4 and len(r.chunk_times_s) == 4 for r in sunk)
    assert runner.model == "m" and runner.model_root == "/models/m"
    (level,) = runner.levels
    acc = level.acceptance
    assert acc is not None and acc.num_drafts == 6 * 4 and acc.k == 3
    assert acc.draft_acceptance_rate == pytest.approx(1.5 / 3)
    paths = [r.path for r in mock.requests]
    assert paths[:2] == ["/v1/models", "/metrics"] and paths[-1] == "/metrics"
    posts = [r for r in mock.requests if r.method == "POST"]
    assert len(posts) == 6 and all(b'"model":"m"' in r.body for r in posts)
    assert not mock.closed  # a transport given is its owner's to close


def _faults(n: int, req: Request) -> Response | None:
    error = b'{"error": {"message": "boom"}}'
    return [
        None,
        Response.json(error, 500),
        Response(200, chunks=sse(4)[:2], content_type="text/event-stream",
                 error=StreamTruncated("the connection closed before the reply ended")),
        Response.json(b'{"choices": [{"text": "whole"}]}'),
        Response(307, location="http://elsewhere/v1"),
        Response(200, chunks=(b"data: [DONE]\n\n",), content_type="text/event-stream"),
    ][n]  # fmt: skip


def test_server_faults_are_typed_records() -> None:
    cfg = _config(levels=(Level(label="c1", concurrency=1),), max_error_rate=1.0)
    runner, _ = _run(cfg, MockVllm(fail=_faults))
    by_type = {r.error_type: r for r in runner.records}
    assert set(by_type) == {
        None, "http_500", "stream_truncated", "not_a_stream", "http_307", "empty_stream"
    }  # fmt: skip
    assert by_type["http_500"].error_message == "boom"
    assert len(by_type["stream_truncated"].chunk_times_s) == 2  # what came is kept
    assert "redirected to http://elsewhere/v1" in (by_type["http_307"].error_message or "")


def test_a_refused_connection_is_a_record_and_max_errors_stops_the_run() -> None:
    def refuse(req: Request) -> Response:
        if req.method == "GET":
            return Response(404)
        raise ConnectError("cannot connect to vllm:8000: Connection refused")

    cfg = _config(levels=(Level(label="c1", concurrency=1),), max_errors=2, model="m")
    runner, _ = _run(cfg, refuse)
    assert [r.error_type for r in runner.records] == ["connection_refused"] * 2
    assert runner.stop_reason == "2 failed requests (--max-errors 2)"


def test_a_records_file_that_cannot_be_written_stops_the_run_cleanly() -> None:
    def full(rec: RequestRecord) -> None:
        raise OSError(28, "No space left on device")

    cfg = _config(levels=(Level(label="c1", concurrency=1),))
    runner, _ = _run(cfg, MockVllm(), sink=full)
    assert len(runner.records) == 1
    assert runner.stop_reason == "cannot write the records file: No space left on device"


def test_counters_no_decoder_produces_leave_the_acceptance_out_and_say_why() -> None:
    scrapes = [0]

    def handler(req: Request) -> Response:
        if req.path == "/metrics":
            scrapes[0] += 1
            n = scrapes[0]
            return Response.text(exposition(10 * n, 30 * n, 50 * n, []))  # accepted > drafted
        return MockVllm()(req)

    runner, _ = _run(_config(), handler)
    (level,) = runner.levels
    assert level.acceptance is None and "cannot be a decoder's" in (level.acceptance_problem or "")
    assert runner.metrics_problems == [f"default c2: {level.acceptance_problem}"]


def test_a_metrics_url_that_cannot_be_read_is_reported_once() -> None:
    def handler(req: Request) -> Response:
        if req.path == "/metrics":
            return Response(403, reason="Forbidden")
        return MockVllm()(req)

    cfg = _config(
        levels=(Level(label="c1", concurrency=1), Level(label="c2", concurrency=2)),
        metrics_urls=("http://user:secret@vllm:9000/metrics",),
    )
    runner, mock = _run(cfg, handler)
    assert runner.metrics_problems == [
        "http://user:<redacted>@vllm:9000/metrics could not be read (HTTP 403): no acceptance "
        "from it"
    ]
    scrape = next(r for r in mock.requests if r.path == "/metrics")
    assert scrape.url == "http://vllm:9000/metrics"
    assert scrape.headers["Authorization"].startswith("Basic ")
    assert all(lv.acceptance is None for lv in runner.levels)


def test_repeats_merge_whether_the_server_speculates() -> None:
    """A repeat whose scrape failed (unknown) does not hide what the others read."""

    def run(state: bool | None) -> LevelSummary:
        return summarize_level("t", "http://x", "c1", 1, None, [], None, speculating=state)

    assert merge_runs([run(None), run(False)], []).speculating is False
    assert merge_runs([run(None), run(False), run(True)], []).speculating is True
    assert merge_runs([run(None), run(None)], []).speculating is None
