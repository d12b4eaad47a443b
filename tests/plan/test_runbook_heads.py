"""A class below its gate: the plan says what α it needs, and its way out — a head trained on its
own traffic with ``train-head`` — as commands that run as printed: here the re-plan and the gate
on a measurement of the kind ``train-head`` writes (the real-engine tier runs all of them, the
training too, with vLLM)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from alphagate.measure.estimate import estimate
from alphagate.measure.results import MeasureResult
from tests.conftest import Cli

#: 70% chat and 30% code at concurrency 64 on an 8B: code (α 0.4) is just below its gate
PLAN = ["plan", "--model", "llama-3.1-8b", "--gpu", "h100", "--class", "chat:0.7:0.7",
        "--class", "code:0.3:0.4", "-c", "64"]  # fmt: skip


def _head_stage(plan: dict[str, object]) -> dict[str, object]:
    (stage,) = [s for s in plan["stages"] if s["title"].startswith("A head")]  # type: ignore[index, union-attr]
    return stage  # type: ignore[no-any-return]


def _measured(path: Path, cls: str, alpha: float, drafts: int) -> None:
    """A held-out measurement at K = 2 with α the same at every position."""
    per_pos = [drafts * alpha, drafts * alpha * alpha]
    e = estimate(drafts, 2 * drafts, sum(per_pos), per_pos, k=2)
    m = MeasureResult(verb="measure offline", source="held-out.jsonl", overall=e, classes={cls: e})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(m.payload()))


def test_a_class_below_its_gate_gets_its_alpha_and_a_way_out_that_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    plan = Cli().json(*PLAN, "--out", "plan.md")
    assert plan["verdict"] == "go for some classes only" and plan["routed_away"] == ["code"]
    code = next(c for c in plan["classes"] if c["name"] == "code")
    (bullet,) = [b for b in plan["change_verdict"] if b.startswith("code needs")]
    assert f"code needs α ≥ {code['alpha_gate']:.2f} at concurrency 64 (it has 0.40)" in bullet
    assert "Stage 6" in bullet
    stage = _head_stage(plan)
    assert stage["number"] == 6
    bench, train, measure, replan, gate = (shlex.split(c) for c in stage["commands"])  # type: ignore[union-attr]
    assert bench[:2] == ["alphagate", "bench"] and "--save-text" in bench
    assert bench[bench.index("--only-class") + 1] == "code"
    log = bench[bench.index("--out") + 1] + "/requests.jsonl"
    assert train[:2] == ["alphagate", "train-head"]
    assert train[train.index("--log") + 1] == log and train[train.index("--class") + 1] == "code"
    assert train[train.index("--init") + 1] == "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"
    assert train[train.index("--target") + 1] == "meta-llama/Llama-3.1-8B-Instruct"
    head = train[train.index("--out") + 1]
    assert measure[measure.index("--drafter") + 1] == f"eagle3:{head}"
    assert measure[measure.index("--log") + 1] == f"{head}/held-out.jsonl"
    k = plan["gate"]["k"]  # type: ignore[index]
    assert train[train.index("--k") + 1] == measure[measure.index("--k") + 1] == str(k)
    # the re-plan and the gate, run as printed on a held-out α that clears the gate
    alpha_file = Path(measure[measure.index("--out") + 1])
    _measured(alpha_file, "code", 0.8, drafts=3000)
    assert "--class" in replan and "chat:0.7:0.7" in replan and "code:0.3" in replan
    r = Cli().run(*replan[1:], "--json")
    assert r.exit_code == 0, r.output
    after = json.loads(r.stdout)
    assert after["verdict"] == "go" and after["routed_away"] == []
    assert {c["name"]: c["clears_gate"] for c in after["classes"]} == {"chat": True, "code": True}
    r = Cli().run(*gate[1:])
    assert r.exit_code == 0, r.output
    assert Path(gate[gate.index("--out") + 1]).is_file()
    # a head that does not clear it fails the same gate
    _measured(alpha_file, "code", 0.3, drafts=3000)
    assert Cli().run(*gate[1:]).exit_code == 1


@pytest.mark.parametrize(
    "args",
    [
        ["--class", "chat:0.7:0.7", "--class", "code:0.3"],  # code on a prior: measured first
        ["--class", "chat:0.7:0.7", "--class", "code:0.3:0.4", "--method", "ngram"],  # no head
        ["--class", "chat:1:0.12"],  # no-go: no K pays, so no gate to clear
    ],
)
def test_no_head_for_a_prior_a_method_without_one_or_a_no_go(args: list[str]) -> None:
    plan = Cli().json("plan", "--model", "llama-3.1-8b", *args, "-c", "64")
    assert not any(s["title"].startswith("A head") for s in plan["stages"])
    assert not any("trained on its own traffic" in b for b in plan["change_verdict"])
