"""What each plot shows, as data: typed results in, :class:`Chart` specifications out.

A chart is a list of panels; a panel is lines (or grouped bars) with their labels and roles,
reference lines (the 1× break-even, a gate, an SLO) and the x ticks to show — the loads actually
run. :mod:`alphagate.report.plots` draws a chart (PNG for ``--plot``, inline SVG for the HTML
report); keeping the numbers here lets the tests check them without reading pixels.

One module per family: :mod:`~.spec` (the records and shared axis labels), :mod:`~.acceptance`
(the α-by-position and acceptance-length panels), :mod:`~.sweep`, :mod:`~.plan`,
:mod:`~.plan_alpha`, :mod:`~.bench`, :mod:`~.measured`, :mod:`~.goodput`, :mod:`~.closed_form`,
:mod:`~.where` (captions' deployment clauses) and :mod:`~.sets` (each verb's ``--plot``).
"""

from alphagate.report.charts.bench import bench_itl_cdf_chart, bench_itl_chart, bench_speedup_chart
from alphagate.report.charts.closed_form import table_speedup_chart
from alphagate.report.charts.explain import explain_shares_chart, explain_timeline_chart
from alphagate.report.charts.goodput import goodput_chart
from alphagate.report.charts.measured import (
    bench_acceptance_length_chart,
    bench_alpha_chart,
    measure_acceptance_length_chart,
    measure_alpha_chart,
)
from alphagate.report.charts.plan import plan_itl_chart, plan_speedup_chart, same_itl, same_policy
from alphagate.report.charts.plan_alpha import (
    MeasuredAlpha,
    plan_acceptance_length_chart,
    plan_alpha_chart,
    same_classes,
)
from alphagate.report.charts.sets import bench_charts, plan_charts, sweep_charts
from alphagate.report.charts.spec import Chart, HLine, Line, Panel, Role
from alphagate.report.charts.sweep import (
    sweep_acceptance_length_chart,
    sweep_alpha_chart,
    sweep_itl_cdf_chart,
    sweep_itl_chart,
    sweep_speedup_chart,
)
from alphagate.report.charts.where import (
    bench_model,
    bench_sides,
    bench_where,
    elsewhere,
    plan_deployment_name,
    same_deployment,
)

__all__ = [
    "Chart",
    "HLine",
    "Line",
    "MeasuredAlpha",
    "Panel",
    "Role",
    "bench_acceptance_length_chart",
    "bench_alpha_chart",
    "bench_charts",
    "bench_itl_cdf_chart",
    "bench_itl_chart",
    "bench_model",
    "bench_sides",
    "bench_speedup_chart",
    "bench_where",
    "elsewhere",
    "explain_shares_chart",
    "explain_timeline_chart",
    "goodput_chart",
    "measure_acceptance_length_chart",
    "measure_alpha_chart",
    "plan_acceptance_length_chart",
    "plan_alpha_chart",
    "plan_charts",
    "plan_deployment_name",
    "plan_itl_chart",
    "plan_speedup_chart",
    "same_classes",
    "same_deployment",
    "same_itl",
    "same_policy",
    "sweep_acceptance_length_chart",
    "sweep_alpha_chart",
    "sweep_charts",
    "sweep_itl_cdf_chart",
    "sweep_itl_chart",
    "sweep_speedup_chart",
    "table_speedup_chart",
]
