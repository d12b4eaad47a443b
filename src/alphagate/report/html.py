"""The report as one self-contained HTML page: inline CSS, plots as inline SVG, no script, nothing
fetched at view time — it opens from ``file://`` and can be mailed as one file.

Pure: :class:`~alphagate.report.inputs.ReportInputs` in, HTML text out. The page's structure comes
from :func:`alphagate.report.page.build_page`, its look from the Jinja2 templates beside this
module (``report.html.j2`` and ``report.css``), and every figure from
:func:`alphagate.report.plots.draw`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import jinja2
from markupsafe import Markup

from alphagate import __version__
from alphagate.core.records import RESULTS_SCHEMA
from alphagate.report.blocks import Block, Figure, Page
from alphagate.report.charts.spec import Chart
from alphagate.report.inputs import ReportInputs
from alphagate.report.page import build_page

__all__ = ["render_html", "render_report"]


def _env() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("alphagate.report", "templates"),
        undefined=jinja2.StrictUndefined,
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def _svg(chart: Chart, anchor: str) -> Markup:
    from alphagate.report import plots

    return Markup(plots.figure_svg(plots.draw(chart, title=False), anchor))


_WIDTH = re.compile(r'<svg[^>]*?\swidth="([0-9.]+)pt"')


def _width_px(svg: str) -> int:
    """The SVG's natural width in CSS pixels (matplotlib writes points: 1 pt = 4/3 px)."""
    m = _WIDTH.search(svg)
    return round(float(m.group(1)) * 4 / 3) if m else 0


@dataclass(frozen=True)
class _Drawn:
    """A block as the template sees it: its kind, and for a figure its anchor and SVG."""

    kind: str
    block: Block
    anchor: str = ""
    svg: Markup | None = None
    width_px: int = 0


def render_html(page: Page) -> str:
    """A built page as HTML: every figure drawn and inlined as SVG."""
    sections = []
    for section in page.sections:
        blocks = []
        for i, block in enumerate(section.blocks):
            if isinstance(block, Figure):
                anchor = f"{section.id}-{i}-{block.chart.key}"
                svg = _svg(block.chart, anchor)
                blocks.append(_Drawn("Figure", block, anchor, svg, _width_px(svg)))
            else:
                blocks.append(_Drawn(type(block).__name__, block))
        sections.append((section, blocks))
    return (
        _env()
        .get_template("report.html.j2")
        .render(page=page, sections=sections, version=__version__, schema=RESULTS_SCHEMA)
    )


def render_report(inputs: ReportInputs) -> str:
    """The report page for ``inputs``, as one HTML document."""
    return render_html(build_page(inputs))
