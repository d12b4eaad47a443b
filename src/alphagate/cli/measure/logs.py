"""``alphagate measure logs``: acceptance from vLLM's ``SpecDecoding metrics`` log lines (or
SGLang's)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from alphagate.cli._check import fail
from alphagate.cli._groups import takes_groups
from alphagate.cli.measure._common import KOpt, ResultsFlags, measure_app, measure_error

__all__ = ["logs"]


@measure_app.command("logs", short_help="Acceptance from vLLM's SpecDecoding log lines.")
@takes_groups
def logs(
    files: Annotated[
        list[str],
        typer.Argument(
            metavar="LOG",
            help="Log files, or - for standard input (kubectl logs … | alphagate measure logs -).",
        ),
    ],
    since: Annotated[
        str | None, typer.Option("--since", help="Window start, MM-DD HH:MM[:SS] as logged.")
    ] = None,
    until: Annotated[
        str | None, typer.Option("--until", help="Window end, MM-DD HH:MM[:SS].")
    ] = None,
    last: Annotated[
        str | None, typer.Option("--last", help="Only the last 10m (etc.) before the newest line.")
    ] = None,
    k: KOpt = None,
    results: ResultsFlags = ResultsFlags(),
) -> None:
    """Sum vLLM's periodic 'SpecDecoding metrics' lines over a window; without them, SGLang's
    logged /generate responses (meta_info) or its 'Decode batch … accept len' lines."""
    from alphagate.measure.logs import measure_logs, parse_when, read_lines
    from alphagate.measure.prometheus import parse_duration
    from alphagate.measure.results import MeasureError

    results.check([Path(f) for f in files if f != "-"])
    for f in files:
        if f != "-" and (not Path(f).exists() or Path(f).is_dir()):
            fail(f"log file not found (or a directory): {f}", "FILES")  # a FIFO is fine
    try:
        result = measure_logs(
            read_lines(files),  # streamed, each line with its file and number
            ", ".join(files),
            since=parse_when(since) if since else None,
            until=parse_when(until) if until else None,
            last_s=parse_duration(last) if last else None,
            k=k,
        )
    except MeasureError as exc:
        measure_error(exc)
    except OSError as exc:
        fail(f"cannot read {exc.filename or 'the log'}: {exc.strerror or exc}", "FILES")
    results.finish(result)
