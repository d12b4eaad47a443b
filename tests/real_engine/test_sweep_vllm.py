"""``alphagate calibrate`` on what ``vllm bench sweep serve`` writes: vLLM's own sweep driver (its
``vllm`` console script fails on the CPU build's missing package metadata, so its module runs,
``python -m vllm.benchmarks.sweep.serve``, with the same flags) starts a baseline and an EAGLE-3
server at K = 2 in turn, runs ``vllm bench serve`` against each at concurrency 1 and 4, and lays
out its experiment folder; ``calibrate`` is given that folder as a user gives it, and fits a
profile from the four runs: K and α by position from each run's spec-decode counters, the steps
from its TPOT. The fitted coefficients go to ``.cache/real-engine/report.json``
(``calibrate/vllm-bench-sweep``).
"""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Cli
from tests.real_engine.harness import (
    POOL,
    VLLM_PYTHON,
    ServerSpec,
    _command,
    _env,
    free_port,
    report,
    vllm_bench_command,
)
from tests.real_engine.test_calibrate_vllm import CPU_SPEC
from tests.real_engine.test_vllm import CODE_PROMPTS

K = 2
OUTPUT = 48
CONCURRENCY = (1, 4)


@pytest.mark.alone  # its step times are what it fits: no idle servers beside it
def test_calibrate_fits_a_real_vllm_bench_sweep(tiny: Any, tmp_path: Path) -> None:
    data = tmp_path / "code.jsonl"
    data.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in CODE_PROMPTS))
    port = free_port()
    spec = {"method": "eagle3", "model": str(tiny.eagle3), "num_speculative_tokens": K}
    serve = tmp_path / "serve.json"
    serve.write_text(json.dumps([{}, {"speculative_config": spec}]))
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps([{"max_concurrency": c} for c in CONCURRENCY]))
    url = f"http://127.0.0.1:{port}"
    sweep = [
        str(VLLM_PYTHON), "-m", "vllm.benchmarks.sweep.serve",
        "--serve-cmd", shlex.join(_command(tiny.target, port, ServerSpec("tiny"))),
        "--bench-cmd", shlex.join(vllm_bench_command(
            url, "tiny", tiny.target, data, prompts=16, concurrency=1, output_len=OUTPUT
        )),  # the sweep sets --max-concurrency per run and adds the flags that save results
        "--after-bench-cmd", "true",  # its cache reset knows only the `vllm` script
        "--serve-params", str(serve), "--bench-params", str(bench),
        "--num-runs", "1", "--warmup-num-prompts", "4",
        "-o", str(tmp_path / "sweeps"), "-e", "eagle3-k2",
    ]  # fmt: skip
    log = tmp_path / "sweep.log"
    POOL.close()  # run first (`alone`): nothing pooled is up; were anything, it would stop
    with log.open("wb") as fh:
        done = subprocess.run(
            sweep, stdout=fh, stderr=subprocess.STDOUT, env=_env(server=True), timeout=900
        )
    assert done.returncode == 0, log.read_text()[-4000:]
    exp = tmp_path / "sweeps" / "eagle3-k2"
    runs = sorted(exp.rglob("run=0.json"))
    assert len(runs) == 2 * len(CONCURRENCY), sorted(map(str, exp.rglob("*")))

    gpu = tmp_path / "cpu.json"
    gpu.write_text(json.dumps(CPU_SPEC))
    r = Cli(width=160).run(
        "calibrate", str(exp), "--model", str(Path(tiny.target) / "config.json"),
        "--gpu", str(gpu), "--tp", "1", "--dtype", "bf16", "--method", "eagle3",
        "--draft", str(Path(tiny.eagle3) / "config.json"), "--max-num-seqs", "8",
        "--cudagraph-max-tokens", "0", "--out", str(tmp_path / "profile.json"), "--json",
    )  # fmt: skip
    assert r.exit_code in (0, 1), r.output  # 1: written, but the fit explains too little
    d = json.loads(r.stdout)
    steps = [p for p in d["points"] if p["metric"] == "decode_step"]
    # every run of the sweep was read, each labelled with its combination's folder
    assert len(steps) == len(runs), d["points"]
    assert all("run=0" in p["label"] for p in steps)
    assert sorted(p["k"] for p in steps) == [0] * len(CONCURRENCY) + [K] * len(CONCURRENCY)
    # the speculative server's steps are dearer, and the fit reproduces the four of them
    by_k = {k: [p["observed_ms"] for p in steps if p["k"] == k] for k in (0, K)}
    assert min(by_k[K]) > max(by_k[0]) * 0.8, by_k
    assert d["rms_residual_pct"] < 30.0, d
    report(
        "calibrate/vllm-bench-sweep",
        {
            "exit_code": r.exit_code,
            "coefficients": {c["name"]: c["value"] for c in d["coefficients"]},
            "rms_residual_pct": d["rms_residual_pct"],
            "points": [
                {k: p[k] for k in ("label", "metric", "k", "observed_ms", "fitted_ms")}
                for p in d["points"]
            ],
        },
    )
