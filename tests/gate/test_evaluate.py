"""The gate's decisions at their boundaries, its A/B intervals, and its CLI on files and bad input.

A ``>=`` rule passes only when the whole 95% interval clears the threshold, fails when the whole
interval is below it, and otherwise — or on too small a sample — is *insufficient* (exit 3),
never a pass.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from alphagate import theory
from alphagate.bench.records import RequestRecord
from alphagate.core.errors import ConfigError
from alphagate.gate import Evidence, Rule, RuleSet, evaluate
from alphagate.gate.evidence import ABSide, ab_value
from alphagate.measure.estimate import AcceptanceEstimate, estimate
from alphagate.measure.results import MeasureResult
from tests.conftest import Cli
from tests.plans import Plans
from tests.records import streamed

K = 3


def _acc(alpha: float, drafts: int) -> AcceptanceEstimate:
    """Counter totals as a server with i.i.d. acceptance α would report them (expected counts)."""
    per_pos = [drafts * alpha ** (i + 1) for i in range(K)]
    return estimate(drafts, drafts * K, sum(per_pos), per_pos, K)


def _decide(rule: Rule, est: AcceptanceEstimate, min_drafts: int = 1000) -> str:
    ev = Evidence()
    ev.add_acceptance(None, est, "test")
    return evaluate(RuleSet(rules=[rule], min_drafts=min_drafts), ev).results[0].result


def test_acceptance_rules_at_the_interval_boundaries() -> None:
    est = _acc(0.6, 5000)
    ci = est.alpha_iid_ci
    assert ci is not None and ci.low < 0.6 < ci.high
    assert _decide(Rule(metric="alpha", threshold=ci.low - 1e-6), est) == "pass"
    assert _decide(Rule(metric="alpha", threshold=ci.high + 1e-6), est) == "fail"
    assert _decide(Rule(metric="alpha", threshold=0.6), est) == "insufficient"  # straddles
    # far above the threshold, but on fewer drafts than the rule set needs: never a pass
    assert _decide(Rule(metric="alpha", threshold=0.1), _acc(0.6, 500)) == "insufficient"
    rho = float(theory.draft_acceptance_rate(0.6, K))
    assert est.draft_acceptance_rate == pytest.approx(rho)
    assert _decide(Rule(metric="draft_acceptance_rate", threshold=rho - 0.03), est) == "pass"
    tau = float(theory.mean_acceptance_length(0.6, K))
    assert _decide(Rule(metric="mean_acceptance_length", threshold=tau + 0.1), est) == "fail"


def test_decision_and_exit_code_combine_rules() -> None:
    ev = Evidence()
    ev.add_acceptance(None, _acc(0.6, 5000), "test")
    passing = Rule(metric="alpha", threshold=0.5)
    failing = Rule(metric="alpha", threshold=0.7)
    straddling = Rule(metric="alpha", threshold=0.6)
    g = evaluate(RuleSet(rules=[passing]), ev)
    assert (g.decision, g.exit_code) == ("pass", 0)
    g = evaluate(RuleSet(rules=[passing, straddling]), ev)
    assert (g.decision, g.exit_code) == ("insufficient", 3)
    g = evaluate(RuleSet(rules=[passing, straddling, failing]), ev)
    assert (g.decision, g.exit_code) == ("fail", 1)
    # a rule with no evidence at all is insufficient, and says which kind was missing
    g = evaluate(RuleSet(rules=[Rule(metric="tpot_speedup", threshold=1.1)]), ev)
    assert g.decision == "insufficient" and "baseline vs candidate" in g.results[0].why


def test_failed_requests_count_against_acceptance_measured_by_bench_runs() -> None:
    """A candidate that failed 30% of its requests does not pass on the acceptance of the rest;
    a small clean run is not asked to prove its failures small (the default rule is a guard)."""
    from alphagate.gate.rules import default_error_rules

    alpha = Rule(metric="alpha", threshold=0.5)
    (guard,) = default_error_rules([alpha], bench=True)
    assert guard.metric == "error_rate" and guard.guard and guard.threshold == 0.05
    assert default_error_rules([alpha], bench=False) == []  # measure files only: no runs
    rs = RuleSet(rules=[alpha, guard])
    for failed, total, decision in ((119, 384, "fail"), (0, 40, "pass"), (1, 40, "pass")):
        ev = Evidence()
        ev.add_acceptance(None, _acc(0.6, 5000), "test", bench=True)
        ev.failures.append(("summary.json (candidate c4)", failed, total))
        g = evaluate(rs, ev)
        assert g.decision == decision, (failed, total, g.results[1].why)
    assert "every run measured" in g.results[1].evidence


def test_a_measurement_outranks_a_bench_runs_counters() -> None:
    ev = Evidence()
    ev.add_acceptance(None, _acc(0.69, 2000), "bench c1", bench=True)
    ev.add_acceptance(None, _acc(0.70, 9000), "bench c16", bench=True)  # more drafts: kept
    assert ev.acceptance_source[None] == "bench c16"
    ev.add_acceptance(None, _acc(0.71, 3000), "measure live")
    ev.add_acceptance(None, _acc(0.70, 90000), "bench c64", bench=True)  # does not replace it
    assert ev.acceptance_source[None] == "measure live"
    # a measure file that says α 0.7 beside a bench run whose own counters say 0.3: one of them
    # is not of this traffic, and the gate says so instead of believing either
    with pytest.raises(ConfigError, match="contradict each other"):
        ev.add_acceptance(None, _acc(0.3, 90000), "bench c256", bench=True)


def _records(n: int, tpot_s: float, tokens: int, rng: np.random.Generator) -> list[RequestRecord]:
    out = []
    for i in range(n):
        gaps = rng.exponential(tpot_s, tokens - 1)
        times = np.concatenate([[0.05], 0.05 + np.cumsum(gaps)])
        out.append(streamed(times.tolist(), id=i, target="x", send_s=float(i)))
    return out


def test_the_bootstrap_interval_covers_the_true_ratio_and_narrows_with_n() -> None:
    """Exponential gaps with means 20 ms and 10 ms: the true TPOT ratio is 2. Over 100
    independent A/Bs the 95% interval covers it ~95 times (binomial sd 2.2; 85 is 4.6 sd
    below); the interval narrows like 1/√n."""
    rng = np.random.default_rng(7)
    covered = 0
    for _ in range(100):
        base = ABSide("baseline", _records(60, 0.020, 20, rng), None)
        cand = ABSide("candidate", _records(60, 0.010, 20, rng), None)
        v = ab_value("tpot_speedup", base, cand)
        assert v.interval is not None and v.n == 60
        covered += v.interval.low <= 2.0 <= v.interval.high
    assert covered >= 85
    widths = []
    for n in (50, 800):
        base = ABSide("baseline", _records(n, 0.020, 40, rng), None)
        cand = ABSide("candidate", _records(n, 0.010, 40, rng), None)
        v = ab_value("tpot_speedup", base, cand)
        assert v.interval is not None
        widths.append(v.interval.high - v.interval.low)
        p99 = ab_value("itl_per_token_p99_speedup", base, cand)
        # P99 of exponential gaps scales with the mean: the ratio is 2 as well
        assert p99.value == pytest.approx(2.0, rel=0.25)
    # 16× the requests: about ¼ the width
    assert widths[1] < widths[0] / 2.5


def test_error_rate_is_a_wilson_bound_over_requests() -> None:
    rng = np.random.default_rng(1)
    ok = _records(300, 0.01, 5, rng)
    bad = [r.model_copy(update={"error_type": "http_500"}) for r in ok[:3]]
    cand = ABSide("candidate", ok[3:] + bad, None)
    v = ab_value("error_rate", ABSide("baseline", ok, None), cand)
    assert v.value == pytest.approx(0.01) and v.interval is not None
    # Wilson (1927) by hand: centre (p + z²/2n)/(1 + z²/n), half-width z·√(p(1−p)/n + z²/4n²)/(1 + z²/n)
    p, n, z = 0.01, 300, 1.959964
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    assert v.interval.low == pytest.approx(centre - half, rel=1e-4)
    assert v.interval.high == pytest.approx(centre + half, rel=1e-4)


# ---------------------------------------------------------------- the CLI on files
def _measure_file(path: Path, alpha: float, drafts: int) -> Path:
    m = MeasureResult(verb="measure live", source="test", overall=_acc(alpha, drafts))
    path.write_text(json.dumps(m.payload()))
    return path


def test_cli_exit_codes_on_measure_files(cli: Cli, tmp_path: Path) -> None:
    good = _measure_file(tmp_path / "good.json", 0.7, 5000)
    bad = _measure_file(tmp_path / "bad.json", 0.3, 5000)
    few = _measure_file(tmp_path / "few.json", 0.9, 50)
    out = tmp_path / "gate.json"
    r = cli.run("gate", "--min-alpha", "0.5", "--measure", str(good), "--out", str(out))
    assert r.exit_code == 0, r.output
    assert "α ≥ 0.5" in r.output and "PASS" in r.output
    d = json.loads(out.read_text())
    assert d["verb"] == "gate" and d["decision"] == "pass" and d["exit_code"] == 0
    assert d["results"][0]["margin"] == pytest.approx(d["results"][0]["value"] - 0.5)
    assert cli.run("gate", "--min-alpha", "0.5", "--measure", str(bad)).exit_code == 1
    r = cli.run("gate", "--min-alpha", "0.5", "--measure", str(few))
    assert r.exit_code == 3 and "50 drafts < the 2,000 needed" in r.output
    r = cli.run("gate", "--min-alpha", "0.5", "--measure", str(few), "--min-drafts", "20")
    assert r.exit_code == 0
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps({"rules": [{"metric": "draft_acceptance_rate", "threshold": 0.4}]}))
    d = cli.json("gate", "--rules", str(rules), "--measure", str(good))
    assert d["decision"] == "pass" and d["results"][0]["rule"]["source"] == str(rules)


def test_cli_point_values_from_vllm_bench_serve(cli: Cli, tmp_path: Path) -> None:
    def result(name: str, tpot: float, itl: float, **extra: float) -> Path:
        p = tmp_path / name
        body = {"max_concurrency": 8, "completed": 500, "failed": 0}
        body |= {"mean_tpot_ms": tpot, "p99_itl_ms": itl, "output_throughput": 1000 / tpot}
        p.write_text(json.dumps(body | extra))
        return p

    base = result("base.json", 20.0, 25.0)
    cand = result("cand.json", 12.0, 40.0)
    args = ["gate", "--min-tpot-speedup", "1.5", "--min-itl-per-token-p99-speedup", "0.9",
            "--vllm-baseline", str(base), "--vllm-candidate", str(cand)]  # fmt: skip
    # a summary's mean has no interval: not enough evidence, unless asked to judge it as it is
    d = cli.json(*args, exit_code=3)
    assert d["results"][0]["result"] == "insufficient"
    assert "--allow-point-estimates" in d["results"][0]["why"]
    d = cli.json(*args, "--allow-point-estimates", exit_code=3)
    tpot, itl, errors = d["results"]
    assert errors["rule"]["metric"] == "error_rate" and errors["result"] == "pass"  # 0 of 500
    assert tpot["result"] == "pass" and tpot["value"] == pytest.approx(20 / 12)
    assert "point estimate" in tpot["why"]
    # vllm bench serve's ITL is one sample per chunk: never judged as a per-token figure
    assert itl["result"] == "insufficient" and "per chunk" in itl["why"]
    assert d["exit_code"] == 3


def test_cli_bad_input_is_exit_2_and_names_the_input(
    cli: Cli, plans: Plans, tmp_path: Path
) -> None:
    good = _measure_file(tmp_path / "good.json", 0.7, 5000)
    cases: list[tuple[list[str], str]] = [
        (["--measure", str(good)], "no rules"),
        (["--min-alpha", "0.5"], "no evidence"),
        (["--min-alpha", "1.5", "--measure", str(good)], "--min-alpha"),
        (["--min-alpha", "0.5", "--measure", str(tmp_path / "nope.json")], "not found"),
        (["--min-alpha", "0.5", "--measure", str(good), "--watch"], "--watch needs"),
        (["--min-alpha", "0.5", "--url", "http://127.0.0.1:9", "--window", "1s"], "cannot reach"),
        (["--min-alpha", "0.5", "--url", "http://127.0.0.1:9", "--window", "soon"], "--window"),
    ]
    (tmp_path / "rules.json").write_text('{"rules": [{"metric": "alpah", "threshold": 0.5}]}')
    cases.append((["--rules", str(tmp_path / "rules.json"), "--measure", str(good)], "metric"))
    (tmp_path / "notjson.json").write_text("{")
    cases.append((["--min-alpha", "0.5", "--measure", str(tmp_path / "notjson.json")], "JSON"))
    no_go = plans("--class", "chat:1:0.2", "--concurrency", "256").folder / "plan.json"
    assert json.loads(no_go.read_text())["verdict"] == "no-go"
    cases.append((["--plan", str(no_go), "--measure", str(good)], "no gate to apply"))
    for args, needle in cases:
        r = cli.run("gate", *args)
        assert r.exit_code == 2, (args, r.output)
        assert needle in r.output, (args, r.output)
        assert "Traceback" not in r.output


@pytest.mark.timing  # an A/B under an SLO on twins: judged by the gate, so run alone
def test_goodput_speedup_is_the_ratio_of_good_requests_per_second(cli: Cli, tmp_path: Path) -> None:
    """Two twins, one bench A/B under a TPOT bound; the gate's goodput ratio equals a recount of
    good requests ÷ duration from requests.jsonl and summary.json."""
    from alphagate.core.traffic import TrafficClass
    from alphagate.specs import DeploymentConfig, WorkloadConfig
    from alphagate.twin.config import TwinConfig
    from tests.servers import twin

    wl = WorkloadConfig(classes=(TrafficClass(name="a", share=1.0, alpha=0.7),))
    dep = DeploymentConfig(model="llama-3.1-8b", weight_dtype="bf16")
    bound_ms = 40.0  # modelled TPOT ≈ 6.5 ms × time scale 2 without speculation: both sides good
    with (
        twin(TwinConfig(deployment=dep, workload=wl, k=0, time_scale=2.0, seed=1)) as (b, _),
        twin(TwinConfig(deployment=dep, workload=wl, k=3, time_scale=2.0, seed=2)) as (c, _),
    ):
        r = cli.run(
            "bench", "--baseline-url", b, "--candidate-url", c, "--concurrency", "4",
            "-n", "40", "--dataset", "synthetic:in=16,out=16", "--slo", f"tpot_ms={bound_ms}",
            "--out", str(tmp_path), "--no-progress",
        )  # fmt: skip
    assert r.exit_code == 0, r.output
    summary = json.loads((tmp_path / "summary.json").read_text())
    recs = [json.loads(x) for x in (tmp_path / "requests.jsonl").read_text().splitlines()]

    def good_per_s(target: str) -> float:
        lv = next(x for x in summary["levels"] if x["target"] == target)
        good = sum(
            1
            for x in recs
            if x["target"] == target and x["error_type"] is None and not x["warmup"]
            and (x["e2e_s"] - x["ttft_s"]) / (x["output_tokens"] - 1) * 1000 <= bound_ms
        )  # fmt: skip
        return good / lv["overall"]["duration_s"]

    d = cli.json(
        "gate", "--min-goodput-speedup", "0.01", "--bench", str(tmp_path / "summary.json"),
        "--min-requests", "10", "--allow-single-run", "--ignore-errors",
    )  # fmt: skip
    (res,) = d["results"]
    want = good_per_s("candidate") / good_per_s("baseline")
    assert res["value"] == pytest.approx(want, rel=1e-9)
    assert res["interval"]["low"] <= want <= res["interval"]["high"]
    assert res["result"] == "pass"
    # a bound no baseline request meets (but candidate requests do): the ratio is unbounded
    tight = {**summary, "slo": {**summary["slo"], "bounds_ms": {"tpot_ms": 10.0}}}
    (tmp_path / "tight.json").write_text(json.dumps(tight))
    d = cli.json(
        "gate", "--min-goodput-speedup", "1.0", "--bench", str(tmp_path / "tight.json"),
        "--min-requests", "10", "--allow-single-run", "--ignore-errors", exit_code=3,
    )  # fmt: skip
    assert "unbounded" in d["results"][0]["why"]
    # without an SLO in the runs, goodput cannot be judged: not enough evidence, and why
    s = json.loads((tmp_path / "summary.json").read_text())
    s["slo"] = None
    (tmp_path / "no-slo.json").write_text(json.dumps(s))
    d = cli.json(
        "gate", "--min-goodput-speedup", "1.0", "--bench", str(tmp_path / "no-slo.json"),
        exit_code=3,
    )  # fmt: skip
    assert "--slo" in d["results"][0]["why"]


def test_evidence_must_be_of_what_the_rule_names(cli: Cli, tmp_path: Path) -> None:
    """A per-class rule needs a measurement of that class; a rule at concurrency C an A/B at C;
    two measurements of the same traffic are refused; a rules file's sample minimums hold."""
    from alphagate.gate.evidence import ABSide

    good = _measure_file(tmp_path / "good.json", 0.7, 5000)
    ev = Evidence()
    ev.add_acceptance(None, _acc(0.7, 5000), "all")
    g = evaluate(RuleSet(rules=[Rule(metric="alpha", threshold=0.5, cls="code")]), ev)
    assert g.decision == "insufficient" and "no measurement of class code" in g.results[0].why
    rng = np.random.default_rng(0)
    ev.add_side("baseline", 8, ABSide("baseline", _records(200, 0.02, 20, rng), None))
    ev.add_side("candidate", 8, ABSide("candidate", _records(200, 0.01, 20, rng), None))
    g = evaluate(RuleSet(rules=[Rule(metric="tpot_speedup", threshold=1.1, concurrency=64)]), ev)
    assert g.decision == "insufficient" and "no A/B at concurrency 64" in g.results[0].why
    at8 = [Rule(metric="tpot_speedup", threshold=1.1, concurrency=8)]
    g = evaluate(RuleSet(rules=at8), ev)
    # one run per side: its interval cannot see the runs differ, so it decides only when asked
    assert g.decision == "insufficient" and "one run per side" in g.results[0].why
    g = evaluate(RuleSet(rules=at8, allow_single_run=True), ev)
    assert g.decision == "pass"

    low = _measure_file(tmp_path / "low.json", 0.3, 5000)
    r = cli.run("gate", "--min-alpha", "0.5", "--measure", str(low), "--measure", str(good))
    assert r.exit_code == 2 and "two measurements of all traffic" in r.output

    rules = tmp_path / "strict.json"
    rules.write_text(
        json.dumps({"rules": [{"metric": "alpha", "threshold": 0.5}], "min_drafts": 10**6})
    )
    r = cli.run("gate", "--rules", str(rules), "--measure", str(good))
    assert r.exit_code == 3 and "5,000 drafts < the 1,000,000 needed" in r.output
    rules.write_text(json.dumps({"rules": [{"metric": "alpha", "threshold": 5}]}))
    r = cli.run("gate", "--rules", str(rules), "--measure", str(good))
    assert r.exit_code == 2 and "[0, 1]" in r.output


def test_class_names_show_in_the_table(cli: Cli, tmp_path: Path) -> None:
    m = MeasureResult(
        verb="measure live", source="t", overall=_acc(0.7, 5000), classes={"chat": _acc(0.7, 5000)}
    )
    (tmp_path / "m.json").write_text(json.dumps(m.payload()))
    r = cli.run(
        "gate", "--min-alpha", "0.5", "--class", "chat", "--measure", str(tmp_path / "m.json")
    )
    assert r.exit_code == 0 and "α [chat] ≥ 0.5" in r.output


def test_live_sources_that_cannot_work_are_exit_2(cli: Cli) -> None:
    for args, needle in (
        (["--prometheus", "notaurl"], "http(s) URL"),
        (["--prometheus", "http://[::1"], "http(s) URL"),
        (["--prometheus", "http://127.0.0.1:9", "--selector", 'model_name="x"'], "label selector"),
        (["--url", "http://127.0.0.1:9", "--url", "http://127.0.0.1:9/metrics"], "twice"),
    ):
        r = cli.run("gate", "--min-alpha", "0.5", *args, "--window", "2s")
        assert r.exit_code == 2, (args, r.output)
        assert needle in r.output and "Traceback" not in r.output, (args, r.output)
