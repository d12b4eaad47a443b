"""``alphagate measure live``: scrape servers' ``/metrics`` (or saved scrapes) until enough drafts
are seen."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from alphagate.cli._app import console, err_console
from alphagate.cli._check import bounded, fail
from alphagate.cli._files import sigterm_as_interrupt
from alphagate.cli._groups import takes_groups
from alphagate.cli._paths import check_http_urls
from alphagate.cli.measure._common import KOpt, ResultsFlags, measure_app, measure_error

if TYPE_CHECKING:
    from alphagate.measure.live import LiveConfig
    from alphagate.measure.results import MeasureResult

__all__ = ["live"]


@measure_app.command("live", short_help="Scrape /metrics until enough drafts are seen.")
@takes_groups
def live(
    urls: Annotated[
        list[str] | None,
        typer.Option("--url", help="A server (or its /metrics) URL; repeat for replicas."),
    ] = None,
    from_files: Annotated[
        list[Path] | None,
        typer.Option(
            "--from-file",
            help="Instead of --url: saved /metrics scrapes of one server (curl …/metrics > "
            "before.txt, later > after.txt), repeated in time order; acceptance over their "
            "counters' increase.",
        ),
    ] = None,
    model_name: Annotated[
        str | None, typer.Option("--model-name", help="Keep series with this model_name label.")
    ] = None,
    engine: Annotated[
        str | None, typer.Option("--engine", help="Keep series with this engine label.")
    ] = None,
    min_drafts: Annotated[
        int, typer.Option("--min-drafts", min=1, help="Stop once this many drafts are seen.")
    ] = 2000,
    duration: Annotated[
        float | None,
        bounded("--duration", lo=0.1, help="Stop after this many seconds."),
    ] = None,
    interval: Annotated[
        float,
        bounded("--interval", lo=0.05, hi=3600.0, help="Seconds between scrapes."),
    ] = 2.0,
    k: KOpt = None,
    results: ResultsFlags = ResultsFlags(),
) -> None:
    """Scrape one or more /metrics endpoints (replicas) until --min-drafts drafts or --duration.

    Counter increases survive restarts inside the window and are summed over replicas. Ctrl-C
    (or SIGTERM) ends the window early: it is printed and written, and the exit code is 130
    (before the first scrapes completed there is no window: nothing is written). Credentials in
    a URL are sent as an Authorization header, and every URL shown or written is redacted; two
    URLs of one replica (127.0.0.1 and localhost) are refused.
    """
    from pydantic import ValidationError

    from alphagate.measure.live import LiveConfig, measure_scrape_files
    from alphagate.measure.results import MeasureError

    results.check(from_files or [])
    if bool(urls) == bool(from_files):
        fail("give --url (live servers) or --from-file (saved scrapes), not both", "--url")
    if from_files:
        try:
            saved = measure_scrape_files(from_files, model_name=model_name, engine=engine, k=k)
        except MeasureError as exc:
            measure_error(exc)
        results.finish(saved, min_drafts)
        return
    check_http_urls(urls or [], "--url")
    try:
        cfg = LiveConfig(
            urls=tuple(urls or []),
            model_name=model_name,
            engine=engine,
            min_drafts=min_drafts,
            duration_s=duration,
            interval_s=interval,
            k=k,
        )
    except ValidationError as exc:
        fail(str(exc.errors()[0]["msg"]))
    result = _watch(cfg, results)
    gauge_only = (
        result.overall is not None
        and result.overall.num_drafts == 0
        and any("SGLang" in n for n in result.notes)
    )
    results.finish(result, None if gauge_only else min_drafts)


def _watch(cfg: LiveConfig, results: ResultsFlags) -> MeasureResult:
    """The window, shown as it grows (not with --json); Ctrl-C or SIGTERM keeps what it has
    (printed and written, exit 130)."""
    from alphagate.measure.live import measure_live
    from alphagate.measure.results import MeasureError

    last: dict[str, MeasureResult] = {}
    try:
        with sigterm_as_interrupt():  # Ctrl-C or SIGTERM: the window so far is kept
            if results.as_json:
                return measure_live(cfg, on_update=lambda r: last.update(r=r))
            from rich.live import Live

            from alphagate.report.measure import render_measure

            with Live(console=console, refresh_per_second=2, transient=True) as view:

                def show(r: MeasureResult) -> None:
                    last["r"] = r
                    view.update(render_measure(r))

                return measure_live(cfg, on_update=show)
    except MeasureError as exc:
        measure_error(exc)
    except KeyboardInterrupt:
        if "r" not in last:
            err_console.print(
                "[yellow]interrupted before the first scrapes completed: no window was measured, "
                "nothing written[/yellow]"
            )
            raise typer.Exit(130) from None
        err_console.print("[yellow]interrupted: the window so far[/yellow]")
        results.finish(last["r"])
        raise typer.Exit(130) from None
