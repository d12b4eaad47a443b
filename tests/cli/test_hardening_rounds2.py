"""Hardening, second round: runs that never ended, tracebacks, wrong or misleading answers and
input accepted without a word — each case a reviewer reproduced, against real servers on
127.0.0.1 (aiohttp apps, the twin) and through the command line as a user runs it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from alphagate.bench.config import BenchConfig, Level
from alphagate.specs import DeploymentConfig
from alphagate.twin.config import TwinConfig
from tests.conftest import Cli
from tests.servers import serve, twin

FAST = TwinConfig(
    deployment=DeploymentConfig(model="llama-3.1-8b", weight_dtype="bf16"), k=2, time_scale=0.0
)


def _chunk(text: str, n: int) -> bytes:
    obj = {
        "choices": [{"index": 0, "text": text, "finish_reason": None}],
        "usage": {"prompt_tokens": 1, "completion_tokens": n},
    }
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def _odd_app() -> web.Application:
    """A completions endpoint whose reply is picked by the prompt's first word."""

    async def completions(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        with contextlib.suppress(ConnectionError):  # the client hangs up on the endless ones
            await reply(request, resp)
        return resp

    async def reply(request: web.Request, resp: web.StreamResponse) -> None:
        body = await request.json()
        mode = str(body.get("prompt", "ok")).split()[0]
        if mode == "redirect":
            raise web.HTTPTemporaryRedirect("http://127.0.0.1:1/v1/completions")
        if mode == "json":  # a server that ignores "stream": true
            raise web.HTTPOk(
                text=json.dumps({"choices": [{"text": " a b"}], "usage": {"total": 2}}),
                content_type="application/json",
            )
        await resp.prepare(request)
        if mode == "empty":  # 200 and [DONE] with no chunk: nothing was generated
            await resp.write(b"data: [DONE]\n\n")
            return
        if mode == "nobody":
            await resp.write_eof()
            return
        if mode == "trickle":  # one byte at a time, each well inside the stall timeout
            for b in _chunk(" a", 1) * 10_000:
                await resp.write(bytes([b]))
                await asyncio.sleep(0.02)
        if mode == "noline":  # 64 KiB writes with no newline, without end
            for _ in range(1024):
                await resp.write(b"data: " + b"x" * 65_536)
        if mode == "bigline":  # one 64 MiB line, in 1 MiB writes
            await resp.write(b"data: ")
            for _ in range(64):
                await resp.write(b"y" * 2**20)
            await resp.write(b"\n\n")
        if mode == "ping":  # an event with no data line: not an event (WHATWG)
            await resp.write(b"event: ping\n\n: keep-alive\n\n")
        await resp.write(_chunk(" a", 1))
        if mode == "ping":
            await resp.write(b"event: ping\n\n")
        await resp.write(_chunk(" b", 2))
        await resp.write(b"data: [DONE]\n\n")

    app = web.Application()
    app.router.add_post("/v1/completions", completions)
    return app


def _modes(tmp_path: Path, modes: list[str], max_tokens: int = 2) -> Path:
    p = tmp_path / "modes.jsonl"
    lines = [json.dumps({"prompt": f"{m} x", "max_tokens": max_tokens}) for m in modes]
    p.write_text("\n".join(lines) + "\n")
    return p


def _bench(cli: Cli, url: str, data: Path, out: Path, n: int, *extra: str) -> Any:
    return cli.run(
        "bench", "--url", url, "--dataset", str(data), "-n", str(n), "--concurrency", "8",
        "--no-metrics", "--max-error-rate", "1", "--out", str(out), "--json", *extra,
    )  # fmt: skip


def _records(out: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (out / "requests.jsonl").read_text().splitlines()]


# ---------------------------------------------------------------- runs that never ended
def test_trickling_and_endless_streams_end_with_every_record(cli: Cli, tmp_path: Path) -> None:
    """A server that trickles a byte every 20 ms never stalls (--timeout is per gap): the total
    deadline ends it. A stream without a newline, or one 64 MiB line, fails at the 4 MiB event
    limit. Every record is kept and summary.json written."""
    modes = ["ok", "trickle", "noline", "bigline", "ok"]
    out = tmp_path / "o"
    with serve(_odd_app()) as url:
        r = _bench(
            cli, url, _modes(tmp_path, modes), out, len(modes),
            "--timeout", "1", "--request-timeout", "1.5",
        )  # fmt: skip
    assert r.exit_code == 0, r.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["levels"][0]["overall"]["failed_by_type"] == {
        "request_timeout": 1,
        "malformed_sse": 2,
    }
    recs = _records(out)
    assert len(recs) == len(modes)
    timed_out = next(x for x in recs if x["error_type"] == "request_timeout")
    assert "1.5 s in all" in timed_out["error_message"]
    assert all("4 MiB" in x["error_message"] for x in recs if x["error_type"] == "malformed_sse")


def test_the_default_deadline_is_the_stall_timeout_plus_a_second_per_token(
    cli: Cli, tmp_path: Path
) -> None:
    cfg = BenchConfig(targets=(("t", "http://x"),), levels=(Level(label="c1", concurrency=1),))
    assert cfg.request_deadline_s(256) == 60.0 + 256  # --timeout 60, 1 s per token
    assert cfg.request_deadline_s(None) == 60.0 + 4096  # no max_tokens: 4,096 tokens assumed
    fixed = cfg.model_copy(update={"request_timeout_s": 5.0})
    assert fixed.request_deadline_s(256) == 5.0
    out = tmp_path / "o"
    with serve(_odd_app()) as url:
        r = _bench(
            cli, url, _modes(tmp_path, ["trickle"], max_tokens=1), out, 1, "--timeout", "0.5"
        )
    assert r.exit_code == 1, r.output  # every request failed
    (rec,) = _records(out)
    assert rec["error_type"] == "request_timeout" and "1.5 s in all" in rec["error_message"]


# ---------------------------------------------------------------- wrong or misleading answers
def test_each_kind_of_non_stream_is_named(cli: Cli, tmp_path: Path) -> None:
    modes = ["ping", "redirect", "json", "empty", "nobody", "ok"]
    out = tmp_path / "o"
    with serve(_odd_app()) as url:
        r = _bench(cli, url, _modes(tmp_path, modes), out, len(modes))
    assert r.exit_code == 0, r.output
    by_prompt = {x["id"]: x for x in _records(out)}
    msgs = {x["error_type"]: x["error_message"] for x in by_prompt.values() if x["error_type"]}
    assert msgs.keys() == {"http_307", "not_a_stream", "empty_stream"}
    assert "redirected to http://127.0.0.1:1/v1/completions" in msgs["http_307"]
    assert "answered 200 with a JSON body, not a stream" in msgs["not_a_stream"]
    empties = [x["error_message"] for x in by_prompt.values() if x["error_type"] == "empty_stream"]
    assert sorted(empties) == [
        "the server answered 200 with an empty body: no SSE event",
        "the stream ended with [DONE] before any chunk: nothing streamed",
    ]
    ok = [x for x in by_prompt.values() if x["error_type"] is None]
    assert len(ok) == 2 and all(x["output_tokens"] == 2 for x in ok)  # ping's stream too


def _metrics_app(step: dict[str, float]) -> web.Application:
    """A /metrics page whose counters grow by ``step`` at each scrape."""
    state = {k: 0.0 for k in step}

    async def metrics(request: web.Request) -> web.Response:
        for k in state:
            state[k] += step[k]
        lines = []
        for name in ("drafts", "draft_tokens", "accepted_tokens"):
            lines += [
                f"# TYPE vllm:spec_decode_num_{name} counter",
                f'vllm:spec_decode_num_{name}_total{{engine="0",model_name="m"}} {state[name]}',
            ]
        return web.Response(text="\n".join(lines) + "\n")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    return app


def test_counters_no_decoder_produces_are_bad_input_with_every_record_kept(
    cli: Cli, tmp_path: Path
) -> None:
    """--metrics-url whose accepted tokens grow faster than the drafted ones: exit 2 naming the
    flag; the records and summary.json are written, the level's acceptance left out."""
    out = tmp_path / "o"
    bad = {"drafts": 10.0, "draft_tokens": 30.0, "accepted_tokens": 95.0}
    with twin(FAST) as (url, _), serve(_metrics_app(bad)) as murl:
        r = cli.run(
            "bench", "--url", url, "--metrics-url", murl + "/metrics", "-n", "3",
            "--dataset", "synthetic:in=4,out=4", "--out", str(out), "--json",
        )  # fmt: skip
    assert r.exit_code == 2, r.output
    assert "--metrics-url" in r.stderr and "exceed" in r.stderr and "left out" in r.stderr
    assert "Traceback" not in r.output
    level = json.loads((out / "summary.json").read_text())["levels"][0]
    assert level["acceptance"] is None and level["overall"]["completed"] == 3
    assert "95 accepted tokens exceed 30 drafted" in level["acceptance_problem"]
    assert len(_records(out)) == 3


def test_a_metrics_url_that_cannot_be_read_is_said_with_every_record_kept(
    cli: Cli, tmp_path: Path
) -> None:
    """A --metrics-url that answers 404 (or is not reachable) is named with what it answered,
    exit 2; the run's records and summary are kept. The target's own /metrics stays optional."""
    out = tmp_path / "o"
    with twin(FAST) as (url, _):
        r = cli.run(
            "bench", "--url", url, "--metrics-url", url + "/nowhere", "-n", "3",
            "--dataset", "synthetic:in=4,out=4", "--out", str(out),
        )  # fmt: skip
    assert r.exit_code == 2, r.output
    assert "--metrics-url" in r.stderr and "could not be read (HTTP 404)" in r.stderr
    assert json.loads((out / "summary.json").read_text())["levels"][0]["overall"]["completed"] == 3


# ---------------------------------------------------------------- input accepted without a word
@pytest.mark.parametrize(
    ("args", "flag", "words"),
    [
        (["bench", "--url", "http://x", "-c", ""], "--concurrency", "empty"),
        (["bench", "--url", "http://x", "-c", "1,,2"], "--concurrency", "empty entry"),
        (["bench", "--url", "http://x", "-c", "4,"], "--concurrency", "empty entry"),
        (["bench", "--url", "http://x", "--header", "X-A: b\nc"], "--header", "line break"),
        (
            ["bench", "--url", "http://x", "--dataset", "synthetic:in=99999999999,out=4"],
            "--dataset",
            "1..1,048,576",
        ),
        (
            ["bench", "--url", "http://x", "--dataset", "synthetic:in=1048576,out=4", "-n", "100"],
            "--dataset",
            "in memory",
        ),
        (["simulate", "--class", "a:1:0.7", "--alpha", "0.5"], "--alpha", "drop --alpha"),
        (["twin", "--served-model-name", "a:b"], "--served-model-name", "separates"),
        (["twin", "--host", "not-an-ip.."], "--host", "neither an IP address"),
        (["twin", "--host", "ä.."], "--host", "neither an IP address"),
        (["twin", "--class", "a:1:0.5", "--alpha", "0.3"], "--alpha", "drop --alpha"),
    ],
)
def test_wrong_input_is_refused_naming_the_flag(
    cli: Cli, tmp_path: Path, args: list[str], flag: str, words: str
) -> None:
    extra = ["--out", str(tmp_path / "o")] if args[0] == "bench" else []
    r = cli.run(*args, *extra)
    assert r.exit_code == 2, r.output
    assert flag in r.output and words in r.output, r.output
    assert "Traceback" not in r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)


