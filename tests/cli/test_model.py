"""`alphagate model`: JSON contracts, the three worked questions, and clear errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Cli


def test_speedup_contract_keys(cli: Cli) -> None:
    d = cli.json("model", "speedup", "--alpha", "0.7", "--k", "5")
    for key in (
        "expected_tokens_per_pass",
        "speedup",
        "draft_acceptance_rate",
        "mean_acceptance_length",
        "linear_expected_tokens",
    ):
        assert key in d
    assert d["expected_tokens_per_pass"] == pytest.approx(2.94117, abs=1e-4)
    assert d["draft_acceptance_rate"] == pytest.approx(0.3882, abs=1e-4)
    assert d["linear_expected_tokens"] == pytest.approx(4.5)


def test_breakeven_contract(cli: Cli) -> None:
    d = cli.json("model", "breakeven", "--k", "5", "--draft-cost", "0.05")
    assert d["alpha_breakeven"] == pytest.approx(0.2000, abs=1e-3)
    assert d["alpha_breakeven_linear"] == pytest.approx(0.05)
    s = cli.json(
        "model", "speedup", "--alpha", str(d["alpha_breakeven"]), "--k", "5", "--draft-cost", "0.05"
    )
    assert s["speedup"] == pytest.approx(1.0, abs=1e-9)


def test_breakeven_unreachable_is_null_with_reason(cli: Cli) -> None:
    d = cli.json("model", "breakeven", "--k", "2", "--draft-cost", "1.0", "--verify-cost", "1.5")
    assert d["alpha_breakeven"] is None
    assert "perfect acceptance" in d["reason"]


def test_worked_question_a_alpha_for_2x_and_3x_at_k5(cli: Cli) -> None:
    """Worked question (a): α for 2× and 3× at K = 5, and its sensitivity to v ∈ [1.0, 1.3]."""
    required: dict[tuple[float, float], float] = {}
    for v in (1.0, 1.1, 1.2, 1.3):
        for target in (2.0, 3.0):
            d = cli.json(
                "model", "required", "--speedup", str(target), "--k", "5", "--verify-cost", str(v)
            )
            assert d["alpha_required"] is not None
            required[(target, v)] = d["alpha_required"]
            # the α found really gives the target (cross-checked through the speedup command)
            s = cli.json(
                "model",
                "speedup",
                "--alpha",
                repr(d["alpha_required"]),
                "--k",
                "5",
                "--verify-cost",
                str(v),
            )
            assert s["speedup"] == pytest.approx(target, rel=1e-9)
    # hand-checked once: Σ_{i=0..5} 0.709^i = 3.000, Σ 0.5086^i = 2.000
    assert required[(2.0, 1.0)] == pytest.approx(0.5086, abs=5e-4)
    assert required[(3.0, 1.0)] == pytest.approx(0.7090, abs=5e-4)
    # a 30% verify overhead raises the requirement by 0.13 (2×) and 0.11 (3×); hand-checked:
    # Σ_{i=0..5} 0.6424^i = 2.600 = 2 × 1.3
    assert required[(2.0, 1.3)] == pytest.approx(0.6424, abs=5e-4)
    assert required[(2.0, 1.3)] - required[(2.0, 1.0)] == pytest.approx(0.134, abs=2e-3)
    assert required[(3.0, 1.3)] - required[(3.0, 1.0)] == pytest.approx(0.115, abs=2e-3)
    for target in (2.0, 3.0):
        vals = [required[(target, v)] for v in (1.0, 1.1, 1.2, 1.3)]
        assert vals == sorted(vals)


def test_required_unreachable(cli: Cli) -> None:
    d = cli.json("model", "required", "--speedup", "7", "--k", "5")
    assert d["alpha_required"] is None
    assert "even α = 1" in d["reason"]


def test_worked_question_b_chat_and_code_blend(cli: Cli) -> None:
    """Worked question (b): 70% chat at α 0.7, 30% code at α 0.4."""
    d = cli.json("model", "blend", "--class", "chat:0.7:0.7", "--class", "code:0.3:0.4", "--k", "5")
    assert d["naive_mean_alpha"] == pytest.approx(0.61)
    assert d["blended_speedup"] == pytest.approx(2.388, abs=1e-3)
    assert d["equivalent_alpha"] == pytest.approx(0.601, abs=1e-3)
    assert d["naive_speedup"] == pytest.approx(2.432, abs=1e-3)
    assert d["net_win"] is True
    assert [c["name"] for c in d["classes"]] == ["chat", "code"]
    # with an expensive draft (classic draft model, c = 0.25) and v = 1.2, code is a net loss
    d2 = cli.json(
        "model",
        "blend",
        "--class",
        "chat:0.7:0.7",
        "--class",
        "code:0.3:0.4",
        "--k",
        "5",
        "--draft-cost",
        "0.25",
        "--verify-cost",
        "1.2",
    )
    code = d2["classes"][1]
    assert code["net_win"] is False
    assert d2["classes"][0]["net_win"] is True
    assert d2["blended_speedup"] < d2["naive_speedup"]


def test_worked_question_c_memory_eagle3_70b_vs_llama_1b(cli: Cli) -> None:
    """Worked question (c): EAGLE-3 head for Llama-3.3-70B vs a Llama-3.2-1B draft model."""
    head = cli.json(
        "model", "memory", "--target", "llama-3.3-70b", "--draft", "eagle3", "--dtype", "bf16"
    )
    draft = cli.json(
        "model", "memory", "--target", "Llama-3.3-70B", "--draft", "llama-3.2-1b", "--dtype", "bf16"
    )
    assert head["draft"]["params"] / 1e9 == pytest.approx(1.403, abs=1e-3)
    assert head["draft"]["weight_bytes"] / 1e9 == pytest.approx(2.81, abs=5e-3)
    assert head["draft"]["kv_bytes_per_token"] == 4096
    assert draft["draft"]["params"] / 1e9 == pytest.approx(1.236, abs=1e-3)
    assert draft["draft"]["weight_bytes"] / 1e9 == pytest.approx(2.47, abs=5e-3)
    assert draft["draft"]["kv_bytes_per_token"] == 32768
    assert head["target"]["kv_bytes_per_token"] == 320 * 1024
    # the head's weights are larger, but its KV per token is 8× smaller than the 1B draft's
    assert head["draft"]["weight_bytes"] > draft["draft"]["weight_bytes"]
    assert draft["draft_kv_fraction_of_target"] == pytest.approx(
        8 * head["draft_kv_fraction_of_target"]
    )


def test_memory_from_local_config(cli: Cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    cfg = {
        "hidden_size": 256,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "intermediate_size": 688,
        "vocab_size": 4096,
        "tie_word_embeddings": True,
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    d = cli.json("model", "memory", "--target", str(path), "--draft", "eagle3", "--kv-dtype", "fp8")
    assert d["target"]["kv_bytes_per_token"] == 2 * 4 * 2 * 64 * 1
    assert d["weight_dtype"] == "bf16"  # no quantization_config: the checkpoint's own dtype
    # an FP8 checkpoint (compressed-tensors, float 8-bit weights) is FP8 unless told otherwise
    cfg["quantization_config"] = {
        "quant_method": "compressed-tensors",
        "config_groups": {"group_0": {"weights": {"num_bits": 8, "type": "float"}}},
    }
    path.write_text(json.dumps(cfg))
    fp8 = cli.json("model", "memory", "--target", str(path), "--draft", "eagle3")
    assert fp8["weight_dtype"] == "fp8"
    assert fp8["target"]["weight_bytes"] == pytest.approx(d["target"]["weight_bytes"] / 2, rel=0.05)
    given = cli.json(
        "model", "memory", "--target", str(path), "--draft", "eagle3", "--dtype", "bf16"
    )
    assert given["weight_dtype"] == "bf16"


def test_optimal_k(cli: Cli) -> None:
    d = cli.json("model", "optimal-k", "--alpha", "0.8", "--draft-cost", "0.05")
    assert d["k"] == 1 + max(range(len(d["speedup_by_k"])), key=lambda i: d["speedup_by_k"][i])
    off = cli.json(
        "model", "optimal-k", "--alpha", "0.1", "--draft-cost", "0.3", "--verify-cost", "1.2"
    )
    assert off["k"] == 0
    assert off["speedup"] == 1.0


def test_convert_all_three_ways(cli: Cli) -> None:
    a = cli.json("model", "convert", "--alpha", "0.7", "--k", "5")
    r = cli.json(
        "model", "convert", "--draft-acceptance-rate", str(a["draft_acceptance_rate"]), "--k", "5"
    )
    t = cli.json(
        "model", "convert", "--mean-acceptance-length", str(a["mean_acceptance_length"]), "--k", "5"
    )
    for d in (r, t):
        assert d["alpha"] == pytest.approx(0.7, abs=1e-9)
        assert d["mean_acceptance_length"] == pytest.approx(2.94117, abs=1e-4)
    assert len(a["per_position_unconditional"]) == 5


def test_table_shape_and_sensitivity(cli: Cli) -> None:
    d = cli.json(
        "model", "table", "--alphas", "0.5,0.7", "--ks", "1,3,5", "--verify-cost", "1.0,1.3"
    )
    assert len(d["speedup"]) == 2 and len(d["speedup"][0]) == 3 and len(d["speedup"][0][0]) == 2
    be = d["alpha_breakeven"]
    assert all(be[1][i] > be[0][i] for i in range(3))


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["model", "speedup", "--alpha", "1.5", "--k", "5"], "--alpha"),
        (["model", "speedup", "--alpha", "0.7", "--k", "0"], "--k"),
        (
            ["model", "speedup", "--alpha", "0.7", "--k", "5", "--draft-cost", "-0.1"],
            "--draft-cost",
        ),
        (["model", "speedup", "--alpha", "0.7", "--k", "5", "--verify-cost", "0"], "--verify-cost"),
        (["model", "blend", "--class", "chat:0.7", "--k", "5"], "--class"),
        (
            ["model", "blend", "--class", "chat:0.7:0.7", "--class", "code:0.2:0.4", "--k", "5"],
            "--class",
        ),
        (["model", "blend", "--class", "chat:x:0.7", "--k", "5"], "--class"),
        (["model", "memory", "--target", "llama-9", "--draft", "eagle3"], "--target"),
        (
            ["model", "memory", "--target", "llama-3.1-8b", "--draft", "eagle3", "--dtype", "fp7"],
            "--dtype",
        ),
        (["model", "convert", "--k", "5"], "--alpha"),
        (["model", "table", "--alphas", "0.5,abc"], "--alphas"),
    ],
)
def test_bad_values_exit_2_naming_the_flag(cli: Cli, args: list[str], flag: str) -> None:
    result = cli.run(*args)
    assert result.exit_code == 2, result.output
    assert flag in result.output
    assert "Traceback" not in result.output


def test_console_script_and_module_entry_points() -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "alphagate",
            "model",
            "speedup",
            "--alpha",
            "0.7",
            "--k",
            "5",
            "--json",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(out.stdout)["expected_tokens_per_pass"] == pytest.approx(2.94117, abs=1e-4)
    bad = subprocess.run(
        [sys.executable, "-m", "alphagate", "model", "speedup", "--alpha", "2", "--k", "5"],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2
    assert "--alpha" in bad.stderr and "Traceback" not in bad.stderr


_LOADED = """\
import json, sys
from alphagate.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
# the verbs' modules (a verb's package counts once, without the modules inside it)
verbs = (m for m in sys.modules if m.startswith("alphagate.cli.") and m.count(".") == 2)
print(json.dumps(sorted(m for m in verbs if m[14] != "_")))
import os
print(os.environ.get("OPENBLAS_NUM_THREADS"))
"""


def test_the_entry_point_loads_only_the_verb_it_runs() -> None:
    from alphagate.cli import VERBS

    def loaded(*args: str, env: dict[str, str] | None = None) -> tuple[list[str], str]:
        out = subprocess.run(
            [sys.executable, "-c", _LOADED, *args],
            capture_output=True,
            text=True,
            check=True,
            env={k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"} | (env or {}),
        )
        *printed, modules, blas = out.stdout.strip().splitlines()
        # numpy's OpenBLAS on one thread unless the user chose
        assert blas == (env or {}).get("OPENBLAS_NUM_THREADS", "1")
        return json.loads(modules), "\n".join(printed)

    mods, printed = loaded("model", "breakeven", "--k", "3", "--json")
    assert mods == ["alphagate.cli.model"]
    assert json.loads(printed)["verb"] == "model breakeven"
    # the whole command line where no verb is named: every verb registered and listed
    mods, printed = loaded("--help")
    assert mods == sorted(f"alphagate.cli.{m.replace('-', '_')}" for m in VERBS)
    listed = [ln.split()[0] for ln in printed.split("Commands:")[1].splitlines() if ln.strip()]
    assert sorted(listed) == sorted(VERBS)
    mods, _ = loaded("no-such-verb", env={"OPENBLAS_NUM_THREADS": "4"})
    assert len(mods) == len(VERBS)


@pytest.mark.timing
@pytest.mark.xdist_group("demo")  # with the browser test of its report: the demo runs once
def test_demo_runs_the_whole_workflow(demo_run: tuple[Path, str]) -> None:
    cwd, output = demo_run
    assert "Speedup (exact)" in output
    assert "Linear approximation" in output
    assert "Throughput speedup" in output  # the default simulation
    plan = (cwd / "demo-output" / "rollout-plan-c256.md").read_text()
    assert "## Verdict: **GO FOR SOME CLASSES ONLY**" in plan  # code is routed away at the peak
    assert "Route code to a pool without speculation" in plan
    summary = json.loads((cwd / "demo-output" / "bench" / "summary.json").read_text())
    assert [c["level"] for c in summary["comparisons"]] == ["c1", "c16"]
    assert all(c["speedups"]["throughput_speedup"] > 1.3 for c in summary["comparisons"])
    assert all(c["runs"] == 3 and c["throughput_interval"] for c in summary["comparisons"])
    assert "implied α" in output
    # the demo decides on its own A/B: a gate that passes or fails, never "not enough evidence"
    gate = json.loads((cwd / "demo-output" / "gate.json").read_text())
    assert gate["decision"] in ("pass", "fail"), gate
    assert "alphagate gate --bench demo-output/bench/summary.json" in output
