"""What a report page is made of, as data: a :class:`Page` of :class:`Section`\\ s, each a list of
blocks — prose, headings, bullets, code to paste, tables of :class:`Cell`\\ s, figures (a
:class:`~alphagate.report.charts.Chart`) and verdicts — and the cell and table builders the
sections share. :mod:`alphagate.report.html` draws them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from alphagate.core.fmt import DASH
from alphagate.report._fmt import fmt_x
from alphagate.report.charts.spec import Chart

__all__ = [
    "Block",
    "Bullets",
    "Cell",
    "Code",
    "Figure",
    "Heading",
    "Page",
    "Prose",
    "Section",
    "Table",
    "Tone",
    "Verdict",
    "cells",
    "fields_table",
    "ratio_cell",
]

Tone = Literal["", "good", "bad", "warn"]


@dataclass(frozen=True)
class Cell:
    text: str
    tone: Tone = ""


@dataclass(frozen=True)
class Prose:
    text: str
    tone: Literal["", "note", "warn"] = ""


@dataclass(frozen=True)
class Heading:
    text: str


@dataclass(frozen=True)
class Bullets:
    items: tuple[str, ...]


@dataclass(frozen=True)
class Code:
    label: str
    text: str


@dataclass(frozen=True)
class Table:
    title: str
    header: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]
    note: str = ""


@dataclass(frozen=True)
class Figure:
    chart: Chart


@dataclass(frozen=True)
class Verdict:
    """One decision: a plan's verdict or a gate's."""

    source: str
    title: str
    verdict: str
    tone: Tone
    reason: str
    facts: tuple[tuple[str, str], ...] = ()
    bullets: tuple[str, ...] = ()


Block = Prose | Heading | Bullets | Code | Table | Figure | Verdict


@dataclass(frozen=True)
class Section:
    id: str
    title: str
    blocks: tuple[Block, ...]
    absent: str = ""


@dataclass(frozen=True)
class Page:
    title: str
    summary: tuple[str, ...]
    sections: tuple[Section, ...]
    missing: tuple[str, ...] = ()
    sources: tuple[str, ...] = field(default=())


def cells(*texts: str) -> tuple[Cell, ...]:
    """A table row of plain cells."""
    return tuple(Cell(t) for t in texts)


def ratio_cell(v: float | None, digits: int = 2) -> Cell:
    """A ratio where > 1 means speculation helps; marked when it hurts."""
    return Cell(fmt_x(v, digits), "bad" if v is not None and v < 1.0 else "")


def _scalar(v: Any) -> str | None:
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, int | str):
        return str(v)
    if v is None:
        return DASH
    return None


def fields_table(title: str, fields: dict[str, Any]) -> Table:
    """A record's scalar fields (and lists of scalars) as a two-column table."""
    rows = []
    for key, value in fields.items():
        text = _scalar(value)
        if text is None and isinstance(value, list) and all(_scalar(v) for v in value):
            text = ", ".join(str(_scalar(v)) for v in value)
        if text is not None:
            rows.append(cells(key, text))
    return Table(title=title, header=("field", "value"), rows=tuple(rows))
