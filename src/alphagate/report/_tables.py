"""One table style for every renderer: compact enough for an 80-column terminal, never cut.

Columns wrap (``overflow="fold"``) instead of ending in "…", and tables use a light box without
outer edges, so that a 10-column table of numbers fits in 80 columns.
"""

from __future__ import annotations

from rich import box
from rich.table import Table

__all__ = ["add_columns", "new_table"]


def new_table(title: str | None = None, *, caption: str | None = None) -> Table:
    return Table(
        title=title,
        caption=caption,
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        title_justify="left",
        caption_justify="left",
        header_style="bold",
    )


def add_columns(table: Table, *names: str, left: int = 1) -> Table:
    """Add columns: the first ``left`` left-aligned (labels), the rest right-aligned (numbers)."""
    for i, name in enumerate(names):
        table.add_column(name, justify="left" if i < left else "right", overflow="fold")
    return table
