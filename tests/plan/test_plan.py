"""`alphagate plan`: decisions, numbers, engine config, schedule rules, the lesson's golden plan."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from alphagate.plan.engine_config import (
    VLLM_SPEC_FIELDS,
    ScheduleError,
    compress_schedule,
    validate_schedule,
)
from tests.conftest import Cli

GOLDEN = Path(__file__).with_name("golden_lesson_plan.json")
ENGINES_MD = Path(__file__).resolve().parents[3] / "shared" / "references" / "engines.md"
LESSON = [
    "--model",
    "llama-3.3-70b",
    "--gpu",
    "h100",
    "--dtype",
    "fp8",
    "--class",
    "chat:0.7:0.7",
    "--class",
    "code:0.3:0.4",
]


@cache
def _plan(*args: str) -> dict[str, Any]:
    from tests.conftest import Cli as _Cli

    return _Cli().json("plan", *args)


def _verdict(*args: str) -> str:
    return str(_plan("--dtype", "fp8", *args)["verdict"])


def test_decision_flips_with_concurrency() -> None:
    assert (
        _verdict("--class", "chat:0.7:0.7", "--class", "code:0.3:0.4", "--concurrency", "1") == "go"
    )
    assert (
        _verdict("--class", "chat:0.7:0.7", "--class", "code:0.3:0.4", "--concurrency", "256")
        == "no-go"
    )


def test_decision_flips_with_alpha() -> None:
    assert _verdict("--class", "chat:1.0:0.8", "--concurrency", "256") == "go"
    assert _verdict("--class", "chat:1.0:0.4", "--concurrency", "256") == "no-go"


def test_decision_flips_with_short_outputs() -> None:
    mix = ("--class", "chat:0.6:0.6", "--class", "code:0.4:0.6", "--concurrency", "64")
    assert _verdict(*mix) == "go"
    assert _verdict(*mix, "--output-len", "fixed:16") == "no-go"


def test_priors_that_straddle_break_even_mean_measure_first() -> None:
    d = _plan("--dtype", "fp8", "--class", "chat:1.0", "--concurrency", "256")
    assert d["verdict"] == "measure first"
    assert d["uses_priors"] is True
    assert "prior 0.60–0.80" in d["classes"][0]["source"] and "Stage 2" in d["classes"][0]["source"]


def test_a_class_below_break_even_means_go_for_some_classes() -> None:
    d = _plan(
        "--dtype",
        "fp8",
        "--class",
        "chat:0.8:0.8",
        "--class",
        "code:0.2:0.3",
        "--concurrency",
        "200",
    )
    assert d["verdict"] == "go for some classes only"
    assert "code at α 0.30" in d["reason"]
    assert [c["pays_at_target"] for c in d["classes"]] == [True, False]


def test_every_markdown_number_matches_the_json(cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "plan.md"
    d = cli.json(
        "plan", *LESSON, "--concurrency", "64", "--peak-concurrency", "256", "--out", str(out)
    )
    md = out.read_text()
    assert f"## Verdict: **{d['verdict'].upper()}**" in md
    assert d["reason"] in md
    for r in d["rows"]:
        line = next(x for x in md.splitlines() if x.startswith(f"| {r['concurrency']} |"))
        assert f"{r['throughput_speedup']:.2f}×" in line
        assert f"{r['itl_p50_off_ms']:.1f} → {r['itl_p50_on_ms']:.1f}" in line
        assert f"{r['itl_p99_off_ms']:.1f} → {r['itl_p99_on_ms']:.1f}" in line
        be = "—" if r["alpha_breakeven"] is None else f"{r['alpha_breakeven']:.2f}"
        assert f"| {be} |" in line
    for c in d["classes"]:
        line = next(x for x in md.splitlines() if x.startswith(f"| {c['name']} |"))
        assert f"{c['alpha']:.2f}" in line and f"{c['speedup_target']:.2f}×" in line
    assert f"**{d['blend_speedup_target']:.2f}×** simulated" in md
    assert f"naive α = {d['naive_mean_alpha']:.2f}" in md
    assert f"{d['memory']['kv_tokens_lost']:,} tokens" in md
    assert json.dumps(d["speculative_config"]) in md
    assert f"--min-draft-acceptance-rate {d['gate']['draft_acceptance_rate_min']:.3f}" in md
    for stage in range(6):
        assert f"### Stage {stage} —" in md


def test_vllm_config_uses_only_documented_fields(cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "plan.md"
    cli.json("plan", *LESSON, "--concurrency", "32", "--out", str(out))
    block = re.search(r"```json\n(.*?)\n```", out.read_text(), re.S)
    assert block is not None
    cfg = json.loads(block.group(1))
    assert set(cfg) <= VLLM_SPEC_FIELDS
    assert cfg["method"] == "eagle3" and cfg["draft_tensor_parallel_size"] == 2
    documented = ENGINES_MD.read_text() if ENGINES_MD.exists() else ""
    for field in cfg if documented else ():
        assert f"`{field}`" in documented or f'"{field}"' in documented, field


@pytest.mark.parametrize(
    ("args", "method"),
    [(["--method", "ngram"], "ngram"), (["--method", "draft_model"], "draft_model")],
)
def test_other_methods_and_sglang(cli: Cli, args: list[str], method: str) -> None:
    d = cli.json(
        "plan", "--class", "code:1.0:0.5", "--concurrency", "8", "--model", "llama-3.1-8b", *args
    )
    assert d["speculative_config"]["method"] == method
    assert set(d["speculative_config"]) <= VLLM_SPEC_FIELDS
    s = cli.json(
        "plan",
        "--class",
        "code:1.0:0.5",
        "--concurrency",
        "8",
        "--model",
        "llama-3.1-8b",
        "--engine",
        "sglang",
        *args,
    )
    assert "--speculative-algorithm" in s["sglang_flags"]
    assert "sglang.launch_server" in s["stages"][1]["commands"][0]


def test_batch_schedule_follows_vllm_rules_and_k_falls(cli: Cli) -> None:
    d = cli.json("plan", *LESSON, "--concurrency", "64")
    sched = d["batch_schedule"]
    validate_schedule(sched, d["speculative_config"]["num_speculative_tokens"])
    assert sched[0][0] == 1 and sched[-1][1] == 256
    ks = [k for _, _, k in sched]
    assert ks == sorted(ks, reverse=True) and ks[0] > ks[-1]
    assert d["speculative_config"]["num_speculative_tokens_per_batch_size"] == sched
    old = cli.json("plan", *LESSON, "--concurrency", "64", "--engine-version", "0.11")
    assert "num_speculative_tokens_per_batch_size" not in old["speculative_config"]
    assert old["dynamic_k_supported"] is False


def test_schedule_validation_rejects_what_vllm_rejects() -> None:
    assert compress_schedule([3, 3, 2, 0, 0]) == [[1, 2, 3], [3, 3, 2], [4, 5, 0]]
    for bad in (
        [],
        [[2, 4, 1]],
        [[1, 4, 1], [3, 8, 0]],
        [[1, 4, 6]],
        [[1, 4, -1]],
        [[1, 4]],
        [[1, 0, 1]],
    ):
        with pytest.raises(ScheduleError):
            validate_schedule(bad, 5)  # type: ignore[arg-type]


def test_lesson_plan_golden(cli: Cli, tmp_path: Path) -> None:
    """The lesson's scenario: numbers from the code, reviewed by hand once (tests/plan/golden_lesson_plan.json)."""
    d = cli.json("plan", *LESSON, "--concurrency", "256")
    golden = json.loads(GOLDEN.read_text())
    assert d["verdict"] == golden["verdict"] == "no-go"
    assert d["k"] == golden["k"] and d["tp"] == golden["tp"] == 2
    assert d["batch_schedule"] == golden["batch_schedule"]
    for got, want in zip(d["rows"], golden["rows"], strict=True):
        assert got["concurrency"] == want["concurrency"]
        assert got["recommended_k"] == want["recommended_k"]
        assert got["throughput_speedup"] == pytest.approx(want["throughput_speedup"], abs=1e-4)
        assert got["itl_p99_on_ms"] == pytest.approx(want["itl_p99_on_ms"], abs=1e-3)
    for got, want in zip(d["classes"], golden["classes"], strict=True):
        assert got["alpha_breakeven_target"] == pytest.approx(
            want["alpha_breakeven_target"], abs=1e-4
        )
        assert got["speedup_target"] == pytest.approx(want["speedup_target"], abs=1e-4)


