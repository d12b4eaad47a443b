"""What the report's figures tell a reader who was not in the room, checked on the figure data:
the planned α only where it says something (typed per position, beside the measured α), one
chart for plans that ship one policy, a measurement of another deployment labelled as such,
series that differ by more than a dash, captions that name the baseline and the candidate, and a
measurement at one or two loads drawn as points."""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import cache
from pathlib import Path

import pytest
from matplotlib.lines import Line2D

from alphagate.bench.records import BenchResult
from alphagate.plan.records import Plan
from alphagate.report import charts, plots
from alphagate.report.blocks import Figure, Table
from alphagate.report.charts import goodput_chart
from alphagate.report.inputs import (
    BenchInput,
    Input,
    PlanInput,
    ReportInputs,
    SweepInput,
    parse_records,
    parse_results,
)
from alphagate.report.page import build_page
from tests.conftest import Cli
from tests.report.test_bench import _sweep_result
from tests.results_files import K


@cache
def _plan_of(*args: str) -> Plan:
    """A plan from the CLI, read back as the report reads it."""
    item = parse_results("plan.json", json.dumps(Cli().json("plan", *args)))
    assert isinstance(item, PlanInput)
    return item.plan


def _plan(results: dict[str, Path]) -> Plan:
    item = parse_results("plan.json", results["plan"].read_text())
    assert isinstance(item, PlanInput)
    return item.plan


#: the fixture plan's traffic at a second concurrency: the same policy, another fixed K
def _plan_256() -> Plan:
    return _plan_of(
        "--class", "chat:0.7:0.7", "--class", "code:0.3", "--concurrency", "256",
        "--peak-concurrency", "256",
    )  # fmt: skip


def _bench_input(results: dict[str, Path]) -> BenchInput:
    b = parse_results("summary.json", results["bench"].read_text())
    assert isinstance(b, BenchInput)
    records, _ = parse_records(
        "requests.jsonl", results["bench"].with_name("requests.jsonl").read_text(), b.result.run_id
    )
    return b.model_copy(update={"records": records})


def _bench(results: dict[str, Path]) -> BenchResult:
    return _bench_input(results).result


def _sent(b: BenchResult, model: str | None) -> BenchResult:
    """The same bench, as if its requests had named ``model`` (None: no name)."""
    return b.model_copy(update={"config": {**b.config, "model": model}, "served_model": model})


def _given_only(p: Plan) -> Plan:
    """The plan with every class at one given α (no prior range, nothing per position)."""
    classes = [
        c.model_copy(update={"alpha_source": "given", "alpha_low": c.alpha, "alpha_high": c.alpha})
        for c in p.classes
    ]
    return p.model_copy(update={"classes": classes})


def _figures(page_inputs: Sequence[Input], section: str) -> list[charts.Chart]:
    page = build_page(ReportInputs(inputs=list(page_inputs)))
    (sec,) = [s for s in page.sections if s.id == section]
    return [b.chart for b in sec.blocks if isinstance(b, Figure)]


# ---------------------------------------------------------------- 1. α by position as planned
def test_planned_alpha_per_position_is_the_typed_field_not_the_label() -> None:
    p = _plan_of(
        "--class", "chat:0.7:0.8,0.6,0.5", "--class", "code:0.3:0.4", "--concurrency", "16"
    )
    chat, code = p.classes
    assert chat.alpha_by_pos == (0.8, 0.6, 0.5) and code.alpha_by_pos is None
    # a label that does not parse changes nothing: the chart reads the field
    garbled = p.model_copy(
        update={"classes": [c.model_copy(update={"alpha_label": "see notes"}) for c in p.classes]}
    )
    for plan in (p, garbled):
        chart = charts.plan_alpha_chart(plan)
        assert chart is not None
        lines = {line.group: line for line in chart.panels[0].lines}
        k = len(lines["chat"].x)
        assert lines["chat"].y == (0.8, 0.6, 0.5, *([0.5] * (k - 3)))[:k]
        assert set(lines["code"].y) == {0.4}


def test_a_plan_json_without_the_field_still_loads(results: dict[str, Path]) -> None:
    data = json.loads(results["plan"].read_text())
    for c in data["classes"]:
        del c["alpha_by_pos"]
    item = parse_results("old-plan.json", json.dumps(data))
    assert isinstance(item, PlanInput)
    assert all(c.alpha_by_pos is None for c in item.plan.classes)


def test_a_sweep_json_from_before_the_counts_and_the_mix_alphas_still_renders(
    results: dict[str, Path],
) -> None:
    """A sweep written before ``mix_alphas`` and ``num_accepted_per_pos``: the same figures, and
    the α sources read each setting's α, not 'mix'."""
    data = json.loads(results["sweep"].read_text())
    del data["mix_alphas"]
    for c in data["cells"]:
        del c["spec"]["num_accepted_per_pos"]
    old = parse_results("old-sweep.json", json.dumps(data))
    new = parse_results("sweep.json", results["sweep"].read_text())
    assert isinstance(old, SweepInput) and isinstance(new, SweepInput)
    pages = [build_page(ReportInputs(inputs=[item])) for item in (old, new)]
    keys = [
        [b.chart.key for s in p.sections for b in s.blocks if isinstance(b, Figure)] for p in pages
    ]
    assert keys[0] == keys[1] and "alpha_by_position" in keys[0]
    (sources,) = [
        b for s in pages[0].sections for b in s.blocks
        if isinstance(b, Table) and b.title == "α sources"
    ]  # fmt: skip
    assert [row[3].text for row in sources.rows] == ["0.5", "0.8"]


