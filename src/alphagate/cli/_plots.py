"""``--plot DIR`` for the verbs: charts drawn by :mod:`alphagate.report.plots`, saved as PNGs."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from alphagate.cli._check import fail
from alphagate.cli._files import replace_file

if TYPE_CHECKING:
    from alphagate.report.charts import Chart

__all__ = ["write_plots"]


def write_plots(charts: Iterable[Chart | None], folder: Path, flag: str) -> list[Path]:
    """One ``KEY.png`` per chart in ``folder`` (each written whole or not at all)."""
    from alphagate.report import plots

    written = []
    for chart in charts:
        if chart is None:
            continue
        path = folder / f"{chart.key}.png"
        try:
            replace_file(path, plots.figure_png(plots.draw(chart)))
        except OSError as exc:
            fail(f"cannot write {path}: {exc.strerror or exc}", flag)
        written.append(path)
    return written
