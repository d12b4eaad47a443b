"""`alphagate bench` against the twin on 127.0.0.1: acceptance, timing and speedup accuracy."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from alphagate import theory
from alphagate.core.traffic import TrafficClass
from alphagate.sim.cost import build_cost_model
from alphagate.sim.engine import Scenario
from alphagate.sim.run import run_paired
from alphagate.sim.workload import ClosedLoop, RequestSet, unconditional_table
from alphagate.specs import DeploymentConfig, WorkloadConfig, resolve_deployment
from alphagate.twin.config import TwinConfig
from tests.conftest import Cli
from tests.servers import twin

#: wall-clock behaviour: `make test` runs these alone (see the Makefile)
pytestmark = pytest.mark.timing

DEP_70B = DeploymentConfig(model="llama-3.3-70b", weight_dtype="fp8", max_num_seqs=64)


def _bench(cli: Cli, tmp_path: Path, *args: str) -> dict:  # type: ignore[type-arg]
    r = cli.run("bench", *args, "--out", str(tmp_path), "--json")
    assert r.exit_code == 0, r.output
    return json.loads((tmp_path / "summary.json").read_text())


def test_bench_recovers_rho_tau_within_sampling_error(cli: Cli, tmp_path: Path) -> None:
    alpha, k = 0.6, 4
    cfg = TwinConfig(
        deployment=DeploymentConfig(model="llama-3.1-8b", weight_dtype="bf16"),
        k=k,
        workload=WorkloadConfig(classes=(TrafficClass(name="a", share=1.0, alpha=alpha),)),
        time_scale=0.0,
        seed=3,
    )
    with twin(cfg) as (url, _):
        s = _bench(
            cli,
            tmp_path,
            "--url",
            url,
            "--dataset",
            "synthetic:in=32,out=200",
            "--num-prompts",
            "40",
            "--concurrency",
            "1",
        )
    a = s["levels"][0]["acceptance"]
    drafts = a["num_drafts"]
    surv = np.concatenate([[1.0], np.cumprod([alpha] * k)])  # P(e ≥ j), e = accepted + 1
    mean_e = surv.sum()
    var_e = ((2 * np.arange(1, k + 2) - 1) * surv).sum() - mean_e**2
    # 4.5 standard errors (two-sided ~7e-6): a bound no change of random-number order breaks,
    # where a 1.96σ (95%) bound fails one seed in twenty by construction
    half = 4.5 * math.sqrt(var_e / drafts)
    assert abs(a["mean_acceptance_length"] - mean_e) < half
    assert abs(a["draft_acceptance_rate"] - (mean_e - 1) / k) < half / k
    assert a["alpha_iid"] == pytest.approx(alpha, abs=0.05)
    assert a["draft_acceptance_rate"] == pytest.approx(
        float(theory.draft_acceptance_rate(alpha, k)), abs=half / k
    )
    lvl = s["levels"][0]["overall"]
    assert lvl["completed"] == 40 and lvl["failed"] == 0


def test_timing_agrees_with_the_twins_step_schedule(cli: Cli, tmp_path: Path) -> None:
    cfg = TwinConfig(deployment=DEP_70B, k=3, time_scale=1.0, seed=1)
    with twin(cfg) as (url, engine):
        s = _bench(
            cli,
            tmp_path,
            "--url",
            url,
            "--dataset",
            "synthetic:in=64,out=48",
            "--num-prompts",
            "16",
            "--concurrency",
            "1",
            "--no-metrics",
        )
        steps = list(engine.steps)
    decode = [st for st in steps if st.n_decode > 0 and st.prefill_tokens == 0]
    twin_itl_per_token = sum(st.model_dt_s for st in decode) / sum(st.tokens for st in decode) * 1e3
    lvl = s["levels"][0]["overall"]
    assert lvl["itl_per_token_ms"]["mean"] == pytest.approx(twin_itl_per_token, rel=0.05)
    assert lvl["tpot_ms"]["mean"] == pytest.approx(twin_itl_per_token, rel=0.05)
    twin_step = sum(st.model_dt_s for st in decode) / len(decode) * 1e3
    assert lvl["itl_per_chunk_ms"]["mean"] == pytest.approx(twin_step, rel=0.05)


def test_ab_speedup_matches_the_simulator(cli: Cli, tmp_path: Path) -> None:
    users, n, out_len, in_len, alpha, k = 8, 48, 64, 128, 0.7, 3
    cls = (TrafficClass(name="a", share=1.0, alpha=alpha),)
    wl = WorkloadConfig(classes=cls)
    base_cfg = TwinConfig(deployment=DEP_70B, workload=wl, k=0, time_scale=1.0, seed=2)
    cand_cfg = TwinConfig(deployment=DEP_70B, workload=wl, k=k, time_scale=1.0, seed=2)
    with twin(base_cfg) as (b_url, _), twin(cand_cfg) as (c_url, _):
        s = _bench(
            cli,
            tmp_path,
            "--baseline-url",
            b_url,
            "--candidate-url",
            c_url,
            "--concurrency",
            str(users),
            "--dataset",
            f"synthetic:in={in_len},out={out_len}",
            "--num-prompts",
            str(n),
        )
    measured = s["comparisons"][0]["speedups"]["throughput_speedup"]
    cost = build_cost_model(resolve_deployment(DEP_70B, wl))
    reqs = RequestSet(
        np.full(n, in_len), np.full(n, out_len), np.zeros(n, dtype=np.int64), np.full(n, np.nan)
    )
    sc = Scenario(k, ClosedLoop(users=users), reqs, unconditional_table(cls, k), 64)
    predicted = run_paired(cost, sc, np.random.default_rng(0)).speedup.throughput_speedup
    assert measured == pytest.approx(predicted, rel=0.10)
    # lengths are fixed on both sides: synthetic out=N sets max_tokens with ignore_eos
    tpc = s["comparisons"][0]["speedups"]["candidate_tokens_per_chunk"]
    assert tpc == pytest.approx(float(theory.expected_tokens_per_pass(alpha, k)), rel=0.1)
