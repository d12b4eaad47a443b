"""Results files the report and CLI tests read: a small sweep, a plan, a bench A/B with its
records (two twins on 127.0.0.1, two traffic classes with different α), a closed-form table —
written by the CLI as users get them, once per session (the fixture is registered in
``tests/conftest.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from alphagate.core.traffic import TrafficClass
from alphagate.specs import DeploymentConfig, WorkloadConfig
from alphagate.twin.config import TwinConfig
from tests.conftest import Cli
from tests.servers import bench_ab

#: Llama-3.1-8B in BF16 on one H100: the small deployment of the sweeps below
LLAMA_8B = ("--model", "llama-3.1-8b", "--dtype", "bf16")
#: a small sweep: three concurrencies, two α, two K, no simulated break-even
SMALL_SWEEP = (
    *LLAMA_8B, "--concurrency", "1,8,32", "--alpha", "0.5,0.8", "--k", "2,4", "--no-breakeven-sim",
)  # fmt: skip
#: The classes the candidate twin serves: what the per-class figures must recover.
CLASS_ALPHA = {"chat": 0.8, "code": 0.4}
K = 3


def _write_json(cli: Cli, path: Path, *args: str) -> Path:
    r = cli.run(*args, "--json")
    assert r.exit_code == 0, r.output
    path.write_text(r.stdout, encoding="utf-8")
    return path


def _dataset(path: Path) -> Path:
    lines = [
        {"prompt": f"request {i} " + "word " * 24, "class": cls, "max_tokens": 48}
        for i in range(40)
        for cls in CLASS_ALPHA
    ]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("results")
    cli = Cli()
    out = {
        "sweep": _write_json(cli, root / "sweep.json", "simulate", *SMALL_SWEEP),
        "plan": _write_json(
            cli,
            root / "plan.json",
            "plan",
            "--class",
            "chat:0.7:0.7",
            "--class",
            "code:0.3",
            "--concurrency",
            "64",
            "--peak-concurrency",
            "256",
        ),
        "table": _write_json(
            cli, root / "table.json", "model", "table", "--alphas", "0.5,0.7", "--ks", "1,3"
        ),
        "speedup": _write_json(
            cli, root / "speedup.json", "model", "speedup", "--alpha", "0.7", "--k", "5"
        ),
    }
    dep = DeploymentConfig(model="llama-3.1-8b", weight_dtype="bf16")
    wl = WorkloadConfig(
        classes=tuple(
            TrafficClass(name=n, share=1 / len(CLASS_ALPHA), alpha=a)
            for n, a in CLASS_ALPHA.items()
        )
    )
    # a fifth of real time: the modelled step (≈ 1.3 ms of wall time) outweighs the client's own
    # per-chunk cost, so the A/B measures the model, not the machine's load
    base = TwinConfig(deployment=dep, workload=wl, k=0, time_scale=0.2, seed=1)
    cand = TwinConfig(deployment=dep, workload=wl, k=K, time_scale=0.2, seed=2)
    bench_dir = root / "bench"
    r = bench_ab(
        cli,
        base,
        cand,
        "--dataset",
        str(_dataset(root / "traffic.jsonl")),
        "--num-prompts",
        "80",
        "--concurrency",
        "1,8",
        "--out",
        str(bench_dir),
        "--json",
    )
    assert r.exit_code == 0, r.output
    out["bench"] = bench_dir / "summary.json"
    log = Path(__file__).parent / "measure" / "vllm_0_32_specdecoding.log"
    out["measure"] = _write_json(cli, root / "measure.json", "measure", "logs", str(log))
    # the gate judges a plan for the deployment the twins model, by the name they serve (the
    # 70B plan above is another deployment: its gate refuses this A/B)
    out["plan_twin"] = _write_json(
        cli, root / "plan-twin.json", "plan", "--class", "chat:0.7:0.7", "--class", "code:0.3",
        "--concurrency", "64", "--peak-concurrency", "256", "--model", "llama-3.1-8b",
        "--dtype", "bf16", "--served-model", "alphagate-twin",
    )  # fmt: skip
    gate = cli.run("gate", "--plan", str(out["plan_twin"]), "--bench", str(out["bench"]), "--json")
    assert gate.exit_code in (0, 1, 3), gate.output  # pass, fail, or not enough evidence yet
    out["gate"] = root / "gate.json"
    out["gate"].write_text(gate.stdout, encoding="utf-8")
    return out
