"""Ctrl-C, SIGTERM and SIGHUP end a bench run the same way: every completed record kept,
summary.json written and marked interrupted, exit code 130 — in a real subprocess, against a real
server. A Ctrl-C while the command is still starting exits 130 without a traceback."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from alphagate.specs import DeploymentConfig
from alphagate.twin.config import TwinConfig
from tests.servers import hangup_as_a_terminal_sends_it, twin

SLOW = TwinConfig(
    deployment=DeploymentConfig(model="llama-3.3-70b", weight_dtype="fp8"), k=2, time_scale=1.0
)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_signal_keeps_records_and_writes_the_summary(tmp_path: Path, sig: signal.Signals) -> None:
    out = tmp_path / "o"
    with twin(SLOW) as (url, _):
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "alphagate",
                "bench",
                "--url",
                url,
                "-n",
                "200",
                "--concurrency",
                "2",
                "--dataset",
                "synthetic:in=8,out=24",
                "--out",
                str(out),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=hangup_as_a_terminal_sends_it,
        )
        records = out / "requests.jsonl"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if records.exists() and records.read_text().count("\n") >= 3:
                break
            time.sleep(0.05)
        proc.send_signal(sig)
        stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and "interrupted" in stderr
    lines = records.read_text().splitlines()
    recs = [json.loads(x) for x in lines]
    assert 3 <= len(recs) < 200 and all(r["error_type"] is None for r in recs)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["interrupted"] is True and summary["stop_reason"] == "interrupted"
    assert summary["levels"][0]["overall"]["completed"] == len(recs)
    assert "records:" in stdout  # the table of what completed is still printed


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_watching_gate_stops_on_a_signal_with_its_last_decision(
    tmp_path: Path, sig: signal.Signals
) -> None:
    """``gate --watch`` (a canary's loop) ends on Ctrl-C or SIGTERM with exit 130, and writes the
    last decision it reached."""
    from tests.servers import traffic

    out = tmp_path / "gate.json"
    cfg = SLOW.model_copy(update={"time_scale": 0.0})
    with twin(cfg) as (url, _), traffic(url):
        proc = subprocess.Popen(
            [sys.executable, "-m", "alphagate", "gate", "--min-alpha", "0.1", "--url", url,
             "--watch", "--interval", "1", "--min-drafts", "10", "--out", str(out)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        seen = ""
        while time.monotonic() < deadline and "PASS" not in seen:
            line = proc.stderr.readline() if proc.stderr else ""
            seen += line
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=60)
    assert "PASS" in seen, seen + stderr
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert json.loads(out.read_text())["decision"] == "pass"


_INTERRUPT_WHILE_IMPORTING = """
import importlib.abc, os, signal, sys

class Interrupt(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == sys.argv[1]:  # Ctrl-C while the verb imports this module
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.SIGINT)
        return None

sys.meta_path.insert(0, Interrupt())
from alphagate.cli import main
main(sys.argv[2:])
"""


@pytest.mark.parametrize("module", ["typer", "rich.console", "pydantic"])
def test_ctrl_c_while_bench_starts_is_exit_130_without_a_traceback(
    tmp_path: Path, module: str
) -> None:
    """The first ~0.2 s of ``alphagate bench`` import its libraries; a Ctrl-C then (landed
    deterministically here, inside the import of ``module``) has nothing to keep."""
    r = subprocess.run(
        [sys.executable, "-c", _INTERRUPT_WHILE_IMPORTING, module, "bench", "--url",
         "http://127.0.0.1:9", "-n", "2", "--out", str(tmp_path / "o")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 130, r.stderr
    assert "Traceback" not in r.stderr and "interrupted" in r.stderr
    assert not (tmp_path / "o").exists()  # nothing was started
