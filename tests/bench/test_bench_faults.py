"""Fault injection: 500s, dropped streams, stalls, malformed SSE, refused connections, Ctrl-C.

Nothing that completed is lost and every failure is counted by type.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path

from alphagate.bench.config import BenchConfig, Level
from alphagate.bench.dataset import Prompt
from alphagate.bench.records import RequestRecord
from alphagate.bench.runner import BenchRunner
from alphagate.bench.server import ServerReader
from alphagate.net.client import StreamClient
from alphagate.specs import DeploymentConfig
from alphagate.twin.config import TwinConfig
from tests.conftest import Cli
from tests.servers import faulty_app, serve, twin


def _dataset(tmp_path: Path, modes: list[str]) -> Path:
    p = tmp_path / "faults.jsonl"
    p.write_text(
        "\n".join(json.dumps({"prompt": f"{m} please", "class": m, "max_tokens": 3}) for m in modes)
        + "\n"
    )
    return p


def test_faults_are_counted_and_completed_records_kept(cli: Cli, tmp_path: Path) -> None:
    modes = ["ok", "500", "drop", "stall", "malformed", "ok", "500", "ok"]
    data = _dataset(tmp_path, modes)
    with serve(faulty_app()) as url:
        r = cli.run(
            "bench",
            "--url",
            url,
            "--dataset",
            str(data),
            "--num-prompts",
            str(len(modes)),
            "--concurrency",
            "4",
            "--timeout",
            "0.5",
            "--no-metrics",
            "--max-error-rate",
            "1",
            "--out",
            str(tmp_path / "out"),
            "--json",
        )
    assert r.exit_code == 0, r.output
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    overall = summary["levels"][0]["overall"]
    assert overall["completed"] == 3
    assert overall["failed_by_type"] == {
        "http_500": 2,
        "stream_truncated": 1,
        "stall_timeout": 1,
        "malformed_sse": 1,
    }
    lines = (tmp_path / "out" / "requests.jsonl").read_text().splitlines()
    recs = [RequestRecord.model_validate_json(x) for x in lines]
    assert len(recs) == len(modes)
    ok = [x for x in recs if x.ok]
    assert len(ok) == 3 and all(x.output_tokens == 3 and x.chunk_tokens == [1, 2] for x in ok)
    err500 = next(x for x in recs if x.error_type == "http_500")
    assert err500.error_message == "boom"
    dropped = next(x for x in recs if x.error_type == "stream_truncated")
    assert dropped.chunk_times_s  # the partial stream's chunks are kept


def test_connection_refused_is_a_failure_not_a_crash(cli: Cli, tmp_path: Path) -> None:
    r = cli.run(
        "bench",
        "--url",
        "http://127.0.0.1:9",
        "--num-prompts",
        "3",
        "--no-metrics",
        "--model",
        "m",
        "--dataset",
        "synthetic:in=4,out=4",
        "--out",
        str(tmp_path),
        "--json",
    )
    assert r.exit_code == 1, r.output  # every request failed: a run that measured nothing
    assert "every request failed (3/3)" in r.stderr and "Traceback" not in r.stderr
    s = json.loads((tmp_path / "summary.json").read_text())
    assert s["levels"][0]["overall"]["failed_by_type"] == {"connection_refused": 3}


def test_cancellation_keeps_every_completed_record(tmp_path: Path) -> None:
    cfg = TwinConfig(
        deployment=DeploymentConfig(model="llama-3.3-70b", weight_dtype="fp8"), k=2, time_scale=1.0
    )
    sunk: list[RequestRecord] = []

    async def go(url: str) -> BenchRunner:
        bc = BenchConfig(
            targets=(("default", url),),
            levels=(Level(label="c4", concurrency=4),),
            num_prompts=400,
            scrape_metrics=False,
        )
        prompts = [Prompt("a b c", None, None, 40, True)] * 400
        runner = BenchRunner(bc, prompts, sink=sunk.append)
        task = asyncio.create_task(runner.run())
        while len(sunk) < 6:
            await asyncio.sleep(0.05)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return runner

    with twin(cfg) as (url, _):
        runner = asyncio.run(go(url))
    assert len(sunk) >= 6
    assert [r.id for r in sunk] == [r.id for r in runner.records]
    assert all(r.ok and r.output_tokens == 40 for r in sunk)


def test_counter_reset_mid_run(tmp_path: Path) -> None:
    cfg = TwinConfig(
        deployment=DeploymentConfig(model="llama-3.1-8b", weight_dtype="bf16"), k=3, time_scale=0.0
    )

    async def go(url: str, engine) -> None:  # type: ignore[no-untyped-def]
        bc = BenchConfig(
            targets=(("default", url),),
            levels=(Level(label="c2", concurrency=2),),
            num_prompts=10,
        )
        prompts = [Prompt("a b c", None, None, 30, True)] * 10
        client = StreamClient()
        runner = BenchRunner(bc, prompts, transport=client)
        reader = ServerReader(bc)
        for i in range(8):
            await runner.one("default", url, "c2", i, prompts[i % 10])
        before = await reader.counters(client, [url + "/metrics"])
        engine.reset_metrics()  # the server "restarts": counters drop to zero
        for i in range(3):
            await runner.one("default", url, "c2", i, prompts[i])
        after = await reader.counters(client, [url + "/metrics"])
        from alphagate.measure.prom import spec_delta

        assert before is not None and after is not None
        d = spec_delta(before, after)
        assert d.counter_reset
        # only the post-reset window is counted: 3 requests × 29 decode steps at most
        assert 0 < d.num_drafts <= 3 * 29
        assert after[0].drafts == d.num_drafts
        await client.aclose()

    with twin(cfg) as (url, engine):
        asyncio.run(go(url, engine))


def test_a_request_that_cannot_be_sent_is_a_record_not_a_crash() -> None:
    """A header HTTP cannot carry (the CLI refuses it first) or a prompt that is no text (a lone
    surrogate; the dataset loader refuses it first) makes a client_error record, never a raise
    out of the run."""

    async def go() -> list[RequestRecord]:
        bad_header = BenchConfig(
            targets=(("default", "http://127.0.0.1:9"),),
            levels=(Level(label="c1", concurrency=1),),
            headers={"X-A": "b\nc"},
            scrape_metrics=False,
            model="m",
        )
        a = BenchRunner(bad_header, [Prompt("a", None, None, 2)])
        b = BenchRunner(
            bad_header.model_copy(update={"headers": {}}), [Prompt("a\udcffb", None, None, 2)]
        )
        out = [await a.one("default", "http://127.0.0.1:9", "c1", 0, a.prompts[0])]
        out.append(await b.one("default", "http://127.0.0.1:9", "c1", 0, b.prompts[0]))
        await a.aclose()
        await b.aclose()
        return out

    header, text = asyncio.run(go())
    assert header.error_type == "client_error" and "'X-A'" in (header.error_message or "")
    assert "b\nc" not in (header.error_message or "")  # the value is never shown
    assert text.error_type == "client_error" and "JSON" in (text.error_message or "")
