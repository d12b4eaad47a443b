"""Drawing a chart: a legend on every panel, the loads run as ticks, × on ratio axes, the
colour-blind-safe palette, SVG that can share a page, PNG bytes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from alphagate.report import charts, plots
from alphagate.report.inputs import PlanInput, SweepInput, parse_results


def _charts(results: dict[str, Path]) -> list[charts.Chart]:
    s = parse_results("sweep.json", results["sweep"].read_text())
    p = parse_results("plan.json", results["plan"].read_text())
    assert isinstance(s, SweepInput) and isinstance(p, PlanInput)
    return [*charts.sweep_charts(s.result), *charts.plan_charts(p.plan)]


def test_every_panel_has_a_legend_labels_and_the_ticks_asked_for(results: dict[str, Path]) -> None:
    for chart in _charts(results):
        fig = plots.draw(chart)
        axes = [ax for ax in fig.axes if ax.get_visible()]
        assert len(axes) == len(chart.panels), chart.key
        for ax, panel in zip(axes, chart.panels, strict=True):
            legend = ax.get_legend()
            assert legend is not None and len(legend.get_texts()) >= 1, (chart.key, panel.title)
            assert ax.get_xlabel() == panel.x_label and ax.get_ylabel() == panel.y_label
            if panel.x_ticks:
                assert list(ax.get_xticks()) == list(panel.x_ticks)
                assert [t.get_text() for t in ax.get_xticklabels()] == list(panel.x_tick_labels)


def test_ratio_axes_read_in_x_and_show_the_one_x_line(results: dict[str, Path]) -> None:
    s = parse_results("sweep.json", results["sweep"].read_text())
    assert isinstance(s, SweepInput)
    fig = plots.draw(charts.sweep_speedup_chart(s.result))
    ax = fig.axes[0]
    fig.canvas.draw()
    labels = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
    assert labels and all(t.endswith("×") for t in labels)
    assert "break-even (1×)" in [t.get_text() for t in ax.get_legend().get_texts()]


def test_a_predicted_range_is_a_shaded_band_in_its_series_colour(results: dict[str, Path]) -> None:
    from matplotlib.collections import PolyCollection
    from matplotlib.colors import to_hex

    s = parse_results("sweep.json", results["sweep"].read_text())
    assert isinstance(s, SweepInput)
    chart = charts.sweep_speedup_chart(s.result)
    fig = plots.draw(chart)
    ax, panel = fig.axes[0], chart.panels[0]
    bands = [c for c in ax.collections if isinstance(c, PolyCollection)]
    assert len(bands) == len(panel.lines)
    colours = {line.get_label(): line.get_color() for line in ax.get_lines()}
    for band, line in zip(bands, panel.lines, strict=True):
        ys = band.get_paths()[0].vertices[:, 1]
        assert line.low is not None and line.high is not None
        assert min(ys) == pytest.approx(min(line.low)) and max(ys) == pytest.approx(max(line.high))
        assert to_hex(band.get_facecolor()[0]) == to_hex(colours[line.label])
    assert "Shaded" in chart.caption


def test_series_use_okabe_ito_and_the_baseline_is_black(results: dict[str, Path]) -> None:
    s = parse_results("sweep.json", results["sweep"].read_text())
    assert isinstance(s, SweepInput)
    fig = plots.draw(charts.sweep_itl_chart(s.result, ("p99",)))
    colours = {line.get_label(): line.get_color() for line in fig.axes[0].get_lines()}
    assert colours["off (no speculation)"] == "#000000"
    assert colours["α=0.5"] == plots.OKABE_ITO[0] and colours["α=0.8"] == plots.OKABE_ITO[1]


def test_svg_is_inline_ready_and_ids_never_clash(results: dict[str, Path]) -> None:
    chart = _charts(results)[0]
    a = plots.figure_svg(plots.draw(chart), "a")
    b = plots.figure_svg(plots.draw(chart), "b")
    assert a.startswith("<svg") and "<?xml" not in a and "<!DOCTYPE" not in a
    assert 'viewBox="' in a
    ids_a = set(re.findall(r'id="([^"]+)"', a))
    ids_b = set(re.findall(r'id="([^"]+)"', b))
    assert ids_a and not ids_a & ids_b and all(i.startswith("a-") for i in ids_a)
    for ref in re.findall(r'(?:href="|url\()#([^")]+)', a):
        assert ref in ids_a  # every reference points at an id of the same figure


def test_png_bytes(results: dict[str, Path]) -> None:
    png = plots.figure_png(plots.draw(_charts(results)[0]))
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
