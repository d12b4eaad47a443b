"""What the plots show, checked as numbers: the loads run as ticks, values equal to the records,
acceptance recovered from counters and from the streamed chunks, latency by the stated rule."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from alphagate.report import charts
from alphagate.report.inputs import BenchInput, PlanInput, SweepInput, parse_records, parse_results
from tests.results_files import CLASS_ALPHA, K


def _sweep(results: dict[str, Path]) -> SweepInput:
    s = parse_results("sweep.json", results["sweep"].read_text())
    assert isinstance(s, SweepInput)
    return s


def _plan(results: dict[str, Path]) -> PlanInput:
    p = parse_results("plan.json", results["plan"].read_text())
    assert isinstance(p, PlanInput)
    return p


def _bench(results: dict[str, Path]) -> BenchInput:
    b = parse_results("summary.json", results["bench"].read_text())
    assert isinstance(b, BenchInput)
    records, _ = parse_records(
        "requests.jsonl", results["bench"].with_name("requests.jsonl").read_text(), b.result.run_id
    )
    return b.model_copy(update={"records": records})


def _units(chart: charts.Chart) -> None:
    for p in chart.panels:
        assert p.lines, p.title
        assert any(
            u in p.y_label for u in ("(×", "(ms)", "(probability)", "passes", "tokens", "K (")
        )
        assert any(
            u in p.x_label
            for u in (
                "(users)",
                "(ms)",
                "(req/s)",
                "position",
                "(τ",
                "(sequences)",
                "(probability)",
            )
        )


def test_sweep_speedup_ticks_at_the_loads_run_and_values_from_the_cells(
    results: dict[str, Path],
) -> None:
    r = _sweep(results).result
    chart = charts.sweep_speedup_chart(r)
    assert [p.title for p in chart.panels] == ["simulated, K = 2", "simulated, K = 4"]
    for p, k in zip(chart.panels, r.ks, strict=True):
        assert p.x_ticks == (1.0, 8.0, 32.0) and p.x_tick_labels == ("1", "8", "32") and p.x_log
        assert p.y_ratio and [h.y for h in p.refs] == [1.0]
        for line in p.lines:
            assert line.band and line.low is not None and line.high is not None
            assert line.group is not None  # the acceptance setting
            for x, y, lo, hi in zip(line.x, line.y, line.low, line.high, strict=True):
                cell = r.cell(x, k, line.group)
                assert cell is not None and y == cell.speedup.throughput_speedup
                iv = cell.throughput_speedup_interval  # the band is the cell's range
                assert iv is not None and (lo, hi) == (iv.low, iv.high) and lo < y < hi
    _units(chart)


def test_sweep_itl_has_the_baseline_in_black_and_both_percentiles(results: dict[str, Path]) -> None:
    r = _sweep(results).result
    chart = charts.sweep_itl_chart(r)
    assert len(chart.panels) == 2 * len(r.ks)
    p99_k2 = chart.panels[0]
    off = [line for line in p99_k2.lines if line.baseline]
    assert len(off) == 1 and off[0].y == tuple(row.baseline.itl_per_token_ms.p99 for row in r.rows)
    _units(chart)


def test_sweep_acceptance_recovers_the_configured_alpha(results: dict[str, Path]) -> None:
    r = _sweep(results).result
    chart = charts.sweep_alpha_chart(r)
    assert chart is not None
    alpha_of = dict(zip(r.mixes, r.mix_alphas, strict=True))
    for line in chart.panels[0].lines:
        alpha = alpha_of[line.group or ""]  # a line per acceptance setting, grouped by it
        assert alpha is not None
        assert len(line.y) == 4 and line.low is not None and line.high is not None
        for y, lo, hi in zip(line.y, line.low, line.high, strict=True):
            assert lo <= y <= hi and abs(y - alpha) < 0.06
    lengths = charts.sweep_acceptance_length_chart(r)
    assert lengths is not None
    for line in lengths.panels[0].lines:
        assert line.x == (1.0, 2.0, 3.0, 4.0, 5.0) and sum(line.y) == pytest.approx(1.0)


def test_plan_speedup_labels_each_point_with_its_k_and_draws_the_schedule(
    results: dict[str, Path],
) -> None:
    p = _plan(results).plan
    chart = charts.plan_speedup_chart(p)
    speed, k_panel = chart.panels
    policy = speed.lines[0]
    assert policy.point_labels == tuple(f"K={row.k}" for row in p.rows)
    # the policy's predicted range is drawn as a band around it
    assert policy.band and policy.low is not None and policy.high is not None
    for row, lo, hi in zip(p.rows, policy.low, policy.high, strict=True):
        iv = row.throughput_speedup_interval
        assert iv is not None and (lo, hi) == (iv.low, iv.high)
    assert speed.x_ticks == tuple(float(row.concurrency) for row in p.rows)
    assert "break-even (1×)" in [h.label for h in speed.refs]
    sched = k_panel.lines[0]
    assert sched.steps and sched.x[0] == p.batch_schedule[0][0]
    assert sched.x[-1] == p.batch_schedule[-1][1] and sched.y[-1] == p.batch_schedule[-1][2]
    _units(chart)


def test_plan_alpha_shows_a_prior_with_its_range(results: dict[str, Path]) -> None:
    p = _plan(results).plan
    chart = charts.plan_alpha_chart(p)
    assert chart is not None
    lines = {line.label: line for line in chart.panels[0].lines}
    chat, code = lines["chat planned (given)"], lines["code planned (prior, prior range)"]
    assert chat.low is None and set(chat.y) == {0.7}
    prior = next(c for c in p.classes if c.name == "code")
    assert code.low is not None and set(code.low) == {prior.alpha_low}
    pmf = charts.plan_acceptance_length_chart(p).panels[0].lines[0]
    assert sum(pmf.y) == pytest.approx(1.0)


def test_bench_cdf_matches_the_summary_percentiles(results: dict[str, Path]) -> None:
    b = _bench(results)
    assert b.records is not None
    chart = charts.bench_itl_cdf_chart(b.result, b.records)
    assert chart is not None and [p.title for p in chart.panels] == [
        "measured, level c1",
        "measured, level c8",
    ]
    levels = list(dict.fromkeys(lv.level for lv in b.result.levels))  # a panel per level
    for panel, level in zip(chart.panels, levels, strict=True):
        for line in panel.lines:
            lv = next(x for x in b.result.levels if x.level == level and x.target == line.group)
            p50 = line.x[50]  # CDF level 0.50
            assert lv.overall.itl_per_token_ms.p50 == pytest.approx(p50, rel=1e-9)
    _units(chart)


def test_bench_alpha_per_class_from_chunks_and_all_traffic_from_counters(
    results: dict[str, Path],
) -> None:
    b = _bench(results)
    chart = charts.bench_alpha_chart(b.result, b.records)
    assert chart is not None
    counters, per_class = chart.panels
    assert [line.label for line in counters.lines] == [
        "c1 (server counters)",
        "c8 (server counters)",
    ]
    mix = sum(CLASS_ALPHA.values()) / len(CLASS_ALPHA)
    first = [line.y[0] for line in counters.lines]
    assert all(min(CLASS_ALPHA.values()) < a < max(CLASS_ALPHA.values()) for a in first), (
        first,
        mix,
    )
    lines = {line.group: line for line in per_class.lines}
    assert set(lines) == set(CLASS_ALPHA)
    for name, alpha in CLASS_ALPHA.items():
        line = lines[name]
        assert len(line.y) == K and line.low is not None and line.high is not None
        # each class's own α, from its own chunks: within 0.12 (several standard errors)
        assert abs(line.y[0] - alpha) < 0.12, (name, line.y)
        assert line.low[0] <= line.y[0] <= line.high[0]
    lengths = charts.bench_acceptance_length_chart(b.result, b.records)
    assert lengths is not None
    for panel in lengths.panels:
        for line in panel.lines:
            assert len(line.y) == K + 1 and sum(line.y) == pytest.approx(1.0)


def test_bench_speedup_is_the_comparisons(results: dict[str, Path]) -> None:
    b = _bench(results).result
    chart = charts.bench_speedup_chart(b)
    assert chart is not None
    (panel,) = chart.panels
    assert panel.x_ticks == (1.0, 8.0) and panel.x_tick_labels == ("1", "8")
    thr = panel.lines[0]
    assert thr.y == tuple(c.speedups.throughput_speedup for c in b.comparisons)
    # wall-clock ratios: positive and finite; whether they exceed 1× depends on the machine's load
    assert all(math.isfinite(y) and y > 0.0 for y in thr.y)
    _units(chart)


def test_every_verb_plot_set(results: dict[str, Path]) -> None:
    b = _bench(results)
    keys = [c.key for c in charts.bench_charts(b.result, b.records)]
    assert keys == [
        "speedup_measured",
        "itl_per_token_measured",
        "itl_per_token_cdf_measured",
        "alpha_by_position_measured",
        "acceptance_length_measured",
    ]
    assert [c.key for c in charts.sweep_charts(_sweep(results).result)][:3] == [
        "speedup_vs_load",
        "p99_itl_per_token",
        "itl_per_token_cdf",
    ]
    assert len(charts.plan_charts(_plan(results).plan)) == 4
    assert np.isfinite(
        [
            y
            for c in charts.plan_charts(_plan(results).plan)
            for p in c.panels
            for line in p.lines
            for y in line.y
        ]
    ).all()
