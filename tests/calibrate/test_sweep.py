"""``alphagate calibrate --url`` against servers on 127.0.0.1 that misbehave: every network wait
bounded (a server that never answers), every failure named with the server's status and
message, counters that contradict each other refused naming the counts, a key over plain http
to another host warned about, and an interrupted sweep keeping the levels that completed (a
profile marked partial and their records) — in a real subprocess, for SIGINT and SIGTERM."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from pydantic import SecretStr

from alphagate.calibrate.sweep import FIRST_TOKEN_S, PER_TOKEN_S, LiveSweep
from alphagate.specs import DeploymentConfig
from alphagate.twin.background import serve_in_thread
from alphagate.twin.config import TwinConfig
from alphagate.twin.server import create_app
from tests.conftest import Cli

FAST = TwinConfig(
    deployment=DeploymentConfig(model="llama-3.1-8b", weight_dtype="bf16"), k=0, time_scale=0.0
)
SMALL = ["--model", "llama-3.1-8b", "--dtype", "bf16", "--concurrency", "1",
         "--requests-per-user", "1", "--prompt-tokens", "8", "--output-tokens", "4",
         "--prefill-probe-tokens", "0"]  # fmt: skip


@contextmanager
def silent_server() -> Iterator[str]:
    """A port that takes connections (the kernel's backlog) and never answers: a stalled
    server."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(64)
        yield f"http://127.0.0.1:{s.getsockname()[1]}"


def test_a_server_that_never_answers_ends_the_sweep(cli: Cli, tmp_path: Path) -> None:
    """Each wait is bounded by --timeout (the /v1/models and /metrics reads, the request), and
    the warm-up's first failure ends the sweep: a handful of waits, not one per request."""
    with silent_server() as url:
        r = cli.run("calibrate", "--url", url, *SMALL, "--timeout", "0.2",
                    "--out", str(tmp_path / "p.json"))  # fmt: skip
    assert r.exit_code == 2, r.output
    assert "the warm-up did not complete" in r.stderr and "stall_timeout" in r.stderr
    assert not (tmp_path / "p.json").exists()


def test_the_request_deadline_follows_the_output_tokens() -> None:
    sweep = LiveSweep(urls=("http://127.0.0.1:1",))
    assert sweep.request_deadline_s(128) == FIRST_TOKEN_S + 128 * PER_TOKEN_S
    assert sweep.request_deadline_s(8) < sweep.request_deadline_s(128)
    assert sweep.model_copy(update={"timeout_s": 3.0}).request_deadline_s(128) == 3.0


def _failing_app(status: int, message: str) -> web.Application:
    async def models(request: web.Request) -> web.Response:
        return web.json_response({"data": [{"id": "m"}]})

    async def refuse(request: web.Request) -> web.Response:
        body = {"error": {"message": message, "type": "ServiceUnavailable", "code": status}}
        return web.json_response(body, status=status)

    app = web.Application()
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/completions", refuse)
    return app


@pytest.mark.parametrize(("status", "message"), [(503, "the model is still loading"),
                                                 (400, "max_tokens is too large")])  # fmt: skip
def test_a_failing_server_is_named_with_its_status_and_message(
    cli: Cli, status: int, message: str, tmp_path: Path
) -> None:
    with serve_in_thread(_failing_app(status, message)) as url:
        r = cli.run("calibrate", "--url", url, *SMALL, "--out", str(tmp_path / "p.json"))
    assert r.exit_code == 2, r.output
    err = " ".join(r.stderr.split())  # the message may wrap
    assert f"HTTP {status}: {message}" in err and "every request failed" in err


def _inconsistent_metrics() -> web.Application:
    """vLLM's counters, growing at every scrape by 10 drafts, 30 draft tokens and 50 accepted
    tokens: more accepted than drafted, which no decoder produces."""
    scrapes = [0]

    async def metrics(request: web.Request) -> web.Response:
        n = scrapes[0] = scrapes[0] + 1
        text = "".join(
            f"# TYPE vllm:spec_decode_{name} counter\nvllm:spec_decode_{name}_total"
            f'{{model_name="m"}} {n * per}\n'
            for name, per in (("num_drafts", 10), ("num_draft_tokens", 30),
                              ("num_accepted_tokens", 50))
        )  # fmt: skip
        return web.Response(text=text, content_type="text/plain")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    return app


def test_accepted_above_drafted_is_refused_naming_the_counts(cli: Cli, tmp_path: Path) -> None:
    with (
        serve_in_thread(create_app(FAST), handler_cancellation=True) as url,
        serve_in_thread(_inconsistent_metrics()) as metrics,
    ):
        r = cli.run("calibrate", "--url", url, "--metrics-url", f"{metrics}/metrics", *SMALL,
                    "--out", str(tmp_path / "p.json"))  # fmt: skip
    assert r.exit_code == 2 and isinstance(r.exception, SystemExit), r.output
    err = " ".join(r.stderr.split())
    assert "50 accepted tokens exceed 30 drafted" in err and "cannot be calibrated" in err, err


def test_a_key_over_plain_http_to_another_host_is_warned_about() -> None:
    key = SecretStr("sk-test-1234")
    far = LiveSweep(urls=("http://10.1.2.3:8000",), api_key=key).warnings()
    assert len(far) == 1 and "10.1.2.3" in far[0] and "plain http" in far[0]
    assert LiveSweep(urls=("http://u:p@10.1.2.3:8000",)).warnings()  # URL credentials too
    for quiet in ("https://10.1.2.3", "http://127.0.0.1:8000", "http://localhost:8000"):
        assert not LiveSweep(urls=(quiet,), api_key=key).warnings(), quiet
    assert not LiveSweep(urls=("http://10.1.2.3:8000",)).warnings()  # nothing secret to send
    both = LiveSweep(urls=("http://127.0.0.1:1",), metrics_urls=("http://10.1.2.3/metrics",),
                     api_key=key)  # fmt: skip
    assert both.warnings()  # bench sends the key to the metrics endpoint as well


# ---------------------------------------------------------------------------- interrupted
def _counting_twin(posts: list[float]) -> web.Application:
    """A twin at real speed (8B on one H100: ~7 ms a step) counting the completions it is sent."""

    @web.middleware
    async def count(request: web.Request, handler: Any) -> web.StreamResponse:
        if request.path == "/v1/completions":
            posts.append(time.monotonic())
        resp: web.StreamResponse = await handler(request)
        return resp

    app = create_app(FAST.model_copy(update={"time_scale": 1.0}))
    app.middlewares.insert(0, count)
    return app


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_sweep_keeps_the_levels_that_completed(
    tmp_path: Path, sig: signal.Signals
) -> None:
    """Interrupted inside the second level (c2), the first (c1) is kept: its records under
    --bench-out and a profile fitted on it, marked partial; exit 130, no traceback."""
    posts: list[float] = []
    out, bench_out = tmp_path / "p.json", tmp_path / "b"
    with serve_in_thread(_counting_twin(posts), handler_cancellation=True) as url:
        proc = subprocess.Popen(
            [sys.executable, "-m", "alphagate", "calibrate", "--url", url, "--model",
             "llama-3.1-8b", "--dtype", "bf16", "--concurrency", "1,2", "--requests-per-user",
             "8", "--prompt-tokens", "16", "--output-tokens", "32", "--prefill-probe-tokens",
             "0", "--out", str(out), "--bench-out", str(bench_out)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        # 2 warm-up requests, the 8 of c1, then 2 of c2's 16: c1 is over, c2 under way
        deadline = time.monotonic() + 60
        while len(posts) < 2 + 8 + 2 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.01)
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=60)
    assert len(posts) < 2 + 8 + 16, "the sweep finished before the signal"
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and "interrupted" in stderr and "partial" in stderr
    profile = json.loads(out.read_text())
    assert profile["partial"] is True and profile["valid_concurrency"] == [1, 1]
    assert {p["label"] for p in profile["points"]} == {"c1"}
    summary = json.loads((bench_out / "server-0" / "summary.json").read_text())
    assert [lv["level"] for lv in summary["levels"]] == ["c1"] and summary["interrupted"]
    records = (bench_out / "server-0" / "requests.jsonl").read_text().splitlines()
    assert len(records) == 8 and {json.loads(x)["level"] for x in records} == {"c1"}
    # what was kept re-fits: the records are a bench result calibrate reads
    again = Cli().run("calibrate", str(bench_out / "server-0"), "--model", "llama-3.1-8b",
                      "--dtype", "bf16", "--out", str(tmp_path / "again.json"), "--json")  # fmt: skip
    assert again.exit_code in (0, 1), again.output
    assert json.loads(again.stdout)["valid_concurrency"] == [1, 1]
