"""The progress bar of a long replay or training run, shared by the verbs that show one
(``measure offline``, ``train-head``): on stderr, so ``--json`` on stdout stays clean."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.progress import Progress

__all__ = ["replay_bar"]


def replay_bar(label: str) -> Progress:
    """The progress bar of a replay on stderr (entered by the caller): ``label`` (a task field
    or text), done of total, the ``detail`` field (a rate), elapsed time and an ETA."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from alphagate.cli._app import err_console

    return Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[detail]}"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=err_console,
        transient=True,
    )
