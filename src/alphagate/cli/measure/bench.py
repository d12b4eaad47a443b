"""``alphagate measure bench``: the acceptance a bench run measured, per traffic class."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from alphagate.cli._groups import takes_groups
from alphagate.cli.measure._common import ResultsFlags, measure_app, measure_error

__all__ = ["bench"]


@measure_app.command("bench", short_help="Acceptance per class from a bench run's records.")
@takes_groups
def bench(
    summary: Annotated[
        Path,
        typer.Argument(
            metavar="SUMMARY", help="A bench summary.json (its requests.jsonl beside it)."
        ),
    ],
    min_drafts: Annotated[
        int, typer.Option("--min-drafts", min=1, help="Exit 3 below this many drafts.")
    ] = 2000,
    results: ResultsFlags = ResultsFlags(),
) -> None:
    """Acceptance a bench run measured: per traffic class from the server's per-request counts
    (vLLM --per-request-spec-decode-metrics), cluster-robust over requests; else the server's
    counters for all traffic (or for the one class a run sent)."""
    from alphagate.bench.acceptance import measure_bench
    from alphagate.core.errors import ConfigError

    results.check([summary])
    try:
        result = measure_bench(summary)
    except ConfigError as exc:
        measure_error(exc)
    results.finish(result, min_drafts)
