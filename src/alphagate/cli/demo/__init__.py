"""``alphagate demo``: the whole workflow on its embedded defaults, no GPU and no network.

The scenario: Llama-3.3-70B in FP8 on H100s serving 70% chat (EAGLE-3 α 0.7) and 30% code
(α 0.4), with a fixed "α ≥ 0.55" gate as the team's current rule. Closed forms → simulation →
the rollout plan at concurrency 64 (peak 256) and 256 → a measured A/B on two local twins → one
HTML report of it all. Every result is saved in ``demo-output/`` as the verbs would write it.
"""

from __future__ import annotations

from pathlib import Path

from alphagate.cli._app import app, console
from alphagate.cli._files import atomic_write_text
from alphagate.cli.demo._ab import measure_ab

OUT = Path("demo-output")
MODEL_JSON = OUT / "model-table.json"
SIMULATE_JSON = OUT / "simulate.json"
BENCH_SUMMARY = OUT / "bench" / "summary.json"
GATE_JSON = OUT / "gate.json"
REPORT = OUT / "report.html"
#: the demo's gate on its own A/B (the twins' deployment, not the 70B plan's): α, TPOT, errors
GATE_FLAGS = ("--min-alpha", "0.55", "--min-tpot-speedup", "1.2", "--max-error-rate", "0.05",
              "--concurrency", "16")  # fmt: skip
PLAN_CONCURRENCIES = (64, 256)


def _plan_path(concurrency: int, suffix: str) -> Path:
    return OUT / f"rollout-plan-c{concurrency}{suffix}"


def _save(path: Path, payload: dict[str, object]) -> None:
    from alphagate.cli._app import json_dumps

    atomic_write_text(path, json_dumps(payload) + "\n", "demo")


@app.command("demo", short_help="The whole workflow on embedded defaults.")
def demo() -> None:
    """Run the whole workflow on its embedded defaults (no GPU, no network; about a minute)."""
    _closed_forms()
    _simulate()
    _plans()
    measure_ab(BENCH_SUMMARY)
    _gate()
    _report()


def _closed_forms() -> None:
    from alphagate.core.records import results_payload
    from alphagate.report.model import render_linear_gap, render_table
    from alphagate.theory.answers import CostModel, speedup_answer, table_answer

    console.rule("[bold]alphagate demo — measure α before you flip the flag")
    grid = table_answer(
        [0.4, 0.5, 0.55, 0.6, 0.7, 0.8, 0.9], [1, 2, 3, 4, 5, 6, 8], 0.05, [1.0, 1.15]
    )
    _save(MODEL_JSON, results_payload("model table", grid))
    console.print(render_table(grid))
    console.print(render_linear_gap(grid))
    a = speedup_answer(0.7, 5, CostModel(draft_cost=0.02, verify_cost=1.0))
    console.print(
        f"K=5, α=0.7, overhead 0.1: the linear rule (1+K·α)/(1+0.1) says {4.5 / 1.1:.2f}×; the "
        f"exact E = {a.expected_tokens_per_pass:.3f} tokens per pass gives "
        f"{a.expected_tokens_per_pass / 1.1:.2f}× (1+K·α overstates E by "
        f"{(a.linear_overestimate_ratio - 1) * 100:.0f}%)."
    )


def _simulate() -> None:
    from alphagate.core.records import results_payload
    from alphagate.report.simulate import render_sweep
    from alphagate.sim.sweep import SweepConfig, simulate

    console.rule("[bold]Simulated: Llama-3.3-70B FP8 on H100, EAGLE-3, concurrency 1–256")
    with console.status("simulating…", spinner="dots"):
        result = simulate(SweepConfig(alphas=(0.4, 0.5, 0.55, 0.6, 0.7, 0.8)))
    _save(SIMULATE_JSON, results_payload("simulate", result))
    console.print(render_sweep(result))


def _plans() -> None:
    from alphagate.core.traffic import TrafficClass
    from alphagate.plan import PlanRequest, build_plan
    from alphagate.report.plan import render_plan_markdown
    from alphagate.report.reasons import worded
    from alphagate.specs import WorkloadConfig

    console.rule("[bold]Rollout plans for 70% chat at α 0.7 and 30% code at α 0.4")
    traffic = WorkloadConfig(
        classes=(
            TrafficClass(name="chat", share=0.7, alpha=0.7),
            TrafficClass(name="code", share=0.3, alpha=0.4),
        )
    )
    for concurrency in PLAN_CONCURRENCIES:
        with console.status(f"planning for concurrency {concurrency}…", spinner="dots"):
            plan = worded(
                build_plan(
                    PlanRequest(workload=traffic, concurrency=concurrency, peak_concurrency=256)
                )
            )
        out = _plan_path(concurrency, ".md")
        atomic_write_text(out, render_plan_markdown(plan), "demo")
        _save(_plan_path(concurrency, ".json"), plan.payload())
        console.print(
            f"concurrency {concurrency} (peak 256): [bold]{plan.verdict.upper()}[/bold] — "
            f"{plan.reason}.\n  policy: {plan.policy}\n  full plan: {out}"
        )


def _gate() -> None:
    """The decision on the demo's own A/B: the twins' measurement judged on rules that fit it."""
    from alphagate.gate import RuleSet, evaluate
    from alphagate.gate.evidence import Evidence, load_bench
    from alphagate.gate.rules import Thresholds
    from alphagate.report.measure import render_gate

    console.rule("[bold]The gate on that A/B: α ≥ 0.55, TPOT 1.2× faster, errors ≤ 5% at c16")
    rules = Thresholds(min_alpha=0.55, min_tpot_speedup=1.2, max_error_rate=0.05).rules(
        concurrency=16
    )
    ev = Evidence()
    load_bench(BENCH_SUMMARY, ev)
    result = evaluate(RuleSet(rules=rules), ev)
    _save(GATE_JSON, result.payload())
    console.print(render_gate(result))
    console.print(
        f"the same from the shell: alphagate gate --bench {BENCH_SUMMARY} {' '.join(GATE_FLAGS)}",
        soft_wrap=True,
    )


def _report() -> None:
    """Everything above on one HTML page, for the people who were not at the terminal."""
    from alphagate.cli._check import fail
    from alphagate.cli.report import load_inputs, write_report

    console.rule("[bold]The report: one page for the people who decide")
    files = [
        *(_plan_path(c, ".json") for c in PLAN_CONCURRENCIES),
        BENCH_SUMMARY,
        GATE_JSON,
        SIMULATE_JSON,
        MODEL_JSON,
    ]
    command = f"alphagate report {' '.join(map(str, files))} --out {REPORT}"
    inputs, problems = load_inputs(files, partial=False, command=command)
    if problems:
        fail("; ".join(problems), "demo")
    inputs = inputs.model_copy(
        update={
            "produced_by": ["alphagate demo   # writes every input listed below, then this page"]
        }
    )
    written = write_report(inputs, REPORT, "demo")
    console.print(f"report written to {written.out}", style="bold", soft_wrap=True)
    console.print(f"  sections: {', '.join(written.sections)}")
    console.print(f"  open {REPORT.resolve().as_uri()}", soft_wrap=True)
