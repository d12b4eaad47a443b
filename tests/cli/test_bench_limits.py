"""`--max-errors`, `--max-error-rate` and `--max-duration` stop a run cleanly: no new request is
sent, what is in flight finishes, summary.json is written and says why the run stopped."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from alphagate.specs import DeploymentConfig
from alphagate.twin.config import TwinConfig
from tests.conftest import Cli
from tests.servers import faulty_app, serve, twin


def _dataset(tmp_path: Path, modes: list[str]) -> Path:
    p = tmp_path / "modes.jsonl"
    p.write_text("".join(json.dumps({"prompt": f"{m} x", "max_tokens": 3}) + "\n" for m in modes))
    return p


def _summary(out: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    summary = json.loads((out / "summary.json").read_text())
    records = [json.loads(x) for x in (out / "requests.jsonl").read_text().splitlines()]
    return summary, records


def test_max_errors_stops_after_n_failures(cli: Cli, tmp_path: Path) -> None:
    data = _dataset(tmp_path, ["500"] * 30)
    with serve(faulty_app()) as url:
        r = cli.run(
            "bench", "--url", url, "--dataset", str(data), "-n", "30", "--concurrency", "1",
            "--no-metrics", "--max-errors", "3", "--max-error-rate", "1",
            "--out", str(tmp_path / "o"), "--json",
        )  # fmt: skip
    assert r.exit_code == 1, r.output  # every request failed: not a measurement
    summary, records = _summary(tmp_path / "o")
    assert summary == json.loads(r.stdout)
    assert summary["stop_reason"] == "3 failed requests (--max-errors 3)"
    assert len(records) == 3  # one at a time: the third failure stops the run
    assert summary["levels"][0]["overall"]["failed_by_type"] == {"http_500": 3}


def test_max_error_rate_stops_a_failing_level(cli: Cli, tmp_path: Path) -> None:
    data = _dataset(tmp_path, ["ok", "500"] * 30)
    with serve(faulty_app()) as url:
        r = cli.run(
            "bench", "--url", url, "--dataset", str(data), "-n", "60", "--concurrency", "1",
            "--no-metrics", "--max-error-rate", "0.3", "--seed", "1",
            "--out", str(tmp_path / "o"), "--json",
        )  # fmt: skip
    assert r.exit_code == 1, r.output
    summary, records = _summary(tmp_path / "o")
    # judged at each failure once a level has 20 requests (BenchConfig.MIN_REQUESTS_FOR_RATE):
    # one request at a time, the run stops at the first failure from the 20th request on
    n = len(records)
    assert 20 <= n < 60 and records[-1]["error_type"] == "http_500"
    assert all(x["error_type"] is None for x in records[19:-1])
    failed = sum(x["error_type"] is not None for x in records)
    assert failed / n > 0.3
    assert summary["stop_reason"] == f"error rate {failed}/{n} above --max-error-rate 0.3"
    assert f"error rate {failed}/{n} is above --max-error-rate 0.3" in r.stderr


def test_max_duration_stops_sending_and_lets_requests_finish(cli: Cli, tmp_path: Path) -> None:
    slow = TwinConfig(
        deployment=DeploymentConfig(model="llama-3.3-70b", weight_dtype="fp8"), k=2, time_scale=1.0
    )
    with twin(slow) as (url, _):
        r = cli.run(
            "bench", "--url", url, "-n", "400", "--concurrency", "1,2", "--no-metrics",
            "--dataset", "synthetic:in=8,out=16", "--max-duration", "0.6",
            "--out", str(tmp_path / "o"), "--json",
        )  # fmt: skip
    assert r.exit_code == 0, r.output
    summary, records = _summary(tmp_path / "o")
    assert summary["stop_reason"] == "max duration 0.6 s reached"
    assert 1 <= len(records) < 400
    assert all(x["error_type"] is None and x["output_tokens"] == 16 for x in records)
    assert [lv["level"] for lv in summary["levels"]] == ["c1"]  # c2 never started


def test_max_duration_ends_a_sweep_with_the_knees_so_far(cli: Cli, tmp_path: Path) -> None:
    fast = TwinConfig(
        deployment=DeploymentConfig(model="llama-3.1-8b", weight_dtype="bf16"), k=0, time_scale=1.0
    )
    with twin(fast) as (url, _):
        r = cli.run(
            "bench", "--url", url, "-n", "4", "--sweep", "concurrency:1..4096", "--no-metrics",
            "--slo", "e2e_ms=60000", "--dataset", "synthetic:in=8,out=8", "--max-duration", "1",
            "--out", str(tmp_path / "o"), "--json",
        )  # fmt: skip
    assert r.exit_code == 0, r.output
    summary, _ = _summary(tmp_path / "o")
    assert summary["stop_reason"] == "max duration 1 s reached"
    (knee,) = summary["sweep"]["knees"]
    # the level cut short does not count: the knee is the last whole level that met the SLO
    assert knee["loads"] and all(knee["met"]) and knee["knee"] == knee["loads"][-1]
    assert knee["first_failing"] is None
    # the level running when time ran out is summarised too (unless time ran out between levels)
    assert len(summary["levels"]) - len(knee["loads"]) in (0, 1)
