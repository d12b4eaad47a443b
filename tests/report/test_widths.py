"""Every table reads whole at 80 columns (the default terminal) and at 160: nothing is cut to "…",
and a net loss is marked in text as well as in colour."""

from __future__ import annotations

import io
from functools import cache

import pytest
from rich.console import Console, RenderableType

from alphagate.bench.records import BenchResult, RequestRecord, compare_levels, summarize_level
from alphagate.core.traffic import TrafficClass
from alphagate.measure.prom import SpecCounters, spec_delta
from alphagate.plan.records import Plan
from alphagate.report import bench as bench_report
from alphagate.report import model as model_report
from alphagate.report.plan import render_plan_console
from alphagate.report.simulate import render_sweep
from alphagate.sim.sweep import SweepConfig, simulate
from alphagate.specs.memory import memory_answer
from alphagate.theory import answers
from tests.plans import PlanRun
from tests.records import streamed


def _text(r: RenderableType, width: int, color: bool = False) -> str:
    console = Console(width=width, file=io.StringIO(), record=True, color_system=None)
    console.print(r)
    return console.export_text()


@cache
def _sweep():  # type: ignore[no-untyped-def]
    return simulate(
        SweepConfig(
            alphas=(0.4, 0.5, 0.55, 0.6, 0.7, 0.8),
            concurrencies=(1, 256),
            num_requests=100,
            simulate_breakeven=False,
        )
    )


def _record(i: int, target: str, tokens: list[int], gap: float) -> RequestRecord:
    times = [0.01 + gap * j for j in range(len(tokens))]
    return streamed(times, tokens, id=i, target=target, level="c16")


def _bench() -> BenchResult:
    base = [_record(i, "baseline", [1] * 20, 0.010) for i in range(8)]
    cand = [_record(i, "candidate", [1, 3, 1, 4, 1, 3, 2, 4, 1], 0.014) for i in range(8)]
    fail = streamed(
        [], id=99, level="c16", prompt_tokens=None, error_type="http_404",
        error_message="The model `llama-3.3-70b` does not exist.",
    )  # fmt: skip
    acc = spec_delta(
        [SpecCounters(present=True)],
        [
            SpecCounters(
                drafts=64,
                draft_tokens=192,
                accepted=98,
                present=True,
                per_pos={0: 45, 1: 32, 2: 21},
            )
        ],
    )
    levels = [
        summarize_level("baseline", "http://a", "c16", 16, None, base, None),
        summarize_level("candidate", "http://b", "c16", 16, None, [*cand, fail], acc),
    ]
    return BenchResult(run_id="r", config={}, levels=levels, comparisons=compare_levels(levels))


def _renderings(plan: Plan) -> list[tuple[str, RenderableType]]:
    c = answers.CostModel(draft_cost=0.05, verify_cost=1.2)
    grid = answers.table_answer(
        [0.4, 0.5, 0.55, 0.6, 0.7, 0.8, 0.9], [1, 2, 3, 4, 5, 6, 8], 0.05, [1.0, 1.15]
    )
    blend = answers.blend_answer(
        [
            TrafficClass(name="chat", share=0.7, alpha=0.7),
            TrafficClass(name="code", share=0.3, alpha=0.4),
        ],
        5,
        c,
    )
    return [
        ("speedup", model_report.render_speedup(answers.speedup_answer(0.7, 5, c))),
        ("breakeven", model_report.render_breakeven(answers.breakeven_answer(5, c))),
        ("required", model_report.render_required(answers.required_answer(3.0, 5, c))),
        ("optimal-k", model_report.render_optimal_k(answers.optimal_k_answer(0.8, c, 10))),
        ("blend", model_report.render_blend(blend)),
        ("convert", model_report.render_convert(answers.convert_answer("alpha", 0.7, 5))),
        ("memory", model_report.render_memory(memory_answer("llama-3.3-70b", "eagle3"))),
        ("table", model_report.render_table(grid, show_linear=True)),
        ("linear gap", model_report.render_linear_gap(grid)),
        ("simulate", render_sweep(_sweep())),
        ("bench", bench_report.render_bench(_bench())),
        ("plan", render_plan_console(plan)),
    ]


@pytest.mark.parametrize("width", [80, 160])
def test_no_table_is_cut(chat_code_plan: PlanRun, width: int) -> None:
    """The plan is the one ``alphagate plan`` wrote (70/30 chat/code at 64, peak 256), read back
    through its record."""
    for name, r in _renderings(Plan.model_validate(chat_code_plan.json)):
        text = _text(r, width)
        assert "…" not in text, f"{name} at {width} columns:\n{text}"
        assert max(len(line) for line in text.splitlines()) <= width, name


def test_losses_are_marked_in_text() -> None:
    text = _text(render_sweep(_sweep()), 80)
    assert "✗" in text  # α = 0.4 at concurrency 256 is a net loss
    bench = _text(bench_report.render_bench(_bench()), 80)
    assert "1/9 http_404: The model `llama-3.3-70b` does not exist." in bench
    assert "cand vs base" in bench
