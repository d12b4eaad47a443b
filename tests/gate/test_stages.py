"""Every ``alphagate`` command a GO plan prints for its stages, run as printed against twins on
127.0.0.1: the baseline on the plan's port, then a candidate with speculation on the same port —
one whose acceptance clears the plan's gate (exit 0) and one whose acceptance does not (exit 1).

Only the canary's ``--interval 60 --duration 1800`` are shortened, to seconds."""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path

import pytest

from alphagate.core.traffic import TrafficClass
from alphagate.specs import DeploymentConfig, WorkloadConfig
from alphagate.twin.config import TwinConfig
from tests.conftest import Cli
from tests.servers import free_port, traffic, twin

SERVED = "tiny-chat"
CONCURRENCY = 4
PLAN_FLAGS = [
    "--model", "llama-3.1-8b", "--gpu", "h100", "--dtype", "bf16", "--method", "eagle3",
    "--class", "chat:1", "--concurrency", str(CONCURRENCY), "--output-len", "fixed:16", "--prompt-len", "fixed:48",
    "--served-model", SERVED,
]  # fmt: skip


def _twin_cfg(alpha: float, k: int) -> TwinConfig:
    return TwinConfig(
        deployment=DeploymentConfig(model="llama-3.1-8b", weight_dtype="bf16"),
        workload=WorkloadConfig(classes=(TrafficClass(name="chat", share=1.0, alpha=alpha),)),
        k=k,
        time_scale=0.25,
        seed=1,
        served_model_name=SERVED,
    )


def _commands(stage: dict) -> list[list[str]]:  # type: ignore[type-arg]
    out = []
    for text in stage["commands"]:
        for cmd in re.findall(r"^(alphagate [^\n]+)$", text, flags=re.M):
            out.append(shlex.split(cmd)[1:])
    return out


def _shorten(argv: list[str]) -> list[str]:
    short = {"--interval": "1", "--duration": "4"}
    return [short.get(argv[i - 1], a) if i else a for i, a in enumerate(argv)]


def _run(cli: Cli, argv: list[str], expect: int) -> str:
    r = cli.run(*argv)
    assert r.exit_code == expect, f"alphagate {shlex.join(argv)} → {r.exit_code}\n{r.output}"
    assert "Traceback" not in r.output
    return r.output


@pytest.mark.slow
def test_every_stage_command_runs_against_twins_above_and_below_the_gate(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    monkeypatch.chdir(tmp_path)
    (tmp_path / "traffic.jsonl").write_text(
        "".join(
            json.dumps({"prompt": f"question {i}: " + "tell me more " * 8, "max_tokens": 16}) + "\n"
            for i in range(64)
        )
    )
    _run(cli, ["plan", *PLAN_FLAGS, "--url", url, "--out", "plan.md"], 0)
    plan = json.loads(Path("plan.json").read_text())
    assert plan["verdict"] == "go" and plan["gate"] is not None
    k = next(r["k"] for r in plan["rows"] if r["concurrency"] == CONCURRENCY)
    assert k >= 1
    stages = {s["number"]: s for s in plan["stages"]}
    printed = {n: _commands(s) for n, s in stages.items()}
    assert [a[0] for a in printed[0]] == ["bench"]
    assert [a[0] for a in printed[2]] == ["bench", "measure", "plan"]
    assert [a[0] for a in printed[3]] == ["gate"]
    assert [a[0] for a in printed[4]] == ["gate"]
    gate_alpha = plan["gate"]["alpha_min"]

    with twin(_twin_cfg(0.7, 0), port):  # Stage 0: the deployment without speculation
        _run(cli, printed[0][0], 0)
    baseline = tmp_path / "results" / "baseline"
    assert (baseline / "summary.json").is_file()

    for alpha, expect in ((min(0.95, gate_alpha + 0.4), 0), (max(0.02, gate_alpha - 0.25), 1)):
        shutil.rmtree(tmp_path / "results" / "candidate", ignore_errors=True)
        for f in ("results/alpha-live.json", "results/gate.json"):
            Path(f).unlink(missing_ok=True)
        with twin(_twin_cfg(alpha, k), port):  # Stages 2-4 with speculation on
            bench, measure, replan = printed[2]
            _run(cli, bench, 0)
            with traffic(url, concurrency=CONCURRENCY):
                _run(cli, measure, 0)
                _run(cli, replan, 0)
                gate_out = _run(cli, printed[3][0], expect)
                watch = _run(cli, _shorten(printed[4][0]), expect)
        decision = json.loads(Path("results/gate.json").read_text())
        assert decision["decision"] == ("pass" if expect == 0 else "fail"), gate_out
        alpha_rule = next(
            r
            for r in decision["results"]
            if r["rule"]["metric"] == "alpha" and not r["rule"]["cls"]
        )
        assert alpha_rule["result"] == ("pass" if expect == 0 else "fail")
        assert alpha_rule["value"] == pytest.approx(alpha, abs=0.05)
        assert ("PASS" if expect == 0 else "FAIL") in watch
        measured = json.loads(Path("plan-measured.json").read_text())
        assert measured["classes"][0]["alpha_source"] == "measured"
