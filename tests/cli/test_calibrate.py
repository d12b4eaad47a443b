"""`alphagate calibrate` from saved results, `--calibration` in simulate/plan/twin, the new
simulator inputs (α by position, --alpha-from, overhead flags, draft TP) and --explain-cost."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from alphagate.core.traffic import TrafficClass
from alphagate.sim.cost import build_cost_model
from alphagate.sim.engine import Scenario
from alphagate.sim.results import summarize
from alphagate.sim.run import run_scenarios
from alphagate.sim.workload import ClosedLoop, RequestSet, unconditional_table
from alphagate.specs import DeploymentConfig, resolve_deployment
from alphagate.specs.calibration import with_coefficients
from tests.conftest import Cli

DEP = ["--model", "llama-3.1-8b", "--dtype", "bf16", "--gpu", "h100"]
TRUTH = {"target_time_scale": 1.2, "step_overhead_s": 1.5e-3, "per_seq_overhead_s": 10e-6}
ALPHA = (0.8, 0.7, 0.6)


def _vllm_result(path: Path, c: int, k: int, n_in: int, n_out: int, n: int) -> Path:
    """What ``vllm bench serve --save-result`` writes for one closed-loop run, from the simulator
    with known coefficients."""
    base = DeploymentConfig(model="llama-3.1-8b", weight_dtype="bf16")
    cost = build_cost_model(resolve_deployment(with_coefficients(base, TRUTH)))
    cls = (
        TrafficClass(name="a", share=1.0, alpha_by_pos=ALPHA)
        if k
        else TrafficClass(name="a", share=1.0, alpha=0.0)
    )
    p, o = np.full(n, n_in, dtype=np.int64), np.full(n, n_out, dtype=np.int64)
    sc = Scenario(
        k, ClosedLoop(users=c), RequestSet(p, o, np.zeros(n, dtype=np.int64), np.full(n, np.nan)),
        unconditional_table((cls,), k), 256,
    )  # fmt: skip
    s = summarize(run_scenarios(cost, [sc], np.random.default_rng(c + 10 * k))[0])
    data: dict[str, Any] = {
        "backend": "openai",
        "max_concurrency": c,
        "request_rate": "inf",
        "completed": n,
        "total_input_tokens": n * n_in,
        "total_output_tokens": n * n_out,
        "mean_itl_ms": s.itl_per_chunk_ms.mean,
        "mean_ttft_ms": s.ttft_ms.mean,
        "std_ttft_ms": 0.02 * (s.ttft_ms.mean or 1.0),
        "mean_tpot_ms": s.tpot_ms.mean,
        "std_tpot_ms": 0.05 * (s.tpot_ms.mean or 1.0),
    }
    if k:
        data.update(
            spec_decode_acceptance_rate=100.0 * (s.draft_acceptance_rate or 0.0),
            spec_decode_num_drafts=s.num_drafts,
            spec_decode_draft_tokens=s.num_draft_tokens,
            spec_decode_accepted_tokens=s.num_accepted_tokens,
            spec_decode_per_position_acceptance_rates=s.per_position_acceptance,
        )
    path.write_text(json.dumps(data))
    return path


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    d = tmp_path_factory.mktemp("vllm-results")
    levels = [(1, 0, 2048, 8, 8), (1, 0, 256, 64, 16), (16, 0, 256, 64, 96), (1, 3, 256, 64, 16)]
    return [_vllm_result(d / f"r{i}.json", *lv) for i, lv in enumerate(levels)]


@pytest.fixture(scope="module")
def profile(results: list[Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("profile") / "calibration.json"
    r = Cli().run("calibrate", *map(str, results), *DEP, "--out", str(out))
    assert r.exit_code == 0, r.output
    assert "Coefficients" in r.output and f"profile written to {out}" in r.output
    return out


def test_calibrate_from_vllm_bench_results(results: list[Path], tmp_path: Path) -> None:
    d = Cli().json("calibrate", *map(str, results), *DEP, "--out", str(tmp_path / "p.json"))
    assert d["verb"] == "calibrate"
    assert json.loads((tmp_path / "p.json").read_text())["coefficients"] == d["coefficients"]
    got = {c["name"]: c["value"] for c in d["coefficients"]}
    assert got["target_time_scale"] == pytest.approx(TRUTH["target_time_scale"], rel=0.05)
    assert got["step_overhead_s"] == pytest.approx(TRUTH["step_overhead_s"], rel=0.1)
    assert d["valid_concurrency"] == [1, 16] and d["valid_k"] == [3, 3]
    assert [p["metric"] for p in d["points"]].count("ttft") == 3  # the concurrency-1 levels
    assert d["deployment"]["tp"] == 1  # the TP the terms were computed for is pinned


def test_simulate_and_plan_with_a_profile(profile: Path) -> None:
    cli = Cli()
    d = cli.json(
        "simulate", "--calibration", str(profile), "--concurrency", "1,64", "--k", "3",
        "--alpha", "0.7", "--no-breakeven-sim",
    )  # fmt: skip
    assert "Llama-3.1-8B" in d["deployment"]  # the profile's deployment, not the default 70B
    assert d["calibration"][0].startswith("step-time coefficients calibrated")
    assert any("concurrency 64 is outside its range 1–16" in n for n in d["calibration"][1:])
    # the Python API says the same: the notes are the simulator's, not the CLI's
    import alphagate as ag
    from alphagate.specs.calibration import load_profile

    prof = load_profile(profile)
    cfg = ag.SweepConfig(
        deployment=prof.deployment, workload=ag.WorkloadConfig(), ks=(3,), alphas=(0.7,),
        concurrencies=(1, 64), simulate_breakeven=False, num_requests=50,
    )  # fmt: skip
    assert ag.simulate(cfg, prof).calibration == d["calibration"]
    p = cli.json("plan", "--class", "chat:1:0.7", "--concurrency", "8", "--peak-concurrency",
                 "64", "--calibration", str(profile))  # fmt: skip
    assert any("concurrency 64 is outside its range 1–16" in n for n in p["calibration"][1:])
    assert any(r.startswith("Calibration:") for r in p["risks"])
    inside = cli.json("plan", "--class", "chat:1:0.7", "--concurrency", "8", "--k", "3",
                      "--calibration", str(profile))  # fmt: skip
    assert len(inside["calibration"]) == 1  # fitted at 1–16, K 3: nothing extrapolated


def test_a_profile_refuses_another_deployment(profile: Path) -> None:
    r = Cli().run("simulate", "--calibration", str(profile), "--gpu", "a100-80gb", "--json")
    assert r.exit_code == 2
    err = json.loads(r.stdout)["error"]
    assert err["param"] == "--gpu" and "fitted for --gpu h100" in err["message"]
    same = Cli().run("simulate", "--calibration", str(profile), "--gpu", "h100", "-c", "1",
                     "--k", "1", "--alpha", "0.7", "--no-breakeven-sim", "--json")  # fmt: skip
    assert same.exit_code == 0, same.output


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        ([], "--url"),
        (["missing.json"], "RESULTS"),
        (["--url", "http://127.0.0.1:9", "--concurrency", "0"], "--concurrency"),
    ],
)
def test_bad_calibrate_input(args: list[str], flag: str, tmp_path: Path) -> None:
    r = Cli().run("calibrate", *args, "--out", str(tmp_path / "p.json"), "--json")
    assert r.exit_code == 2, r.output
    assert json.loads(r.stdout)["error"]["param"] == flag


def test_bad_profile_names_the_flag(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"verb": "bench"}')
    for verb in (["simulate"], ["plan", "--class", "a:1:0.7", "-c", "4"]):
        r = Cli().run(*verb, "--calibration", str(bad), "--json")
        assert r.exit_code == 2, (verb, r.output)
        assert json.loads(r.stdout)["error"]["param"] == "--calibration"
    r = Cli().run("twin", "--calibration", str(bad))  # refused before it listens
    assert (
        r.exit_code == 2 and "--calibration" in r.output and "not a calibration profile" in r.output
    )


def test_explain_cost_json_and_table() -> None:
    cli = Cli()
    d = cli.json("simulate", *DEP, "--explain-cost")
    assert d["batches"] == [1, 2, 4, 8, 16, 32, 64] and d["ks"] == [1, 2, 3, 4, 5]
    v = np.asarray(d["verify_cost"])
    assert v.shape == (7, 5) and np.all(v >= 1.0) and np.all(np.diff(v[:, 2]) >= 0)
    terms = {t["term"]: t for t in d["terms"]}
    assert terms["host_step"]["moves"] == "v" and terms["draft_gemm"]["moves"] == "c"
    r = cli.run("simulate", *DEP, "--explain-cost", "--concurrency", "16", "--k", "2")
    assert r.exit_code == 0 and "How each term moves v" in r.output and "B=16" in r.output
    assert "v K=2" in r.output and "v K=3" not in r.output  # the K asked for, only
    # the engine settings per arm: the token budget's cap (K + 1 tokens each, one more input
    # slot for a draft model), async scheduling, the largest batch a CUDA graph holds, and the
    # largest the KV cache holds (here max_num_seqs on both arms)
    budget, sched, graphs, kv = d["engine"]
    assert kv["by_k"] == [256] * 6 and "largest batch in the KV cache" in kv["name"]
    assert budget["by_k"] == [8192 // (k + 1) for k in range(6)]
    assert sched["by_k"] == [1] * 6  # EAGLE-3 keeps async scheduling on
    assert graphs["by_k"] == [512 // (k + 1) for k in range(6)]
    assert "host_sync" not in {t["term"] for t in d["terms"] if any(any(r) for r in t["by_batch"])}
    dm = cli.json(
        "simulate", *DEP, "--method", "draft_model", "--draft", "llama-3.2-1b",
        "--max-num-batched-tokens", "2048", "--explain-cost",
    )  # fmt: skip
    assert dm["engine"][0]["by_k"] == [2048, 2048 // 3, 2048 // 4, 2048 // 5, 2048 // 6, 2048 // 7]
    # n-gram drafting turns async scheduling off in the speculative arm only: each of its
    # steps pays the host time async scheduling hides, as a verify cost
    ng = cli.json("simulate", *DEP, "--method", "ngram", "--explain-cost")
    assert ng["engine"][1]["by_k"] == [1, 0, 0, 0, 0, 0]
    sync = next(t for t in ng["terms"] if t["term"] == "host_sync")
    decode_ms = np.asarray(ng["decode_ms"])
    assert sync["moves"] == "v"
    assert np.asarray(sync["by_batch"]) == pytest.approx(
        np.repeat((1.0 / decode_ms)[:, None], 5, axis=1)  # 1 ms over a decode step, every K
    )
    assert "Engine settings" in r.output and "sequences a step decodes (budget 8,192)" in r.output


def test_alpha_by_position_alpha_from_and_cost_flags(tmp_path: Path) -> None:
    cli = Cli()
    by_pos = cli.json("simulate", *DEP, "--class", "chat:1:0.8,0.7,0.6", "-c", "1", "--k", "3",
                      "--no-breakeven-sim")  # fmt: skip
    flat = cli.json("simulate", *DEP, "--class", "chat:1:0.6", "-c", "1", "--k", "3",
                    "--no-breakeven-sim")  # fmt: skip
    s_pos = by_pos["cells"][0]["speedup"]["throughput_speedup"]
    assert s_pos > flat["cells"][0]["speedup"]["throughput_speedup"]
    measured = tmp_path / "alpha.json"
    measured.write_text(json.dumps({"classes": {"chat": {"alpha": 0.6}}}))
    filled = cli.json("simulate", *DEP, "--class", "chat:1", "--alpha-from", str(measured),
                      "-c", "1", "--k", "3", "--no-breakeven-sim")  # fmt: skip
    assert filled["cells"][0]["speedup"]["throughput_speedup"] == pytest.approx(
        flat["cells"][0]["speedup"]["throughput_speedup"]
    )
    slow = cli.json("simulate", *DEP, "--class", "chat:1:0.6", "-c", "1", "--k", "3",
                    "--no-breakeven-sim", "--draft-overhead-ms", "2")  # fmt: skip
    assert slow["cells"][0]["speedup"]["throughput_speedup"] < 0.8 * s_pos
    r = cli.run("simulate", *DEP, "--tp", "2", "--draft-tp", "2", "-c", "1", "--k", "1",
                "--alpha", "0.7", "--no-breakeven-sim", "--json")  # fmt: skip
    assert r.exit_code == 0, r.output
    bad = cli.run("simulate", *DEP, "--tp", "4", "--draft-tp", "2", "--json")
    assert bad.exit_code == 2


def test_mean_batch_is_reported_beside_the_concurrency() -> None:
    d = Cli().json("simulate", *DEP, "-c", "16", "--k", "3", "--alpha", "0.7",
                   "--no-breakeven-sim")  # fmt: skip
    assert d["rows"][0]["baseline"]["mean_batch"] > 0.9 * 16


def test_an_unusable_fit_is_written_refused_and_exit_1(tmp_path: Path) -> None:
    """Two runs of one level whose step times differ fourfold: no coefficient explains both
    (RMS residual ≈ 51%), so the profile is written for inspection, marked unusable, and
    simulate, plan and twin refuse it naming why."""
    a = _vllm_result(tmp_path / "a.json", 1, 0, 256, 64, 16)
    b = _vllm_result(tmp_path / "b.json", 1, 0, 256, 64, 16)
    slow = json.loads(b.read_text())
    slow.update(mean_tpot_ms=4 * slow["mean_tpot_ms"], mean_ttft_ms=4 * slow["mean_ttft_ms"])
    b.write_text(json.dumps(slow))
    out = tmp_path / "p.json"
    r = Cli().run("calibrate", str(a), str(b), *DEP, "--out", str(out))
    assert r.exit_code == 1, r.output
    assert "unusable" in r.stderr and "RMS residual is 51%" in " ".join(r.stderr.split())
    p = json.loads(out.read_text())
    assert p["usable"] is False and p["rms_residual_pct"] > 25 and "25%" in p["unusable_reason"]
    for verb in (["simulate"], ["plan", "--class", "a:1:0.7", "-c", "4"]):
        refused = Cli().run(*verb, "--calibration", str(out), "--json")
        assert refused.exit_code == 2, (verb, refused.output)
        err = json.loads(refused.stdout)["error"]
        assert err["param"] == "--calibration" and "unusable" in err["message"]
        assert "RMS residual" in err["message"]
    twin = Cli().run("twin", "--calibration", str(out))
    assert twin.exit_code == 2 and "unusable" in twin.output


def test_a_usable_fit_is_marked_usable(results: list[Path], tmp_path: Path) -> None:
    d = Cli().json("calibrate", *map(str, results), *DEP, "--out", str(tmp_path / "p.json"))
    assert d["usable"] is True and d["unusable_reason"] is None and d["partial"] is False


def _bench_summary(folder: Path) -> Path:
    """A real alphagate bench result (summary.json + requests.jsonl) against a twin."""
    from alphagate.specs import DeploymentConfig
    from alphagate.twin.config import TwinConfig
    from tests.servers import twin

    cfg = TwinConfig(
        deployment=DeploymentConfig(model="llama-3.1-8b", weight_dtype="bf16"),
        k=0,
        time_scale=0.0,
    )
    with twin(cfg) as (url, _):
        r = Cli().run("bench", "--url", url, "-n", "4", "--dataset", "synthetic:in=8,out=8",
                      "--out", str(folder), "--json")  # fmt: skip
    assert r.exit_code == 0, r.output
    return folder / "summary.json"


@pytest.mark.parametrize("damage", ["truncated summary", "garbage summary", "summary of nothing",
                                    "truncated records", "garbage records"])  # fmt: skip
def test_damaged_saved_results_name_the_file(damage: str, tmp_path: Path) -> None:
    summary = _bench_summary(tmp_path / "run")
    records = summary.parent / "requests.jsonl"
    if damage == "truncated summary":
        summary.write_text(summary.read_text()[: len(summary.read_text()) // 2])
    elif damage == "garbage summary":
        summary.write_bytes(b"\x00\xff garbage")
    elif damage == "summary of nothing":
        summary.write_text('{"schema": "alphagate.results/v1", "verb": "bench", "levels": 3}')
    elif damage == "truncated records":
        records.write_text(records.read_text()[:-40])
    else:
        records.write_text(records.read_text() + "{not a record}\n")
    r = Cli().run("calibrate", str(summary), *DEP, "--out", str(tmp_path / "p.json"), "--json")
    assert r.exit_code == 2, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit)
    err = json.loads(r.stdout)["error"]
    named = records if "records" in damage else summary
    assert err["param"] == "RESULTS" and str(named) in err["message"], err
    if "records" in damage:
        assert "line" in err["message"]


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("mean_tpot_ms", "fast", "mean_tpot_ms"),
        ("max_concurrency", 0, "max_concurrency"),
        ("spec_decode_per_position_acceptance_rates", [0.8, "x"], "acceptance_rates"),
        ("total_output_tokens", 1e30, "tokens per request"),
        ("completed", 10**12, "completed"),
    ],
)
def test_a_vllm_result_with_a_bad_field_names_it(
    field: str, value: object, words: str, tmp_path: Path
) -> None:
    path = _vllm_result(tmp_path / "r.json", 1, 0, 256, 64, 4)
    data = json.loads(path.read_text())
    data[field] = value
    path.write_text(json.dumps(data))
    r = Cli().run("calibrate", str(path), *DEP, "--out", str(tmp_path / "p.json"), "--json")
    assert r.exit_code == 2, r.output
    err = json.loads(r.stdout)["error"]
    assert err["param"] == "RESULTS" and words in err["message"] and str(path) in err["message"]


def test_a_partial_profile_loads_and_says_so(profile: Path, tmp_path: Path) -> None:
    from alphagate.specs.calibration import load_profile

    data = json.loads(profile.read_text())
    partial = tmp_path / "partial.json"
    partial.write_text(json.dumps({**data, "partial": True}))
    assert "partial" in load_profile(partial).summary()
    assert "partial" not in load_profile(profile).summary()


def test_a_calibration_narrows_the_plans_ranges_and_they_hold_the_truth(tmp_path: Path) -> None:
    """A profile fitted to a simulated server with known coefficients, on levels with and without
    speculation at concurrency 1–16, replaces the prior ranges with the fit's covariance: the
    plan's range at a level inside the profile's (not one it was fitted on) is at most half as
    wide, and holds the speedup of the server the data came from."""
    levels = [(1, 0, 2048, 8, 8), *((c, k, 256, 64, 16 * c) for c in (1, 4, 16) for k in (0, 3))]
    results = [_vllm_result(tmp_path / f"r{i}.json", *lv) for i, lv in enumerate(levels)]
    profile = tmp_path / "calibration.json"
    cli = Cli()
    r = cli.run("calibrate", *map(str, results), *DEP, "--out", str(profile))
    assert r.exit_code == 0, r.output
    base = ["--class", "chat:1:0.7", "--concurrency", "8", "--k", "3"]
    prior = cli.json("plan", *base, *DEP)
    cal = cli.json("plan", *base, "--calibration", str(profile))
    truth = cli.json(
        "plan", *base, *DEP, "--target-time-scale", f"{TRUTH['target_time_scale']:g}",
        "--step-overhead-ms", f"{TRUTH['step_overhead_s'] * 1e3:g}",
        "--per-seq-overhead-us", f"{TRUTH['per_seq_overhead_s'] * 1e6:g}",
    )  # fmt: skip

    def row(d: dict[str, Any]) -> dict[str, Any]:
        return next(r for r in d["rows"] if r["concurrency"] == 8)

    assert prior["uncertainty"]["origin"] == "prior"
    assert cal["uncertainty"]["origin"] == "calibration"
    iv_p, iv_c = row(prior)["throughput_speedup_interval"], row(cal)["throughput_speedup_interval"]
    assert iv_c["high"] - iv_c["low"] <= 0.5 * (iv_p["high"] - iv_p["low"])
    assert iv_c["low"] <= row(truth)["throughput_speedup"] <= iv_c["high"]


def test_a_calibrated_plan_whose_range_holds_one_does_not_send_you_to_calibrate_again(
    profile: Path,
) -> None:
    """Calibrated already, a range across 1× is settled by the A/B, not by the same sweep again:
    the plan prints no calibrate command and says so."""
    d = Cli().json("plan", "--class", "chat:1:0.4", "-c", "64", "--calibration", str(profile))
    u = d["uncertainty"]
    assert u["origin"] == "calibration"
    lo, hi = u["decision_interval"]["low"], u["decision_interval"]["high"]
    assert lo < 1.0 < hi
    assert u["settle_by"] == "ab" and u["settle_commands"] == []
    out = Cli(width=100).run("plan", "--class", "chat:1:0.4", "-c", "64", "--calibration",
                             str(profile)).output  # fmt: skip
    assert "calibrated already" in out and "alphagate calibrate" not in out


def test_calibrate_reads_a_vllm_bench_sweep_folder(results: list[Path], tmp_path: Path) -> None:
    """``vllm bench sweep serve`` lays out one folder per (server, bench) combination with a
    ``run=<n>.json`` per run (its parameters merged in), their list in ``summary.json``, and a
    ``warmup.json`` and failed runs' ``*.failure.json`` beside them: given the experiment
    folder, calibrate fits every run, the same profile as from the files themselves."""
    exp = tmp_path / "sweep"
    for i, src in enumerate(results):
        data = json.loads(src.read_text())
        comb = exp / f"SERVE--r{i}-BENCH--c{data['max_concurrency']}"
        comb.mkdir(parents=True)
        runs = [{**data, "run_number": 0, "max_concurrency": data["max_concurrency"]}]
        (comb / "run=0.json").write_text(json.dumps(runs[0]))
        (comb / "summary.json").write_text(json.dumps(runs))
        (comb / "warmup.json").write_text(json.dumps({"not": "read"}))
        (comb / "run=1.failure.json").write_text(json.dumps({"error": "boom"}))
    direct = Cli().json("calibrate", *map(str, results), *DEP, "--out", str(tmp_path / "a.json"))
    swept = Cli().json("calibrate", str(exp), *DEP, "--out", str(tmp_path / "b.json"))
    assert [c["value"] for c in swept["coefficients"]] == pytest.approx(
        [c["value"] for c in direct["coefficients"]]
    )
    assert len(swept["points"]) == len(direct["points"])
    assert all("run=0" in p["label"] and "SERVE--r" in p["label"] for p in swept["points"])
    # one combination's folder, and its summary.json (the list of its runs), read alike
    one = next(exp.iterdir())
    from alphagate.calibrate import read_observations

    assert [o.step_ms for o in read_observations(one)] == [
        o.step_ms for o in read_observations(one / "summary.json")
    ]
    r = Cli().run("calibrate", str(tmp_path), *DEP)  # neither kind of folder
    assert r.exit_code == 2 and "no run=<n>.json" in r.output
