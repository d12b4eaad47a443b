"""The gate's soundness as a property: random mutations of valid evidence — records duplicated,
sides swapped, a value edited, the window shifted, the model changed — never turn a gate that
fails or has not enough evidence into a pass. (They may make it refuse the evidence: exit 2.)"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from alphagate.core.traffic import TrafficClass
from alphagate.specs import DeploymentConfig, WorkloadConfig
from alphagate.twin.config import TwinConfig
from tests.conftest import Cli
from tests.servers import DISTORTED, RERUNS, twin

#: its evidence is a twin A/B the gate judges (validity checks included): run with the timing tier
pytestmark = pytest.mark.timing

MIX = (
    TrafficClass(name="chat", share=0.5, alpha=0.8),
    TrafficClass(name="code", share=0.5, alpha=0.3),
)


@pytest.fixture(scope="module")
def evidence(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """A real A/B (three alternated runs, per-request counts) and the measured ratios."""
    d = tmp_path_factory.mktemp("ab")
    data = d / "t.jsonl"
    data.write_text(
        "\n".join(
            json.dumps(
                {"prompt": f"p{i} a b", "max_tokens": 24, "class": "chat" if i % 2 else "code"}
            )
            for i in range(24)
        )
        + "\n"
    )
    dep = DeploymentConfig(model="llama-3.1-8b")
    wl = WorkloadConfig(classes=MIX)

    def cfg(k: int) -> TwinConfig:
        return TwinConfig(
            deployment=dep, workload=wl, k=k, time_scale=1.0, served_model_name="m",
            per_request_spec_decode_metrics="summary",
        )  # fmt: skip

    cli = Cli()
    for attempt in range(RERUNS + 1):
        out = d / f"ab{attempt}"
        with twin(cfg(0)) as (b, _), twin(cfg(3)) as (c, _):
            r = cli.run(
                "bench", "--baseline-url", b, "--candidate-url", c, "--dataset", str(data),
                "-c", "4", "-n", "24", "--repeats", "3", "--out", str(out), "--no-progress",
            )  # fmt: skip
        assert r.exit_code == 0, r.output
        judged = cli.run(
            "gate", "--bench", str(out / "summary.json"), "--min-tpot-speedup", "0.1",
            "--min-requests", "10", "--min-drafts", "10", "--ignore-errors", "--json",
        )  # fmt: skip
        g = json.loads(judged.stdout)
        if not g["results"][0]["why"].startswith(DISTORTED):
            break  # else the machine distorted the A/B (exit 3), and the gate says "rerun"
    assert judged.exit_code == 0, judged.output
    return out, g["results"][0]


#: rule sets that do not pass on the real evidence: (flags, the decision it gets)
def _rules(tpot: dict[str, Any]) -> list[tuple[list[str], str]]:
    lo, hi = tpot["interval"]["low"], tpot["interval"]["high"]
    return [
        (["--min-tpot-speedup", f"{hi * 1.5:.4f}"], "fail"),
        (["--min-tpot-speedup", f"{(lo + hi) / 2:.4f}"], "insufficient"),
        (["--min-alpha", "0.95", "--class", "code"], "fail"),
        (["--min-alpha", "0.95"], "fail"),
    ]


def _mutate(folder: Path, kind: str, pick: int, factor: float) -> None:
    summary_p, records_p = folder / "summary.json", folder / "requests.jsonl"
    summary = json.loads(summary_p.read_text())
    lines = records_p.read_text().splitlines()
    if kind == "duplicate":
        n = 1 + pick % len(lines)
        lines = lines + lines[:n]
    elif kind == "swap":
        lines = [
            ln.replace('"baseline"', '"@"')
            .replace('"candidate"', '"baseline"')
            .replace('"@"', '"candidate"')
            for ln in lines
        ]
        for lv in summary["levels"]:
            lv["target"] = {"baseline": "candidate", "candidate": "baseline"}[lv["target"]]
    elif kind == "edit-record":
        i = pick % len(lines)
        rec = json.loads(lines[i])
        field = ("output_tokens", "e2e_s", "ttft_s", "send_s")[pick % 4]
        rec[field] = (rec[field] or 1) * factor
        if field == "output_tokens" and math.isfinite(rec[field]):
            rec[field] = int(rec[field])
        lines[i] = json.dumps(rec)
    elif kind == "edit-summary":
        lv = summary["levels"][pick % len(summary["levels"])]
        target = lv["acceptance"] or lv["overall"]
        key = ("num_accepted_tokens", "alpha_iid", "draft_acceptance_rate")[pick % 3]
        if key in target and isinstance(target[key], int | float):
            target[key] = target[key] * factor
        else:
            lv["overall"]["output_tokens_per_s"] *= factor
    elif kind == "window":
        summary["started_at"] = 4.0e9 if pick % 2 else 1.58e9  # 2096, or 2020
    elif kind == "model":
        summary["config"]["model"] = "another-model"
    summary_p.write_text(json.dumps(summary))
    records_p.write_text("\n".join(lines) + "\n")


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    kind=st.sampled_from(["duplicate", "swap", "edit-record", "edit-summary", "window", "model"]),
    pick=st.integers(0, 10_000),
    factor=st.sampled_from([0.0, 0.5, 2.0, 10.0, float("nan")]),
    rule=st.integers(0, 3),
)
def test_no_mutation_of_evidence_turns_a_failing_or_insufficient_gate_into_a_pass(
    evidence: tuple[Path, dict[str, Any]], tmp_path_factory: pytest.TempPathFactory,
    kind: str, pick: int, factor: float, rule: int,
) -> None:  # fmt: skip
    folder, tpot = evidence
    flags, expected = _rules(tpot)[rule]
    base = ["gate", "--min-requests", "10", "--min-drafts", "10", "--ignore-errors"]
    cli = Cli()
    original = cli.run(*base, *flags, "--bench", str(folder / "summary.json"))
    assert original.exit_code == {"fail": 1, "insufficient": 3}[expected], original.output
    work = tmp_path_factory.mktemp("mutated")
    shutil.copytree(folder, work / "ab")
    _mutate(work / "ab", kind, pick, factor)
    plan = []
    if kind == "model":
        p = work / "plan.json"
        d = cli.json("plan", "--model", "llama-3.1-8b", "--class", "chat:1:0.7", "-c", "4",
                     "--served-model", "m", "--p99-budget", "10")  # fmt: skip
        p.write_text(json.dumps(d))
        plan = ["--plan", str(p)]
    r = cli.run(*base, *flags, *plan, "--bench", str(work / "ab" / "summary.json"))
    assert "Traceback" not in r.output
    assert r.exit_code != 0, (
        f"{kind} {pick} {factor}: {flags} passed after the mutation\n{r.output}"
    )
