"""``alphagate measure``: acceptance (α, ρ, τ with 95% intervals) from running servers, a
Prometheus server, or server logs. Exit codes: 0 measured; 2 bad input or an unreachable or
wrong source; 3 the source works but has not seen enough drafts yet; 130 interrupted."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from alphagate.cli._app import (
    JsonOpt,
    app,
    console,
    err_console,
    fail,
    finite_float,
    json_dumps,
    print_json,
)
from alphagate.cli._files import atomic_write_text, sigterm_as_interrupt
from alphagate.cli._options import check_output_path

if TYPE_CHECKING:
    from alphagate.measure.results import MeasureResult

measure_app = typer.Typer(
    help="Measure acceptance: from live /metrics, a Prometheus server, or server logs. Every "
    "source writes the same results JSON (alphagate.results/v1), which `plan --alpha-from` and "
    "`gate --measure` read.",
    no_args_is_help=True,
)
app.add_typer(measure_app, name="measure", short_help="α, ρ, τ from servers, Prometheus or logs.")

OutOpt = Annotated[Path | None, typer.Option("--out", "-o", help="Write the results JSON here.")]
KOpt = Annotated[
    int | None, typer.Option("--k", min=1, max=64, help="K, when the source does not show it.")
]


def _finish(
    result: MeasureResult, as_json: bool, out: Path | None, min_drafts: int | None = None
) -> None:
    from alphagate.report.measure import promql_lines, render_measure

    if out is not None:
        atomic_write_text(out, json_dumps(result.payload()) + "\n", "--out")
    if as_json:
        print_json(result.payload())
    else:
        console.print(render_measure(result))
        for line in promql_lines(result):
            console.print(line, soft_wrap=True, markup=False, highlight=False)
        if out is not None:
            console.print(f"results written to {out}")
    drafts = result.overall.num_drafts if result.overall else 0.0
    if min_drafts is not None and drafts < min_drafts:
        err_console.print(
            f"[yellow]{drafts:,.0f} drafts < --min-drafts {min_drafts:,}: not enough evidence yet[/yellow]"
        )
        raise typer.Exit(3)


def _measure_error(exc: Exception) -> None:
    code = getattr(exc, "exit_code", 2)
    if code == 2:
        fail(str(exc))
    err_console.print(f"[yellow]{exc}[/yellow]")
    raise typer.Exit(code)


@measure_app.command("live", short_help="Scrape /metrics until enough drafts are seen.")
def live(
    urls: Annotated[
        list[str],
        typer.Option("--url", help="A server (or its /metrics) URL; repeat for replicas."),
    ],
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
        typer.Option(
            "--duration",
            callback=finite_float("--duration", 0.1),
            help="Stop after this many seconds.",
        ),
    ] = None,
    interval: Annotated[
        float,
        typer.Option(
            "--interval",
            callback=finite_float("--interval", 0.05, 3600.0),
            help="Seconds between scrapes.",
        ),
    ] = 2.0,
    k: KOpt = None,
    out: OutOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Scrape one or more /metrics endpoints (replicas) until --min-drafts drafts or --duration.

    Counter increases survive restarts inside the window and are summed over replicas. Ctrl-C
    (or SIGTERM) ends the window early: it is printed and written, and the exit code is 130.
    """
    from pydantic import ValidationError

    from alphagate.measure.live import LiveConfig, measure_live
    from alphagate.measure.results import MeasureError

    if out is not None:
        check_output_path(out, "--out", directory=False)
    for u in urls:
        if not u.startswith(("http://", "https://")):
            fail(f"{u!r} is not an http(s) URL", "--url")
    try:
        cfg = LiveConfig(
            urls=tuple(urls),
            model_name=model_name,
            engine=engine,
            min_drafts=min_drafts,
            duration_s=duration,
            interval_s=interval,
            k=k,
        )
    except ValidationError as exc:
        fail(str(exc.errors()[0]["msg"]))
    last: dict[str, MeasureResult] = {}
    try:
        with sigterm_as_interrupt():  # Ctrl-C or SIGTERM: the window so far is kept
            if as_json:
                result = measure_live(cfg, on_update=lambda r: last.update(r=r))
            else:
                from rich.live import Live

                from alphagate.report.measure import render_measure

                with Live(console=console, refresh_per_second=2, transient=True) as view:

                    def show(r: MeasureResult) -> None:
                        last["r"] = r
                        view.update(render_measure(r))

                    result = measure_live(cfg, on_update=show)
    except MeasureError as exc:
        _measure_error(exc)
    except KeyboardInterrupt:
        if "r" not in last:
            raise
        err_console.print("[yellow]interrupted: the window so far[/yellow]")
        _finish(last["r"], as_json, out)
        raise typer.Exit(130) from None
    gauge_only = (
        result.overall is not None
        and result.overall.num_drafts == 0
        and any("SGLang" in n for n in result.notes)
    )
    _finish(result, as_json, out, None if gauge_only else min_drafts)