def test_a_path_that_is_not_utf8(cli: Cli, tmp_path: Path) -> None:
    """bench refuses a non-UTF-8 --out or --dataset before any work (summary.json names its
    files in UTF-8); report renders such paths with the bytes escaped."""
    odd = Path(os.fsdecode(bytes(tmp_path) + b"/r\xff"))
    r = cli.run("bench", "--url", "http://x", "--out", str(odd))
    assert r.exit_code == 2 and "--out" in r.output and "not valid UTF-8" in r.output
    r = cli.run("bench", "--url", "http://x", "--dataset", str(odd) + ".jsonl", "--out", "o")
    assert r.exit_code == 2 and "--dataset" in r.output and "\\xff" in r.output
    results = Path(str(odd) + ".json")
    d = cli.json("model", "speedup", "--alpha", "0.7", "--k", "3")
    results.write_text(json.dumps(d))
    page = Path(str(odd) + ".html")
    r = cli.run("report", str(results), "--out", str(page), "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["out"].endswith("r\\xff.html")
    html = page.read_text(encoding="utf-8")
    assert "$&#39;" in html and "r\\xff.json" in html  # the command, quoted for bash


def test_trace_timestamps_negative_nan_and_far_off(cli: Cli, tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text(
        '{"timestamp": 0, "input_length": 3, "output_length": 2}\n'
        '{"timestamp": -5, "input_length": 3, "output_length": 2}\n'
        '{"timestamp": NaN, "input_length": 3, "output_length": 2}\n'
    )
    r = cli.run("bench", "--url", "http://x", "--trace", str(trace), "--strict", "--out", "o")
    assert r.exit_code == 2 and "t.jsonl:2" in r.output and "≥ 0" in r.output
    out = tmp_path / "skipped"  # without --strict: skipped, said on stderr even with --json
    r = cli.run(
        "bench", "--url", "http://127.0.0.1:9", "--trace", str(trace), "--no-metrics",
        "--model", "m", "--out", str(out), "--json",
    )  # fmt: skip
    assert r.exit_code == 1, r.output  # the one request left was refused: nothing measured
    assert "skipped:" in r.stderr and "t.jsonl:2" in r.stderr and "t.jsonl:3" in r.stderr
    assert len(json.loads((out / "summary.json").read_text())["dataset_problems"]) == 2
    csv = tmp_path / "t.csv"
    csv.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n0,3,2\nnan,3,2\n")
    r = cli.run("bench", "--url", "http://x", "--trace", str(csv), "--strict", "--out", "o")
    assert r.exit_code == 2 and "t.csv:3" in r.output and "finite" in r.output
    far = tmp_path / "far.jsonl"  # the second request 31 years after the first
    far.write_text(
        '{"timestamp": 0, "input_length": 3, "output_length": 2}\n'
        '{"timestamp": 1e12, "input_length": 3, "output_length": 2}\n'
    )
    r = cli.run("bench", "--url", "http://x", "--trace", str(far), "--out", str(tmp_path / "o"))
    assert r.exit_code == 2 and "--trace" in r.output and "24 h" in r.output, r.output
    out = tmp_path / "capped"
    with twin(FAST) as (url, _):  # --max-duration ends the wait for the far-off request
        r = cli.run(
            "bench", "--url", url, "--trace", str(far), "--max-duration", "0.5",
            "--no-progress", "--out", str(out),
        )  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "ends it after 0 s" in r.stderr or "ends it after 1 s" in r.stderr, r.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["stop_reason"] == "max duration 0.5 s reached"
    assert summary["levels"][0]["overall"]["completed"] == 1


def test_more_workers_than_requests_use_fewer_and_say_so(cli: Cli, tmp_path: Path) -> None:
    with twin(FAST) as (url, _):
        r = cli.run(
            "bench", "--url", url, "--workers", "3", "-n", "4", "-c", "1",
            "--dataset", "synthetic:in=4,out=4", "--no-progress", "--out", str(tmp_path / "o"),
        )  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "--workers 3: only 1 would have work (at most 1 request in flight)" in r.stderr
    assert len(_records(tmp_path / "o")) == 4


def test_measure_offline_bad_checkpoints_and_drafters_exit_2(
    cli: Cli, tiny: Any, tmp_path: Path
) -> None:
    from tests.measure.offline.fixtures import greedy_log

    log = tmp_path / "log.jsonl"
    greedy_log(tiny, log, ["def f(x):\n    ", "Dear reader,"], 8, ["a", "b"])
    base = ["measure", "offline", "--log", str(log), "--target", str(tiny.target), "--json"]
    ck = tmp_path / "ck.jsonl"
    first = cli.json(*base[:-1], "--drafter", "ngram", "--checkpoint", str(ck))
    ck.write_text(ck.read_text()[:-30])  # cut mid-line
    again = cli.json(*base[:-1], "--drafter", "ngram", "--checkpoint", str(ck))
    assert again["overall"] == first["overall"]
    assert any("cut-off line" in n for n in again["notes"])
    r = cli.run(*base, "--drafter", "ngram", "--k", "2", "--checkpoint", str(ck))
    assert r.exit_code == 2 and "written by another run" in r.output and "ck.jsonl" in r.output
    r = cli.run(*base, "--drafter", f"draft_model:{tiny.eagle3}")
    assert r.exit_code == 2 and "do not fit its architecture" in " ".join(r.output.split())
    assert "Traceback" not in r.output
