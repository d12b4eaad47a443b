"""A plan's ranges: every predicted ratio carries one, the verdict reads it (GO / NO-GO only clear
of 1×, MEASURE FIRST across it), the gate takes its pessimistic end, and the commands that would
narrow it parse as printed."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
import typer

from alphagate.cli import app
from tests.conftest import Cli
from tests.plans import PlanRun, Plans

#: one class at α 0.45 at concurrency 128 on the 70B FP8 default: K = 1 gains about 6% at the
#: constants' values, but over their ranges anywhere from a small loss to a 12% gain
ACROSS = ("--class", "chat:1:0.45", "--concurrency", "128")


def _across(plans: Plans) -> PlanRun:
    """The ACROSS plan, made at 80 columns (the default terminal, whose tables it checks)."""
    return plans(*ACROSS, width=80)


def _inside(iv: dict[str, float | None], x: float) -> bool:
    lo = -1e300 if iv["low"] is None else iv["low"]
    hi = 1e300 if iv["high"] is None else iv["high"]
    return lo - 1e-9 <= x <= hi + 1e-9


def test_every_predicted_ratio_has_a_range_that_holds_it(
    plans: Plans, chat_code_plan: PlanRun
) -> None:
    for d in (
        chat_code_plan.json,
        _across(plans).json,
        plans("--class", "chat:1", "--concurrency", "64").json,
    ):
        for r in d["rows"]:
            assert _inside(r["throughput_speedup_interval"], r["throughput_speedup"]), r
            assert _inside(r["tpot_speedup_interval"], r["tpot_speedup"]), r
            off, on = r["itl_p99_off_ms"], r["itl_p99_on_ms"]
            if r["k"]:
                assert _inside(r["itl_p99_ratio_interval"], on / off), r
                assert _inside(r["alpha_breakeven_interval"], r["alpha_breakeven"]), r
                lo, hi = r["best_k_range"]
                assert 0 <= lo <= hi <= 8
            else:
                assert r["throughput_speedup_interval"] == {"low": 1.0, "high": 1.0}
        for c in d["classes"]:
            assert _inside(c["speedup_target_interval"], c["speedup_target"]), c
            assert _inside(c["speedup_peak_interval"], c["speedup_peak"]), c
        u = d["uncertainty"]
        assert _inside(u["decision_interval"], d["headline_speedup"])
        assert u["origin"] == "prior" and len(u["ranges"]) >= 7
        for rng in u["ranges"]:
            assert rng["low"] <= rng["value"] <= rng["high"] and rng["source"]


def test_a_range_across_one_means_measure_first_and_names_the_calibration(plans: Plans) -> None:
    d = _across(plans).json
    u = d["uncertainty"]
    assert d["verdict"] == "measure first"
    assert u["straddles"] and u["settle_by"] == "calibrate" and u["settle_at"] == 128
    lo, hi = u["decision_interval"]["low"], u["decision_interval"]["high"]
    assert lo < 1.0 < hi
    assert f"[{lo:.2f}–{hi:.2f}×]" in d["reason"] and "across 1×" in d["reason"]
    # a calibration is expected to leave a narrower range, and says which: the constants within
    # ±10% of their values, the step times within two expected RMS residuals (±2%), which stay
    left = u["settled_interval"]
    assert left["high"] - left["low"] < 0.8 * (hi - lo)
    assert f"[{left['low']:.2f}–{left['high']:.2f}×]" in d["reason"]
    cal, replan = (shlex.split(c) for c in u["settle_commands"])
    assert cal[:2] == ["alphagate", "calibrate"] and cal.count("--url") == 2
    assert cal[cal.index("--concurrency") + 1] == "1,128"
    assert replan[:2] == ["alphagate", "plan"]
    assert replan[replan.index("--calibration") + 1] == cal[cal.index("--out") + 1]
    # the gate is still printed: a measure-first plan is followed to its A/B
    assert d["gate"] is not None and d["serve_candidate"]


def test_a_clear_range_keeps_go(plans: Plans) -> None:
    go = plans("--class", "chat:1:0.7", "--concurrency", "16").json
    assert go["verdict"] == "go" and go["uncertainty"]["decision_interval"]["low"] > 1.0
    assert not go["uncertainty"]["straddles"] and go["uncertainty"]["settle_by"] is None


@pytest.mark.slow  # a plan at concurrency 256 that simulates past the decode capacity
def test_a_clear_no_go_at_the_peak(plans: Plans) -> None:
    no = plans("--class", "chat:1:0.2", "--concurrency", "256").json
    assert no["verdict"] == "no-go"
    row = next(r for r in no["rows"] if r["concurrency"] == 256)
    assert row["k"] == 0  # nothing shipped there, and the best K's range is below 1×
    assert not no["uncertainty"]["straddles"]


def test_the_gate_is_the_pessimistic_end_of_the_break_even_range(chat_code_plan: PlanRun) -> None:
    d = chat_code_plan.json
    g = d["gate"]
    row = next(r for r in d["rows"] if r["concurrency"] == g["concurrency"])
    assert g["alpha_breakeven"] == row["alpha_breakeven_interval"]["high"]
    assert g["alpha_breakeven"] > row["alpha_breakeven"]
    # the TPOT rule is not above the pessimistic end of the TPOT range at the target
    target = next(r for r in d["rows"] if r["concurrency"] == 64)
    assert g["min_tpot_speedup"] <= target["tpot_speedup_interval"]["low"] + 1e-12


def test_a_plan_with_ranges_prints_them_at_80_columns(plans: Plans) -> None:
    run = _across(plans)
    assert "Verdict: MEASURE FIRST" in run.output
    # every line but the engine command's one-token JSON (and the long temporary path) reads
    # whole at 80 columns
    lines = [
        x
        for x in run.output.splitlines()
        if "--speculative-config" not in x and str(run.folder) not in x
    ]
    assert max(len(line) for line in lines) <= 80
    table = [x for x in run.output.splitlines() if re.match(r"\s*128\s+1\s", x)]
    assert table and "?" in table[0]  # the range that holds 1× is marked
    md = run.markdown
    assert "## Uncertainty" in md and "`compute_efficiency`" in md
    assert "alphagate calibrate --url" in md


def test_the_printed_narrowing_commands_parse(plans: Plans) -> None:
    group = typer.main.get_command(app)
    for cmd in _across(plans).json["uncertainty"]["settle_commands"]:
        argv = shlex.split(cmd)[1:]
        ctx = group.make_context("alphagate", list(argv), resilient_parsing=False)
        sub = group.get_command(ctx, argv[0])
        assert sub is not None, cmd
        sub.make_context(argv[0], argv[1:])


def test_explain_cost_lists_the_ranges_and_their_sources() -> None:
    d = Cli().json("simulate", "--explain-cost")
    names = [r["coefficient"] for r in d["ranges"]]
    assert {"compute_efficiency", "bw_efficiency", "step_overhead_s"} <= set(names)
    assert d["ranges_origin"] == "prior"
    assert any("vLLM PR #19970" in r["source"] for r in d["ranges"])
    r = Cli(width=100).run("simulate", "--explain-cost")
    assert "uncertain constants" in r.output and "compute_efficiency" in r.output


def test_the_calibrated_re_plan_keeps_the_measured_alpha(cli: Cli, tmp_path: Path) -> None:
    """A plan whose α came from a measurement: the re-plan it prints after the calibration
    types that α (the measurement's file may not travel with the plan), not the prior's."""
    from alphagate.bench.records import BenchResult, summarize_level
    from alphagate.measure.prom import SpecCounters, spec_delta

    after = SpecCounters(drafts=5000, draft_tokens=25000, accepted=4015, present=True)
    acceptance = spec_delta([SpecCounters(present=True)], [after])  # α ≈ 0.45 at K = 5
    level = summarize_level("candidate", "http://x", "c16", 16, None, [], acceptance)
    f = tmp_path / "summary.json"
    result = BenchResult(run_id="r", config={}, levels=[level], comparisons=[])
    f.write_text(json.dumps(result.payload()))
    d = cli.json("plan", "--class", "chat:1", "--concurrency", "128", "--alpha-from", str(f),
                 "--alpha-overall")  # fmt: skip
    assert d["verdict"] == "measure first" and d["uncertainty"]["settle_by"] == "calibrate"
    alpha = d["classes"][0]["alpha"]
    assert alpha == pytest.approx(0.45, abs=0.01)
    replan = shlex.split(d["uncertainty"]["settle_commands"][1])
    name, share, typed = replan[replan.index("--class") + 1].split(":")
    assert (name, float(share)) == ("chat", 1.0) and float(typed) == pytest.approx(alpha)