@measure_app.command("prometheus", short_help="Acceptance over a window from Prometheus.")
def prometheus(
    url: Annotated[
        str, typer.Option("--url", help="The Prometheus server, e.g. http://prometheus:9090.")
    ],
    selector: Annotated[
        str, typer.Option("--selector", help="Label matchers, e.g. '{model_name=\"llama\"}'.")
    ] = "",
    window: Annotated[str, typer.Option("--window", help="How far back: 90s, 30m, 1h, 7d.")] = "1h",
    step: Annotated[
        str | None, typer.Option("--step", help="Also a series per step, e.g. 5m.")
    ] = None,
    by: Annotated[
        str | None, typer.Option("--by", help="Split by this label, e.g. instance.")
    ] = None,
    k: KOpt = None,
    out: OutOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Query a Prometheus server's HTTP API with increase() over vLLM's spec-decode counters.

    Prints the PromQL it used, so the numbers can be reproduced in Grafana.
    """
    from pydantic import ValidationError

    from alphagate.measure.prometheus import PrometheusQuery, measure_prometheus, parse_duration
    from alphagate.measure.results import MeasureError

    if out is not None:
        check_output_path(out, "--out", directory=False)
    if not url.startswith(("http://", "https://")):
        fail(f"{url!r} is not an http(s) URL", "--url")
    try:
        q = PrometheusQuery(
            url=url,
            selector=selector,
            window_s=parse_duration(window),
            step_s=parse_duration(step) if step else None,
            by=by,
            k=k,
        )
        result = measure_prometheus(q)
    except ValidationError as exc:
        fail(str(exc.errors()[0]["msg"]).removeprefix("Value error, "), "--selector/--by")
    except MeasureError as exc:
        _measure_error(exc)
    except OSError as exc:
        fail(f"cannot read {exc.filename or 'the log'}: {exc.strerror or exc}", "FILES")
    _finish(result, as_json, out)


@measure_app.command("logs", short_help="Acceptance from vLLM's SpecDecoding log lines.")
def logs(
    files: Annotated[
        list[str],
        typer.Argument(
            help="Log files, or - for standard input (kubectl logs … | alphagate measure logs -)."
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
    out: OutOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Sum vLLM's periodic 'SpecDecoding metrics' lines over a window; without them, SGLang's
    logged /generate responses (meta_info) or its 'Decode batch … accept len' lines."""
    from alphagate.measure.logs import measure_logs, parse_when
    from alphagate.measure.prometheus import parse_duration
    from alphagate.measure.results import MeasureError

    if out is not None:
        check_output_path(out, "--out", directory=False)
    for f in files:
        if f != "-" and (not Path(f).exists() or Path(f).is_dir()):
            fail(f"log file not found (or a directory): {f}", "FILES")  # a FIFO is fine

    def lines() -> Iterator[str]:  # streamed: a log of days need not fit in memory
        for f in files:
            if f == "-":
                yield from sys.stdin
                continue
            with Path(f).open(encoding="utf-8", errors="replace") as fh:
                yield from fh

    try:
        result = measure_logs(
            lines(),
            ", ".join(files),
            since=parse_when(since) if since else None,
            until=parse_when(until) if until else None,
            last_s=parse_duration(last) if last else None,
            k=k,
        )
    except MeasureError as exc:
        _measure_error(exc)
    _finish(result, as_json, out)
