"""`alphagate simulate`: the default experiment, JSON, plots, open loop, mixes and errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import Cli
from tests.results_files import LLAMA_8B, SMALL_SWEEP


@pytest.mark.slow  # the default sweep, 6 mixes × 4 loads × 3 K with ranges: ~7 s of CPU
def test_default_simulation_70b_fp8_on_h100(cli: Cli) -> None:
    d = cli.json("simulate")
    assert d["deployment_detail"]["tp"] == 2 and "Llama-3.3-70B" in d["deployment"]
    assert d["ks"] == [1, 3, 5]
    assert len(d["mixes"]) == 6 and len(d["rows"]) == 4
    cells = {(c["load"], c["k"], c["mix"]): c for c in d["cells"]}
    assert cells[(1.0, 5, "α=0.7")]["alpha"] == 0.7
    assert cells[(1.0, 5, "α=0.7")]["speedup"]["throughput_speedup"] > 2.0
    assert cells[(256.0, 5, "α=0.4")]["speedup"]["throughput_speedup"] < 1.0
    # P99 ITL per token gets worse at concurrency 64 even where mean throughput improves
    c = cells[(64.0, 5, "α=0.5")]
    assert c["speedup"]["throughput_speedup"] > 1.0
    assert c["speedup"]["itl_per_token_p99_speedup"] < 1.0
    for row in d["rows"]:
        assert [x["k"] for x in row["by_k"]] == [1, 3, 5]
        for x in row["by_k"]:
            m, s = x["alpha_breakeven_model"], x["alpha_breakeven_sim"]
            assert m is not None and s is not None and abs(m - s) < 0.03
            iv = x["alpha_breakeven_interval"]
            assert iv["low"] < m < iv["high"]  # every constant of the prior box moves it
    # every predicted ratio carries its range over the step-time constants' priors
    assert d["ranges_origin"] == "prior"
    for cell in d["cells"]:
        iv, s = cell["throughput_speedup_interval"], cell["speedup"]["throughput_speedup"]
        assert iv["low"] < s < iv["high"], cell["load"]
    # near break-even the priors do not settle the sign: at concurrency 256, K = 3, α = 0.7 is
    # predicted a 1.01× gain whose range holds 1×
    iv = cells[(256.0, 3, "α=0.7")]["throughput_speedup_interval"]
    assert iv["low"] < 1.0 < iv["high"]
    for x in d["crossovers"]:
        lo, hi = x["batch_interval"]["low"], x["batch_interval"]["high"]
        if x["batch"] is not None and x["batch"] > 1:
            assert lo <= x["batch"] and (hi is None or x["batch"] <= hi)


def test_table_output_and_plots(cli: Cli, tmp_path: Path) -> None:
    r = cli.run("simulate", *SMALL_SWEEP, "--plot", str(tmp_path))
    assert r.exit_code == 0, r.output
    assert "Throughput speedup" in r.output and "ITL per token" in r.output
    for name in ("speedup_vs_load.png", "p99_itl_per_token.png", "itl_per_token_cdf.png"):
        assert (tmp_path / name).stat().st_size > 10_000
        assert (tmp_path / name).read_bytes()[:4] == b"\x89PNG"


def test_open_loop_and_mix(cli: Cli) -> None:
    d = cli.json(
        "simulate",
        "--model",
        "llama-3.1-8b",
        "--dtype",
        "bf16",
        "--rate",
        "2,20",
        "--num-requests",
        "200",
        "--class",
        "chat:0.7:0.7",
        "--class",
        "code:0.3:0.4",
        "--k",
        "3",
    )
    assert d["mixes"] == ["mix"]
    assert [r["load_kind"] for r in d["rows"]] == ["request rate (req/s)"] * 2
    assert all(c["spec"]["completed"] == 200 for c in d["cells"])


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--gpu", "h1000"], "--gpu"),
        (["--model", "llama-3.3-70b", "--dtype", "bf16", "--tp", "1"], "--tp"),
        (["--prompt-len", "gaussian:5"], "--prompt-len"),
        (["--output-len", "file:/no/such/file"], "--output-len"),
        (["--concurrency", "4", "--rate", "2"], "--rate"),
        (["--class", "a:0.5:0.7"], "--class"),
        (["--alpha", "1.4"], "--alpha"),
        (["--method", "medusa"], "--method"),
    ],
)
def test_bad_simulate_flags(cli: Cli, args: list[str], flag: str) -> None:
    r = cli.run("simulate", *args)
    assert r.exit_code == 2, r.output
    assert flag in r.output and "Traceback" not in r.output


def test_output_lengths_from_file(cli: Cli, tmp_path: Path) -> None:
    f = tmp_path / "lens.txt"
    f.write_text("# observed output lengths\n120\n80\n300\n")
    d = cli.json(
        "simulate",
        *LLAMA_8B,
        "--concurrency",
        "4",
        "--alpha",
        "0.6",
        "--k",
        "2",
        "--output-len",
        f"file:{f}",
        "--no-breakeven-sim",
    )
    assert d["cells"][0]["spec"]["completed"] == 200  # the default run length: 16 per user, ≥ 200
    bad = tmp_path / "bad.txt"
    bad.write_text("120\nlots\n")
    r = cli.run("simulate", "--output-len", f"file:{bad}")
    assert r.exit_code == 2 and "bad.txt:2" in r.output
