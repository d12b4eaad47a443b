"""The bench renderers under an SLO: goodput rows, the sweep table and knees at 80 columns, trace
levels, and the goodput chart's numbers (read from the chart, not from pixels)."""

from __future__ import annotations

import io

import pytest
from rich.console import Console, RenderableType

from alphagate.bench.records import BenchResult, RequestRecord, compare_levels, summarize_level
from alphagate.bench.slo import SLO
from alphagate.bench.sweep import KneeSearch, Sweep, SweepSummary
from alphagate.report.bench import render_bench
from alphagate.report.bench_plots import bench_figures
from alphagate.report.charts import bench_itl_chart, bench_speedup_chart, goodput_chart
from tests.records import streamed

SLO_TTFT = SLO(bounds_ms={"ttft_ms": 50.0, "itl_per_token_p99_ms": 20.0})


def _text(r: RenderableType, width: int) -> str:
    console = Console(width=width, file=io.StringIO(), record=True, color_system=None)
    console.print(r)
    return console.export_text()


def _records(
    target: str, level: str, n: int, bad: int, scheduled: bool = False
) -> list[RequestRecord]:
    out = []
    for i in range(n):
        ttft = 0.080 if i < bad else 0.010
        times = [ttft + 0.01 * j for j in range(5)]
        scheduled_s = 0.1 * i - 0.0004 if scheduled else None
        out.append(
            streamed(
                times, id=i, target=target, level=level, send_s=0.1 * i, scheduled_s=scheduled_s
            )
        )
    return out


def _sweep_result() -> BenchResult:
    sweep = Sweep(kind="concurrency", lo=1, hi=16)
    # (target, load, requests that miss the SLO of 8)
    plan = [
        ("baseline", 1, 0), ("candidate", 1, 0), ("baseline", 2, 0), ("candidate", 2, 0),
        ("baseline", 4, 3), ("candidate", 4, 0), ("baseline", 8, 8), ("candidate", 8, 0),
        ("candidate", 16, 5), ("baseline", 3, 0), ("candidate", 12, 0), ("candidate", 14, 1),
        ("candidate", 13, 0),
    ]  # fmt: skip
    levels, searches = (
        [],
        {"baseline": KneeSearch(sweep, "baseline"), "candidate": KneeSearch(sweep, "candidate")},
    )
    for target, load, bad in plan:
        lv = summarize_level(
            target, "http://x", f"c{load}", load, None, _records(target, f"c{load}", 8, bad),
            None, slo=SLO_TTFT,
        )  # fmt: skip
        levels.append(lv)
        assert lv.goodput is not None
        searches[target].record(float(load), lv.goodput.meets_slo)
    knees = [s.knee() for s in searches.values()]
    summary = SweepSummary(sweep=sweep, knees=knees, knee_ratio=13 / 3)
    return BenchResult(
        run_id="r", config={}, levels=levels, comparisons=compare_levels(levels),
        slo=SLO_TTFT, sweep=summary,
    )  # fmt: skip


@pytest.mark.parametrize("width", [80, 160])
def test_sweep_and_goodput_tables_read_whole(width: int) -> None:
    trace = [
        summarize_level(t, "http://x", "trace", None, None, _records(t, "trace", 6, 1, True), None,
                        slo=SLO_TTFT, time_scale=0.1)
        for t in ("baseline", "candidate")
    ]  # fmt: skip
    plain = BenchResult(
        run_id="r", config={}, levels=trace, comparisons=compare_levels(trace), slo=SLO_TTFT
    )
    for result in (_sweep_result(), plain):
        text = _text(render_bench(result), width)
        assert "…" not in text
        assert max(len(line) for line in text.splitlines()) <= width, text
    sweep_text = _text(render_bench(_sweep_result()), 80)
    assert "knee" in sweep_text.lower() and "13" in sweep_text and "4.33×" in sweep_text
    assert "62% ✗" in sweep_text  # 5 of 8 requests good at c4 for the baseline
    plain_text = _text(render_bench(plain), 80)
    assert "trace replayed at time scale 0.1 (10× speed)" in plain_text
    assert "5/6 (83%) ✗" in plain_text and "goodput (req/s)" in plain_text
    assert "send lag P50/P99 (ms)" in plain_text and "0.40 / 0.40" in plain_text


def test_goodput_chart_numbers() -> None:
    result = _sweep_result()
    chart = goodput_chart(result)
    assert chart is not None
    good, share, ratio = chart.panels
    base, cand = good.lines
    assert base.x == (1.0, 2.0, 3.0, 4.0, 8.0)
    by = {(lv.target, lv.load): lv for lv in result.levels}
    assert base.y == tuple(
        by[("baseline", x)].goodput.good_requests_per_s  # type: ignore[union-attr]
        for x in base.x
    )
    assert base.point_labels == ("", "", "knee", "", "")
    assert cand.point_labels is not None and cand.point_labels[cand.x.index(13.0)] == "knee"
    assert share.lines[0].y == (100.0, 100.0, 100.0, 62.5, 0.0)
    assert share.refs[0].y == 99.0
    # ratios where both ran, at the doubling loads; 0 good requests at c8 for the baseline
    assert ratio.lines[0].x == (1.0, 2.0, 4.0)
    assert ratio.y_ratio and ratio.refs[0].y == 1.0
    # every load run has a tick; bisection loads crowding a label (13 and 14 by 12 and 16) none
    assert good.x_ticks == (1.0, 2.0, 3.0, 4.0, 8.0, 12.0, 13.0, 14.0, 16.0)
    assert good.x_tick_labels == ("1", "2", "3", "4", "8", "12", "", "", "16")
    assert list(bench_figures(result)) == ["goodput_vs_load.png"]
    assert goodput_chart(result.model_copy(update={"slo": None})) is None


def test_every_bench_chart_names_its_load_axis_by_one_rule() -> None:
    """Closed-loop levels beside an open-loop one: the goodput chart and the measured charts name
    the x axis alike — a request rate only when every level ran open loop."""

    def result(levels: list[tuple[str, int | None, float | None]]) -> BenchResult:
        lvs = [
            summarize_level(t, "http://x", name, conc, rate, _records(t, name, 6, 0), None,
                            slo=SLO_TTFT)
            for name, conc, rate in levels
            for t in ("baseline", "candidate")
        ]  # fmt: skip
        return BenchResult(
            run_id="r", config={}, levels=lvs, comparisons=compare_levels(lvs), slo=SLO_TTFT
        )

    mixed = result([("c4", 4, None), ("r2", None, 2.0)])
    open_loop = result([("r2", None, 2.0), ("r4", None, 4.0)])
    for run, axis in ((mixed, "concurrency (users)"), (open_loop, "request rate (req/s)")):
        drawn = [goodput_chart(run), bench_speedup_chart(run), bench_itl_chart(run)]
        assert {p.x_label for c in drawn if c is not None for p in c.panels} == {axis}
        assert all(c is not None for c in drawn)