def test_one_given_alpha_per_class_and_nothing_measured_draws_no_alpha_chart(
    results: dict[str, Path],
) -> None:
    flat = _given_only(_plan(results))
    assert charts.plan_alpha_chart(flat) is None
    assert "alpha_by_position" not in [c.key for c in charts.plan_charts(flat)]
    # the fixture's prior keeps its chart: its range is information
    assert charts.plan_alpha_chart(_plan(results)) is not None


def test_measured_alpha_by_position_is_drawn_beside_the_planned(results: dict[str, Path]) -> None:
    flat = _given_only(_plan(results))
    plan_input = PlanInput(source="plan.json", plan=flat)
    (chart,) = [
        c for c in _figures([plan_input, _bench_input(results)], "alpha")
        if c.key == "alpha_by_position"
    ]  # fmt: skip
    assert chart.title.endswith("planned and measured")
    lines = chart.panels[0].lines
    planned = [line for line in lines if line.role == "planned"]
    measured = [line for line in lines if line.role == "measured"]
    assert [line.group for line in planned] == ["chat", "code"] and all(
        line.dashed for line in planned
    )
    # the twins serve chat at 0.8 and code at 0.4; their counters measure all traffic at once
    (traffic,) = measured
    assert traffic.label == f"all traffic measured (bench run {_bench(results).run_id})"
    assert traffic.low is not None and traffic.high is not None and len(traffic.y) == K
    assert all(
        lo <= y <= hi for lo, y, hi in zip(traffic.low, traffic.y, traffic.high, strict=True)
    )
    assert 0.4 < traffic.y[0] < 0.8
    assert len(planned[0].x) == K  # the positions measured, past the plan's K
    # the twins (served as alphagate-twin) are not the plan's deployment, and the caption says so
    assert "not the plan's deployment" in chart.caption


# ---------------------------------------------------------------- 2. one policy, one chart
def test_plans_that_ship_one_policy_draw_it_once(results: dict[str, Path]) -> None:
    p64, p256 = _plan(results), _plan_256()
    assert p64.batch_schedule == p256.batch_schedule and p64.fixed_k != p256.fixed_k
    assert charts.same_policy([p64, p256]) == [(p64, p256)]
    chart = charts.plan_speedup_chart([p64, p256])
    speed, k_panel = chart.panels
    policy = [line for line in speed.lines if line.role == "candidate"]
    assert len(policy) == 1 and policy[0].y == tuple(r.throughput_speedup for r in p64.rows)
    fixed = sorted(line.label for line in speed.lines if line.role == "fixed_k")
    assert fixed == [
        f"one fixed K = {p256.fixed_k} (plan at concurrency 256)",
        f"one fixed K = {p64.fixed_k} (plan at concurrency 64)",
    ]
    assert "64 and 256" in k_panel.title and len(k_panel.lines) == 1
    assert "the same policy" in chart.caption and "applies to both" in chart.caption

    page = [PlanInput(source="a.json", plan=p64), PlanInput(source="b.json", plan=p256)]
    speedups = [c for c in _figures(page, "speedup") if c.key == "speedup_vs_concurrency"]
    itl = [c for c in _figures(page, "itl") if c.key == "itl_per_token"]
    assert len(speedups) == 1 and len(itl) == 1 and "64 and 256" in itl[0].panels[0].title


def test_plans_with_different_policies_keep_a_chart_each(results: dict[str, Path]) -> None:
    p64 = _plan(results)
    other = _plan_of("--class", "chat:1:0.9", "--concurrency", "64", "--peak-concurrency", "256")
    assert charts.same_policy([p64, other]) == [(p64,), (other,)]
    with pytest.raises(ValueError, match="different policies"):
        charts.plan_speedup_chart([p64, other])
    page = [PlanInput(source="a.json", plan=p64), PlanInput(source="b.json", plan=other)]
    assert [c.key for c in _figures(page, "speedup")].count("speedup_vs_concurrency") == 2


# ---------------------------------------------------------------- 3. whose deployment
def test_a_measurement_of_the_plans_deployment_shares_its_axis(results: dict[str, Path]) -> None:
    p = _plan(results)
    b = _sent(_bench(results), p.served_model)
    assert charts.same_deployment(p, b)
    speed = charts.plan_speedup_chart(p, [b]).panels[0]
    (measured,) = [line for line in speed.lines if line.role == "measured"]
    assert measured.x == (1.0, 8.0)
    assert measured.y == tuple(c.speedups.throughput_speedup for c in b.comparisons)
    assert set(measured.x) <= set(speed.x_ticks)
    chart = charts.bench_speedup_chart(b, [p])
    assert chart is not None and "on the plan's deployment" in chart.caption
    assert "not" not in chart.panels[0].title


