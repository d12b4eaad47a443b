"""`alphagate bench --plot`: the measured figures of an A/B run, from the charts the report uses."""

from __future__ import annotations

from pathlib import Path

from alphagate.core.traffic import TrafficClass
from alphagate.specs import DeploymentConfig, WorkloadConfig
from alphagate.twin.config import TwinConfig
from tests.conftest import Cli
from tests.servers import bench_ab


def test_bench_plot_writes_the_measured_figures(cli: Cli, tmp_path: Path) -> None:
    dep = DeploymentConfig(model="llama-3.1-8b", weight_dtype="bf16")
    wl = WorkloadConfig(classes=(TrafficClass(name="chat", share=1.0, alpha=0.7),))
    base = TwinConfig(deployment=dep, workload=wl, k=0, time_scale=0.0)
    cand = TwinConfig(deployment=dep, workload=wl, k=3, time_scale=0.0)
    r = bench_ab(
        cli, base, cand, "--dataset", "synthetic:in=32,out=48", "--num-prompts", "24",
        "--concurrency", "1,4", "--out", str(tmp_path / "run"), "--plot", str(tmp_path / "plots"),
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    names = sorted(p.name for p in (tmp_path / "plots").iterdir())
    assert names == [
        "acceptance_length_measured.png",
        "alpha_by_position_measured.png",
        "itl_per_token_cdf_measured.png",
        "itl_per_token_measured.png",
        "speedup_measured.png",
    ]
    for p in (tmp_path / "plots").iterdir():
        assert p.read_bytes()[:4] == b"\x89PNG"
