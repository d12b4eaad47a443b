"""The rollout a plan prints, followed stage by stage as an engineer would — every shell block of
the markdown plan run as printed, in order, against twins on 127.0.0.1:

- ``vllm serve …`` starts the twin in its place (same port, served name, limits, and the same
  ``--speculative-config`` and ``--per-request-spec-decode-metrics`` flags, which the twin reads
  as vLLM does); the twin's true α per class is the scenario's;
- ``vllm bench serve …`` lines are the engine's own client (the real-engine tier runs them);
- ``alphagate …`` lines run as printed, in their own processes; only the canary's
  ``--interval 60 --duration 1800`` are shortened to seconds.

Four scenarios (the rollout issue's point 6): (a) two classes that clear their gates — every
stage exits 0 and the gate passes; (b) one class below its gate on the real server — the gate
fails naming it and the re-plan routes it away; (c) a no-go plan — no stage turns speculation on
for traffic, and the commands under "what would change the verdict" run; (d) one class.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from tests.servers import DISTORTED, RERUNS, free_port

pytestmark = [pytest.mark.slow, pytest.mark.timing]

#: prompts of 300–500 tokens and outputs of 24–48: prefills land in decode steps, as in
#: production, so the tail without speculation is not one decode step (at concurrency 8 the plan
#: predicts a P99 ITL per token better with K = 1 than without)
LENGTHS = ["--prompt-len", "uniform:300:500", "--output-len", "uniform:24:48"]
#: the team accepts a P99 ITL per token up to 50% worse for the TPOT. A run here is 77 requests
#: of ~36 tokens: its P99 is the top ~28 gaps, which on a shared 2-core machine carry a few
#: milliseconds of scheduling noise, so five runs bound the P99 ratio only to about ±15% — wider
#: than the few per cent by which speculation moves it at concurrency 8. (The default, "not
#: worse", is the plan's own tests' subject; a real engine's longer runs resolve it.)
BUDGET = ["--p99-budget", "1.5"]
#: the twin stands in for the GPU server: Llama-3.1-8B BF16 on one H100, at its modelled speed
#: (a faster twin's chunk gaps of ~4 ms are read late, together, on a loaded machine)
TWIN = ["--model", "llama-3.1-8b", "--time-scale", "1", "--log-stats-interval", "0",
        *LENGTHS, "--seed", "1"]  # fmt: skip
PLAN = ["--model", "llama-3.1-8b", "--gpu", "h100", "--method", "eagle3", *LENGTHS,
        "--concurrency", "8", "--served-model", "tiny", *BUDGET]  # fmt: skip
SHORTEN = {"--interval": "1", "--duration": "3"}


def _traffic(path: Path, shares: dict[str, float], n: int = 200) -> None:
    """Production-like requests with their class, in the proportions of the plan's shares, of the
    plan's lengths (one twin token per word)."""
    lines = []
    names = list(shares)
    rng = np.random.default_rng(0)
    for i in range(n):
        x = (i * 0.6180339887) % 1.0  # a low-discrepancy mix of the classes
        acc, cls = 0.0, names[-1]
        for name in names:
            acc += shares[name]
            if x < acc:
                cls = name
                break
        words = int(rng.integers(300, 501))
        prompt = f"q{i} " + " ".join(["tell", "me", "more"] * (words // 3))
        lines.append(
            json.dumps({"prompt": prompt, "max_tokens": int(rng.integers(24, 49)), "class": cls})
        )
    path.write_text("\n".join(lines) + "\n")


@dataclass
class Step:
    stage: str
    command: str
    exit_code: int
    output: str


@dataclass
class Rollout:
    """Runs a plan's shell blocks in a folder, twins standing in for the engine."""

    cwd: Path
    classes: list[str]  # the twins' true α: NAME:SHARE:ALPHA
    servers: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)
    steps: list[Step] = field(default_factory=list)

    def alphagate(self, argv: list[str], stage: str) -> Step:
        env = {**os.environ, "COLUMNS": "100", "NO_COLOR": "1"}
        r = subprocess.run(
            [sys.executable, "-m", "alphagate", *argv],
            cwd=self.cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        step = Step(stage, shlex.join(["alphagate", *argv]), r.returncode, r.stdout + r.stderr)
        self.steps.append(step)
        assert "Traceback" not in step.output, step.output
        return step

    def serve(self, argv: list[str], stage: str) -> None:
        """``vllm serve MODEL …`` → the twin, with the flags it shares with vLLM."""
        args = argv[2:]
        model = args[0]
        opts: dict[str, str] = {}
        i = 1
        while i < len(args):
            if i + 1 < len(args) and not args[i + 1].startswith("--"):
                opts[args[i]] = args[i + 1]
                i += 2
            else:
                opts[args[i]] = ""
                i += 1
        port = int(opts.get("--port", "8000"))
        twin = [
            *TWIN,
            "--port",
            str(port),
            "--served-model-name",
            opts.get("--served-model-name", model),
        ]
        for flag in (
            "--max-num-seqs",
            "--max-num-batched-tokens",
            "--per-request-spec-decode-metrics",
            "--speculative-config",
        ):
            if flag in opts:
                twin += [flag, opts[flag]]
        if "--speculative-config" not in opts:
            twin += ["--k", "0"]
        for c in self.classes:
            twin += ["--class", c]
        self.stop(port)
        with (self.cwd / f"twin-{port}.log").open("wb") as log:  # the child keeps its own
            proc = subprocess.Popen(
                [sys.executable, "-m", "alphagate", "twin", *twin],
                cwd=self.cwd,
                stdout=log,
                stderr=log,
            )
        self.servers[port] = proc
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(
                        f"twin for {shlex.join(argv)} did not start: "
                        + (self.cwd / f"twin-{port}.log").read_text()
                    ) from None
                time.sleep(0.2)
        self.steps.append(Step(stage, shlex.join(argv), 0, f"twin on {port}"))

    def stop(self, port: int | None = None) -> None:
        for p in [port] if port is not None else list(self.servers):
            proc = self.servers.pop(p, None) if p is not None else None
            if proc is not None:
                proc.terminate()
                proc.wait(30)

    def run(self, command: str, stage: str) -> Step | None:
        argv = shlex.split(command)
        if argv[:2] == ["vllm", "serve"]:
            self.serve(argv, stage)
            return None
        if argv[:3] == ["vllm", "bench", "serve"] or argv[:2] == ["python", "-m"]:
            return None  # the engine's own client: the real-engine tier runs it
        assert argv[0] == "alphagate", f"{stage}: not a command of ours or the engine's: {command}"
        argv = [SHORTEN.get(argv[i - 1], a) if i > 1 else a for i, a in enumerate(argv)]
        return self.alphagate(argv[1:], stage)


def _blocks(markdown: str) -> list[tuple[str, list[str]]]:
    """(stage title, shell lines) for every ```sh block, in order."""
    out = []
    for part in re.split(r"^### ", markdown, flags=re.M)[1:]:
        title = part.splitlines()[0]
        for block in re.findall(r"^```sh\n(.*?)^```", part, flags=re.M | re.S):
            out.append((title, [ln for ln in block.splitlines() if ln.strip()]))
    return out


def _follow(
    tmp_path: Path, plan_args: list[str], twin_classes: list[str], out: str
) -> tuple[Rollout, dict[str, object]]:
    base, cand = free_port(), free_port()
    r = Rollout(tmp_path, twin_classes)
    shares = {c.split(":")[0]: float(c.split(":")[1]) for c in twin_classes}
    _traffic(tmp_path / "traffic.jsonl", shares)
    step = r.alphagate(
        [
            "plan",
            *PLAN,
            *plan_args,
            "--url",
            f"http://127.0.0.1:{base}",
            "--candidate-url",
            f"http://127.0.0.1:{cand}",
            "--out",
            out,
        ],
        "plan",
    )
    assert step.exit_code == 0, step.output
    plan = json.loads((tmp_path / out).with_suffix(".json").read_text())
    return r, plan


def _run_all(r: Rollout, markdown: Path, expect: dict[str, int], *, keep: bool = False) -> None:
    """Every block's commands in order; each alphagate command exits 0 unless ``expect`` names
    its subcommand (gate) with another code. The twins stop at the end unless ``keep``."""
    blocks = _blocks(markdown.read_text())
    reruns = 0
    try:
        for title, lines in blocks:
            for line in lines:
                step = r.run(line, title)
                if step is None:
                    continue
                verb = shlex.split(line)[1]
                want = expect.get(verb, 0)
                while (
                    verb == "gate"
                    and step.exit_code == 3
                    and DISTORTED in step.output
                    and reruns < RERUNS
                ):
                    # the gate found the A/B distorted by a loaded machine and says "rerun": do
                    # what it says — Stage 2's commands again (the bench appends a new run), then
                    # the same gate
                    reruns += 1
                    for again in next(ls for t, ls in blocks if t.startswith("Stage 2")):
                        redo = r.run(again, "Stage 2 (rerun)")
                        assert redo is None or redo.exit_code == 0, redo
                    step = r.run(line, title)
                    assert step is not None
                assert step.exit_code == want, f"{title}: {line} → {step.exit_code}\n{step.output}"
    except BaseException:
        r.stop()
        raise
    if not keep:
        r.stop()


def _stage_numbers(plan: dict[str, object]) -> list[str]:
    return [s["title"] for s in plan["stages"]]  # type: ignore[index, union-attr]


def test_two_classes_above_their_gates_every_stage_exits_0_and_the_gate_passes(
    tmp_path: Path,
) -> None:
    classes = ["chat:0.6:0.75", "rag:0.4:0.5"]
    r, plan = _follow(tmp_path, [f"--class={c}" for c in classes], classes, "rollout-plan.md")
    assert plan["verdict"] == "go" and plan["gate"] is not None
    md = tmp_path / "rollout-plan.md"
    assert "--plan rollout-plan.json" in md.read_text()  # the file --out wrote
    _run_all(r, md, {})
    decision = json.loads((tmp_path / "results" / "gate.json").read_text())
    assert decision["decision"] == "pass", json.dumps(decision, indent=1)
    by = {(x["rule"]["metric"], x["rule"]["cls"]): x for x in decision["results"]}
    for cls, true_alpha in (("chat", 0.75), ("rag", 0.5)):
        rule = by[("alpha", cls)]
        assert rule["result"] == "pass"
        assert (
            rule["interval"]["low"] <= true_alpha + 0.03
            and rule["interval"]["high"] >= true_alpha - 0.03
        )
        assert "per-request counts" in rule["evidence"]
    p99 = by[("itl_per_token_p99_speedup", None)]
    assert "alternated runs" in p99["basis"]
    assert p99["rule"]["threshold"] == pytest.approx(1 / 1.5)  # the budget the plan was given
    measured = json.loads((tmp_path / "rollout-plan-measured.json").read_text())
    assert {c["name"]: c["alpha_source"] for c in measured["classes"]} == {
        "chat": "measured",
        "rag": "measured",
    }


def test_a_class_below_its_gate_fails_the_gate_by_name_and_is_routed_away(tmp_path: Path) -> None:
    planned = ["chat:0.6:0.75", "rag:0.4:0.5"]
    real = ["chat:0.6:0.75", "rag:0.4:0.05"]  # the rag head is far worse than the team thought
    # a failing rule decides alone: fewer requests than a pass needs (its error-rate rule)
    r, plan = _follow(
        tmp_path, [*(f"--class={c}" for c in planned), "--bench-requests", "40"], real, "plan.md"
    )
    assert plan["verdict"] == "go"
    _run_all(r, tmp_path / "plan.md", {"gate": 1})
    decision = json.loads((tmp_path / "results" / "gate.json").read_text())
    assert decision["decision"] == "fail"
    failed = [x for x in decision["results"] if x["result"] == "fail"]
    assert [(x["rule"]["metric"], x["rule"]["cls"]) for x in failed] == [("alpha", "rag")]
    gate_step = next(
        s for s in r.steps if s.command.startswith("alphagate gate") and "--watch" not in s.command
    )
    assert "α [rag]" in gate_step.output and "FAIL" in gate_step.output
    measured = json.loads((tmp_path / "plan-measured.json").read_text())
    assert measured["routed_away"] == ["rag"], measured["reason"]


def test_a_no_go_plan_never_turns_speculation_on_and_its_way_out_runs(tmp_path: Path) -> None:
    classes = ["chat:1:0.1"]  # a head that accepts almost nothing: no K pays
    r, plan = _follow(
        tmp_path, [*(f"--class={c}" for c in classes), "--bench-requests", "24"], ["chat:1:0.7"],
        "plan.md",
    )  # fmt: skip
    assert plan["verdict"] == "no-go" and plan["gate"] is None
    assert _stage_numbers(plan) == ["Baseline", "What would change the verdict"]
    md = (tmp_path / "plan.md").read_text()
    assert "Enable speculative decoding" not in md
    blocks = _blocks(md)
    assert all("--speculative-config" not in line for _, lines in blocks for line in lines)
    _run_all(r, tmp_path / "plan.md", {}, keep=True)  # the baseline server stays up
    # the way out, as printed under the stage: measure α on a staging replica, then re-plan
    note = plan["stages"][1]["notes"][0]  # type: ignore[index]
    commands = re.findall(r"`([^`]+)`", note)
    assert [shlex.split(c)[:2] for c in commands][:2] == [["vllm", "serve"], ["alphagate", "bench"]]
    try:
        for c in commands:
            step = r.run(c, "what would change the verdict")
            if step is not None:
                assert step.exit_code == 0, f"{c}\n{step.output}"
    finally:
        r.stop()
    replanned = json.loads((tmp_path / "plan-measured.json").read_text())
    assert replanned["classes"][0]["alpha_source"] == "measured"
    assert replanned["verdict"] == "go"  # measured α 0.7 is far above the typed 0.1


def test_a_one_class_plan_runs_to_a_passing_gate(tmp_path: Path) -> None:
    r, plan = _follow(tmp_path, ["--class", "chat:1:0.7"], ["chat:1:0.7"], "plan.md")
    assert plan["verdict"] == "go"
    _run_all(r, tmp_path / "plan.md", {})
    decision = json.loads((tmp_path / "results" / "gate.json").read_text())
    assert decision["decision"] == "pass", json.dumps(decision, indent=1)
    assert not any(x["rule"]["cls"] for x in decision["results"])  # one class: all traffic