def test_a_measurement_of_another_deployment_says_so(results: dict[str, Path]) -> None:
    p = _plan(results)
    for b, words in (
        (_sent(_bench(results), None), "not known to be the plan's deployment"),  # no name sent
        (_sent(_bench(results), "llama-3.1-8b"), "not the plan's deployment"),
    ):
        assert not charts.same_deployment(p, b)
        assert not [
            line
            for line in charts.plan_speedup_chart(p, [b]).panels[0].lines
            if line.role == "measured"
        ]
        for chart in (charts.bench_speedup_chart(b, [p]), charts.bench_itl_chart(b, [p])):
            assert chart is not None
            assert f"Measured on {charts.bench_where(b)}, {words}" in chart.caption
            assert charts.plan_deployment_name(p) in chart.caption
            assert chart.panels[0].title.endswith("not the plan's deployment")
    # with no plan beside it, a bench is just a bench
    alone = charts.bench_speedup_chart(_bench(results))
    assert alone is not None and "plan" not in alone.caption


# ---------------------------------------------------------------- 4. legends that read
def _every_chart(results: dict[str, Path]) -> list[charts.Chart]:
    s = parse_results("sweep.json", results["sweep"].read_text())
    assert isinstance(s, SweepInput)
    b = _bench_input(results)
    p = _plan(results)
    return [
        *charts.sweep_charts(s.result),
        *charts.plan_charts(p),
        charts.plan_speedup_chart([p, _plan_256()], [_sent(b.result, p.served_model)]),
        *charts.bench_charts(b.result, b.records),
    ]


def test_no_two_series_of_a_panel_differ_by_their_dash_alone(results: dict[str, Path]) -> None:
    checked = 0
    for chart in _every_chart(results):
        look = plots.looks(chart)
        for panel in chart.panels:
            seen = {}
            for line in panel.lines:
                lk = look[plots.series_key(line)]
                seen[line.label] = (lk.colour, lk.marker, lk.filled)
            assert len(set(seen.values())) == len(seen), (chart.key, panel.title, seen)
            for line in panel.lines:  # the palette: Okabe–Ito, the baseline black
                colour = look[plots.series_key(line)].colour
                assert (
                    colour == plots.BASELINE_COLOR if line.baseline else colour in plots.OKABE_ITO
                )
        # and so it is drawn: the legend's handles differ in colour, marker or fill
        fig = plots.draw(chart)
        for ax in fig.axes:
            legend = ax.get_legend()
            if legend is None:
                continue
            handles = [
                (h.get_color(), h.get_marker(), h.get_markerfacecolor())
                for h in legend.legend_handles
                if isinstance(h, Line2D) and h.get_marker() not in (None, "None", "")
            ]
            assert len(set(handles)) == len(handles), (chart.key, handles)
            checked += len(handles)
    assert checked > 30


# ---------------------------------------------------------------- 5. which side is which
def test_captions_name_the_baseline_and_the_candidate(results: dict[str, Path]) -> None:
    comparing = {
        "speedup_vs_load",
        "p99_itl_per_token",
        "itl_per_token",
        "itl_per_token_cdf",
        "speedup_vs_concurrency",
        "speedup_measured",
        "itl_per_token_measured",
        "itl_per_token_cdf_measured",
    }
    shown = [c for c in _every_chart(results) if c.key in comparing]
    assert {c.key for c in shown} == comparing
    for chart in shown:
        text = chart.caption.lower()
        assert "baseline" in text and "candidate" in text, chart.key
        assert "speculation off" in text, chart.key
    b = _bench(results)
    base = next(lv.url for lv in b.levels if lv.target == "baseline")
    assert charts.bench_sides(b).startswith(f"Baseline: {base} (speculation off")
    goodput = goodput_chart(_sweep_result())
    assert goodput is not None and "speculation off" in goodput.caption


# ---------------------------------------------------------------- 6. two loads are two points
def test_a_measurement_at_two_loads_is_points_not_a_curve(results: dict[str, Path]) -> None:
    b = _bench(results)
    assert len({lv.level for lv in b.levels}) == 2
    p = _plan(results)
    measured = [
        charts.bench_speedup_chart(b),
        charts.bench_itl_chart(b),
    ]
    for chart in measured:
        assert chart is not None
        assert all(line.points for panel in chart.panels for line in panel.lines), chart.key
        fig = plots.draw(chart)
        drawn = [
            ln for ln in fig.axes[0].get_lines() if not str(ln.get_label()).startswith("break")
        ]
        assert drawn and all(ln.get_linestyle() == "None" for ln in drawn)
    overlay = charts.plan_speedup_chart(p, [_sent(b, p.served_model)]).panels[0]
    assert [line.points for line in overlay.lines if line.role == "measured"] == [True]
    assert not any(line.points for line in overlay.lines if line.role != "measured")
    # a sweep of many loads is a curve
    goodput = goodput_chart(_sweep_result())
    assert goodput is not None and not any(line.points for line in goodput.panels[0].lines)