def test_alpha_from_measurements(cli: Cli, tmp_path: Path) -> None:
    vllm_result = tmp_path / "vllm.json"
    vllm_result.write_text(
        json.dumps(
            {
                "spec_decode_acceptance_rate": 38.82,
                "spec_decode_acceptance_length": 2.941,
                "spec_decode_per_position_acceptance_rates": [0.7, 0.49, 0.343, 0.24, 0.168],
            }
        )
    )
    d = cli.json(
        "plan", "--class", "chat:1.0", "--concurrency", "16", "--alpha-from", str(vllm_result)
    )
    assert d["classes"][0]["alpha"] == pytest.approx(0.7, abs=1e-3)  # ρ 0.3882 at K = 5 ↔ α 0.7
    assert d["classes"][0]["measured"] is True and "vllm.json" in d["classes"][0]["source"]
    ours = tmp_path / "summary.json"
    ours.write_text(
        json.dumps(
            {"classes": {"chat": {"alpha": 0.75}, "code": {"draft_acceptance_rate": 0.2, "k": 3}}}
        )
    )
    d2 = cli.json(
        "plan",
        "--class",
        "chat:0.5",
        "--class",
        "code:0.5",
        "--concurrency",
        "16",
        "--alpha-from",
        str(ours),
    )
    assert [c["measured"] for c in d2["classes"]] == [True, True]
    assert d2["uses_priors"] is False
    bench = tmp_path / "bench.json"
    bench.write_text(
        json.dumps(
            {
                "schema": "alphagate.bench/v1",
                "levels": [
                    {"acceptance": {"num_drafts": 10, "draft_acceptance_rate": 0.1, "k": 5}},
                    {"acceptance": {"num_drafts": 5000, "draft_acceptance_rate": 0.3882, "k": 5}},
                ],
            }
        )
    )
    d3 = cli.json("plan", "--class", "chat:1.0", "--concurrency", "16", "--alpha-from", str(bench))
    assert d3["classes"][0]["alpha"] == pytest.approx(0.7, abs=1e-3)


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--class", "chat:0.5:0.7", "--class", "code:0.3", "--concurrency", "8"], "--class"),
        (["--class", "chat:1.0", "--concurrency", "8", "--model", "llama-9"], "--model"),
        (["--class", "chat:1.0", "--concurrency", "8", "--dtype", "bf16", "--tp", "1"], "--tp"),
        (
            ["--class", "chat:1.0", "--concurrency", "8", "--alpha-from", "/nope.json"],
            "--alpha-from",
        ),
        (["--class", "chat:1.0", "--concurrency", "8", "--engine", "trt"], "--engine"),
    ],
)
def test_bad_plan_input_exits_2(cli: Cli, args: list[str], flag: str) -> None:
    r = cli.run("plan", *args)
    assert r.exit_code == 2, r.output
    assert flag in r.output and "Traceback" not in r.output
