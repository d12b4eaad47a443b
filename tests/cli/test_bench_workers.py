"""`alphagate bench --workers N`: the same run as one process on a deterministic twin, one records
file and one summary, SIGTERM keeping every completed record, and a clear error for a bad N."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from alphagate.core.traffic import TrafficClass
from alphagate.specs import DeploymentConfig, WorkloadConfig
from alphagate.twin.config import TwinConfig
from tests.conftest import Cli
from tests.servers import hangup_as_a_terminal_sends_it, twin

# α = 1 accepts every draft and α = 0 none: acceptance counts do not depend on batching or timing
DETERMINISTIC = TwinConfig(
    deployment=DeploymentConfig(model="llama-3.1-8b", weight_dtype="bf16"),
    k=3,
    time_scale=0.0,
    workload=WorkloadConfig(
        classes=(
            TrafficClass(name="all", share=0.5, alpha=1.0),
            TrafficClass(name="none", share=0.5, alpha=0.0),
        )
    ),
    api_key="k-123",
)


def _dataset(path: Path, n: int) -> Path:
    lines = [
        {"prompt": f"p {i} " * 4, "class": "all" if i % 3 else "none", "max_tokens": 10 + i % 7}
        for i in range(n)
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def _bench(cli: Cli, url: str, out: Path, data: Path, workers: int, *load: str) -> dict[str, Any]:
    r = cli.run(
        "bench",
        "--url",
        url,
        "--api-key",
        "k-123",
        "--dataset",
        str(data),
        "-n",
        "60",
        *load,
        "--workers",
        str(workers),
        "--out",
        str(out),
        "--json",
    )
    assert r.exit_code == 0, r.output
    summary: dict[str, Any] = json.loads(r.stdout)
    return summary


def _essence(level: dict[str, Any]) -> dict[str, Any]:
    acc = level["acceptance"]
    return {
        "completed": level["overall"]["completed"],
        "failed": level["overall"]["failed"],
        "output_tokens": level["overall"]["output_tokens"],
        "classes": {c: s["completed"] for c, s in level["classes"].items()},
        "drafts": acc["num_drafts"],
        "accepted": acc["num_accepted_tokens"],
        "per_pos": acc["accepted_per_pos"],
        "rho": acc["draft_acceptance_rate"],
        "tau": acc["mean_acceptance_length"],
    }


@pytest.mark.parametrize("load", [("-c", "6"), ("--rate", "400", "-c", "5")])
def test_workers_give_the_single_process_run(
    cli: Cli, tmp_path: Path, load: tuple[str, ...]
) -> None:
    data = _dataset(tmp_path / "d.jsonl", 60)
    with twin(DETERMINISTIC) as (url, _):
        one = _bench(cli, url, tmp_path / "one", data, 1, *load)
        three = _bench(cli, url, tmp_path / "three", data, 3, *load)
    assert _essence(three["levels"][0]) == _essence(one["levels"][0])
    assert 0.0 < one["levels"][0]["acceptance"]["draft_acceptance_rate"] < 1.0
    records = [
        json.loads(x) for x in (tmp_path / "three" / "requests.jsonl").read_text().splitlines()
    ]
    assert len(records) == 60 and sorted(r["id"] for r in records) == list(range(60))
    assert {r["run_id"] for r in records} == {three["run_id"]}
    assert three["worker_failures"] == []
    for f in (tmp_path / "three").iterdir():
        assert "k-123" not in f.read_text()  # the key reached the workers, and no file


def test_workers_flag_is_checked(cli: Cli) -> None:
    r = cli.run("bench", "--url", "http://127.0.0.1:9", "--workers", "0")
    assert r.exit_code == 2 and "--workers" in r.output


SLOW = TwinConfig(
    deployment=DeploymentConfig(model="llama-3.3-70b", weight_dtype="fp8"), k=2, time_scale=1.0
)


@pytest.mark.parametrize(
    ("group", "sig"),
    [(False, signal.SIGTERM), (True, signal.SIGTERM), (True, signal.SIGHUP)],
    ids=["coordinator", "process-group", "hangup"],  # hangup: the terminal closed
)
def test_sigterm_stops_every_worker_and_keeps_the_records(
    tmp_path: Path, group: bool, sig: signal.Signals
) -> None:
    out = tmp_path / "o"
    with twin(SLOW) as (url, _):
        proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "alphagate", "bench", "--url", url, "-n", "200", "-c", "4"),
                *("--dataset", "synthetic:in=8,out=24", "--workers", "2", "--out", str(out)),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=hangup_as_a_terminal_sends_it,
            start_new_session=True,
        )
        records = out / "requests.jsonl"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if records.exists() and records.read_text().count("\n") >= 4:
                break
            time.sleep(0.05)
        if group:  # as `timeout` or a container runtime does: every process gets it
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and "interrupted" in stderr
    recs = [json.loads(x) for x in records.read_text().splitlines()]
    assert 4 <= len(recs) < 200 and all(r["error_type"] is None for r in recs)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["interrupted"] is True and summary["worker_failures"] == [], stderr
    assert summary["levels"][0]["overall"]["completed"] == len(recs)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # the whole session ends: workers and their forkserver
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        pytest.fail("bench worker processes outlived the run")
