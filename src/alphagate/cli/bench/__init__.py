"""``alphagate bench``: benchmark an OpenAI-compatible endpoint, or baseline vs candidate.

Exit codes: 0 done (a sweep whose SLO breaks is a result, not an error); 1 every request failed,
the error rate exceeded ``--max-error-rate``, or the records could not be written; 2 bad input
(also after a run whose ``/metrics`` counters no decoder could produce: the records and summary
are kept, that acceptance left out); 130 interrupted (Ctrl-C, SIGTERM or SIGHUP — the summary
is still written from every completed record; Ctrl-C while the command is still starting exits
130 too, with nothing to keep).
"""

from __future__ import annotations

import sys

try:  # ~0.2 s of imports: a Ctrl-C that lands here has nothing to keep, and gets no traceback
    import os
    import time
    import uuid
    from collections.abc import Callable
    from pathlib import Path
    from typing import TYPE_CHECKING, Annotated, Literal

    import typer

    from alphagate.cli._app import (
        JsonOpt,
        app,
        config_error,
        console,
        err_console,
        fail,
        finite_float,
        int_list,
        print_json,
    )
    from alphagate.cli._files import RecordsFile, replace_file, sigterm_as_interrupt
    from alphagate.cli._options import SeedOpt, check_no_overwrite, check_output_path
except KeyboardInterrupt:  # pragma: no cover - timing; tests/cli/test_signals.py sends it
    sys.stderr.write("interrupted\n")
    raise SystemExit(130) from None

if TYPE_CHECKING:
    from alphagate.bench.config import BenchConfig
    from alphagate.bench.dataset import Prompt
    from alphagate.bench.records import BenchResult, RequestRecord
    from alphagate.bench.slo import SLO
    from alphagate.bench.sweep import Sweep

_OUT_HELP = (
    "Folder for requests.jsonl and summary.json (default results/bench-TIME). A re-run into the "
    "same folder appends its records under a new run id; summary.json describes the newest run and "
    "summary-RUN_ID.json keeps each run's own."
)
_SLO_HELP = (
    "Latency bounds per request in ms, e.g. itl_per_token_p99_ms=50,ttft_ms=2000 (vLLM's "
    "ttft:500 tpot:50 also works): ttft_ms, tpot_ms, e2e_ms, itl_per_token_p99_ms (the request's "
    "own P99 of chunk gap ÷ tokens), itl_per_token_max_ms. A request is good when it completed "
    "within every bound; goodput = good requests/s (and their tokens/s) per level and, in an A/B, "
    "candidate ÷ baseline."
)
_TRACE_HELP = (
    "Replay a trace: JSONL, one request per line — timestamp (ms, Mooncake/AIPerf convention), "
    "input_length or prompt or messages, output_length (or max_tokens), class — or the Azure LLM "
    "inference trace CSV (TIMESTAMP, ContextTokens, GeneratedTokens). Requests are sent at their "
    "timestamps (× --time-scale) against each target; -n keeps the first N. A replay longer than "
    "24 h of wall time is refused unless --max-duration (or --duration) ends it sooner."
)
#: the longest trace replay (wall seconds, after --time-scale) run without --max-duration
MAX_REPLAY_S = 86_400.0


@app.command("bench", short_help="Benchmark one endpoint, or baseline vs candidate.")
def bench_cmd(
    url: Annotated[
        str | None, typer.Option("--url", "--base-url", help="Endpoint base URL (one target).")
    ] = None,
    baseline_url: Annotated[
        str | None, typer.Option("--baseline-url", help="A/B: the no-speculation server.")
    ] = None,
    candidate_url: Annotated[
        str | None, typer.Option("--candidate-url", help="A/B: the speculative server.")
    ] = None,
    endpoint: Annotated[
        Literal["completions", "chat"], typer.Option("--endpoint", help="API to call.")
    ] = "completions",
    model: Annotated[
        str | None, typer.Option("--model", help="Model name (default: first of /v1/models).")
    ] = None,
    api_key: Annotated[
        str | None,
        typer.Option(
            "--api-key",
            envvar="ALPHAGATE_API_KEY",
            help="Bearer key (or $ALPHAGATE_API_KEY); never written out.",
        ),
    ] = None,
    header: Annotated[
        list[str] | None,
        typer.Option(
            "--header", help="Extra header NAME:VALUE, repeated (values never written out)."
        ),
    ] = None,
    dataset: Annotated[
        str | None,
        typer.Option(
            "--dataset",
            "--dataset-path",
            help="ShareGPT .json, .jsonl (prompt|messages, class, max_tokens) or synthetic:in=N,out=M "
            "(default synthetic:in=512,out=256).",
        ),
    ] = None,
    dataset_name: Annotated[
        Literal["random", "sharegpt", "custom"] | None,
        typer.Option(
            "--dataset-name",
            help="vLLM-style: random (with --random-input-len/--random-output-len), or sharegpt/custom with --dataset-path.",
        ),
    ] = None,
    random_input_len: Annotated[
        int, typer.Option("--random-input-len", min=1, max=1_048_576)
    ] = 1024,
    random_output_len: Annotated[
        int, typer.Option("--random-output-len", min=1, max=1_048_576)
    ] = 128,
    concurrency: Annotated[
        str | None,
        typer.Option(
            "--concurrency",
            "-c",
            "--max-concurrency",
            help="Closed-loop levels, e.g. 1,16,64 (with --rate: the cap on requests in flight).",
        ),
    ] = None,
    rate: Annotated[
        float | None,
        typer.Option(
            "--rate",
            "--request-rate",
            callback=finite_float("--rate", 1e-6, 1e6),
            help="Open-loop request rate (req/s).",
        ),
    ] = None,
    burstiness: Annotated[
        float,
        typer.Option("--burstiness", callback=finite_float("--burstiness", 0.01, 100.0)),
    ] = 1.0,
    num_prompts: Annotated[
        int | None,
        typer.Option(
            "--num-prompts",
            "-n",
            min=1,
            max=10_000_000,
            help="Requests per level (default 200; a trace: all of its requests).",
        ),
    ] = None,
    repeats: Annotated[
        int,
        typer.Option(
            "--repeats",
            min=1,
            max=100,
            help="Run each level N times per target; an A/B alternates them (baseline, "
            "candidate, candidate, baseline, …) and its ratios get intervals from the spread "
            "between runs, which one run cannot show (gate needs ≥ 2).",
        ),
    ] = 1,
    temperature: Annotated[
        float,
        typer.Option(
            "--temperature",
            callback=finite_float("--temperature", 0.0, 2.0),
            help="Sampling temperature sent with every request (acceptance depends on it).",
        ),
    ] = 0.0,
    class_field: Annotated[
        str | None,
        typer.Option(
            "--class-field",
            help="The JSONL field naming each line's traffic class (default: class); records "
            "keep it, and acceptance is reported per class where the server returns "
            "per-request counts.",
        ),
    ] = None,
    only_class: Annotated[
        str | None,
        typer.Option(
            "--only-class",
            help="Send only this class's lines: the server's counters then measure that class "
            "(for servers without per-request counts).",
        ),
    ] = None,
    slo: Annotated[str | None, typer.Option("--slo", help=_SLO_HELP)] = None,
    slo_attainment: Annotated[
        float,
        typer.Option(
            "--slo-attainment",
            callback=finite_float("--slo-attainment", 0.01, 1.0),
            help="Share of a level's requests that must be good for the level to meet the SLO "
            "(0.99: with one bound, its P99 is within it).",
        ),
    ] = 0.99,
    sweep: Annotated[
        str | None,
        typer.Option(
            "--sweep",
            help="Find each target's knee under --slo: concurrency:LO..HI or rate:LO..HI; doubles "
            "the load from LO until the SLO breaks, then bisects.",
        ),
    ] = None,
    sweep_tolerance: Annotated[
        float,
        typer.Option(
            "--sweep-tolerance",
            callback=finite_float("--sweep-tolerance", 0.001, 1.0),
            help="Bisection stops when first failing load ÷ knee ≤ 1 + this (or adjacent "
            "concurrencies).",
        ),
    ] = 0.1,
    trace: Annotated[Path | None, typer.Option("--trace", help=_TRACE_HELP)] = None,
    time_scale: Annotated[
        float,
        typer.Option(
            "--time-scale",
            callback=finite_float("--time-scale", 0.001, 1000.0),
            help="--trace: wall seconds per trace second (0.1 replays ten times faster).",
        ),
    ] = 1.0,
    duration: Annotated[
        float | None,
        typer.Option(
            "--duration",
            callback=finite_float("--duration", 0.001),
            help="Stop sending after this many seconds per level.",
        ),
    ] = None,
    warmup: Annotated[
        int,
        typer.Option(
            "--warmup", min=0, help="First N requests per level excluded from statistics."
        ),
    ] = 0,
    seed: SeedOpt = 0,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout",
            callback=finite_float("--timeout", 0.001, 86_400.0),
            help="Seconds without data before a stream counts as stalled.",
        ),
    ] = 60.0,
    request_timeout: Annotated[
        float | None,
        typer.Option(
            "--request-timeout",
            callback=finite_float("--request-timeout", 0.001, 86_400.0),
            help="The most seconds one request may take in all, however its bytes come (a server "
            "that trickles never stalls); it then fails as request_timeout. Default: --timeout + "
            "1 s per max_tokens token (4,096 when a request has none).",
        ),
    ] = None,
    metrics_url: Annotated[
        list[str] | None,
        typer.Option(
            "--metrics-url", help="Prometheus endpoints to diff (replicas); default <url>/metrics."
        ),
    ] = None,
    no_metrics: Annotated[
        bool, typer.Option("--no-metrics", help="Do not scrape /metrics.")
    ] = False,
    strict: Annotated[
        bool, typer.Option("--strict", help="A malformed dataset or trace line is fatal.")
    ] = False,
    max_errors: Annotated[
        int | None, typer.Option("--max-errors", min=1, help="Stop after N failed requests.")
    ] = None,
    max_error_rate: Annotated[
        float,
        typer.Option(
            "--max-error-rate",
            callback=finite_float("--max-error-rate", 0.0, 1.0),
            help="Stop (and exit 1) when failures ÷ requests of a level exceed this.",
        ),
    ] = 0.05,
    max_duration: Annotated[
        float | None,
        typer.Option(
            "--max-duration",
            callback=finite_float("--max-duration", 0.001),
            help="Stop sending after this many seconds in all.",
        ),
    ] = None,
    out: Annotated[Path | None, typer.Option("--out", "-o", "--result-dir", help=_OUT_HELP)] = None,
    fmt: Annotated[
        Literal["table", "json", "csv"],
        typer.Option(
            "--format",
            help="What to print: tables, one JSON object (= --json), or CSV (one row per level; "
            "requests.csv and levels.csv are written beside summary.json).",
        ),
    ] = "table",
    no_progress: Annotated[
        bool, typer.Option("--no-progress", help="No live display (CI logs).")
    ] = False,
    workers: Annotated[
        int,
        typer.Option(
            "--workers",
            min=1,
            max=256,
            help="Send the load from N worker processes, each with its own event loop and HTTP "
            "session, so that the chunks of one engine step are read by N loops (thousands of "
            "streams; use at most one per free core). Open-loop arrivals are drawn once and dealt "
            "round-robin; a closed loop's concurrency is divided. One requests.jsonl, one "
            "summary, one display; a worker that dies is reported (exit 1) and its completed "
            "records are kept.",
        ),
    ] = 1,
    save_text: Annotated[
        bool,
        typer.Option(
            "--save-text",
            help="Keep each request's prompt and output (text, and token ids from vLLM's "
            "return_token_ids) in requests.jsonl: a run against the baseline server becomes the "
            "log `alphagate measure offline --log` reads.",
        ),
    ] = False,
    probe_send_time: Annotated[
        bool,
        typer.Option(
            "--probe-send-time",
            hidden=True,
            help="Record each chunk's delivery delay from a twin run with --emit-send-time.",
        ),
    ] = False,
    plot: Annotated[
        Path | None,
        typer.Option(
            "--plot",
            help="Write PNG figures here: speedup, P50/P99 ITL, the ITL CDF, α by position and "
            "acceptance length measured, and goodput against load (with --slo).",
        ),
    ] = None,
    save_result: Annotated[
        bool,
        typer.Option(
            "--save-result", hidden=True, help="Accepted for vLLM habits; results are always saved."
        ),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Benchmark an OpenAI-compatible endpoint (vLLM, SGLang, the twin) — or baseline vs candidate.

    Each finished request is appended to requests.jsonl at once; Ctrl-C or SIGTERM ends the run
    with every completed record kept and summary.json written (marked interrupted). With --slo,
    goodput per level; with --sweep, each target's knee; with --trace, production arrivals.
    """
    if os.environ.get("ALPHAGATE_API_KEY") == "" and api_key is None:
        fail("ALPHAGATE_API_KEY is set but empty; unset it to send no key", "--api-key")
    if as_json and fmt not in ("table", "json"):
        fail("give --json or --format csv, not both", "--format")
    as_json = as_json or fmt == "json"
    if dataset_name == "random":
        dataset = f"synthetic:in={random_input_len},out={random_output_len}"
    _check_load_flags(trace, dataset, rate, sweep, concurrency, slo)
    the_slo, the_sweep = _slo_and_sweep(slo, slo_attainment, sweep, sweep_tolerance)
    out_dir = out or Path("results") / time.strftime("bench-%Y%m%d-%H%M%S")
    for path, flag in ((out_dir, "--out"), (plot, "--plot"), (trace, "--trace")):
        _check_utf8_path(path, flag)
    if dataset is not None and not dataset.startswith("synthetic:"):
        _check_utf8_path(Path(dataset), "--dataset")
    check_output_path(out_dir, "--out", directory=True)
    if plot is not None:
        check_output_path(plot, "--plot", directory=True)
    dataset_file = (
        Path(dataset) if dataset is not None and not dataset.startswith("synthetic:") else None
    )
    check_no_overwrite([(out_dir, "--out", True), (plot, "--plot", True)], [dataset_file, trace])
    prompts, problems = _prompts(
        trace, dataset, num_prompts, seed, strict, class_field=class_field, only_class=only_class
    )
    if warmup >= len(prompts):
        fail(f"--warmup {warmup} leaves no request of the {len(prompts)} to measure", "--warmup")
    if trace is not None:
        _check_replay(prompts, time_scale, max_duration, duration, quiet=as_json)
    cfg = _config(
        _targets(url, baseline_url, candidate_url),
        api_key,
        header,
        None if the_sweep is not None else concurrency,
        rate,
        metrics_url,
        time_scale if trace is not None else None,
        endpoint=endpoint,
        model=model,
        num_prompts=len(prompts),
        duration_s=duration,
        burstiness=burstiness,
        warmup=warmup,
        seed=seed,
        timeout_s=timeout,
        request_timeout_s=request_timeout,
        scrape_metrics=not no_metrics,
        max_errors=max_errors,
        max_error_rate=max_error_rate,
        max_duration_s=max_duration,
        slo=the_slo,
        sweep=the_sweep,
        probe_send_time=probe_send_time,
        save_text=save_text,
        repeats=repeats,
        temperature=temperature,
        dataset=None if trace is not None else dataset or "synthetic:in=512,out=256",
        only_class=only_class,
    )
    workers = _useful_workers(workers, cfg, len(prompts), quiet=as_json)
    run_id = time.strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6]
    records = RecordsFile(out_dir / "requests.jsonl", "--out")
    for note in records.notes:
        err_console.print(f"[yellow]{note}[/yellow]")
    for p in problems[:20]:  # on stderr with --json too: a skipped line changes the load
        err_console.print(f"[yellow]skipped:[/yellow] {p}")
    if len(problems) > 20:
        err_console.print(
            f"[yellow]skipped: {len(problems) - 20} more (summary.json lists all)[/yellow]"
        )
    kept: list[RequestRecord] = []

    def sink(rec: RequestRecord) -> None:
        records.append(rec)
        if fmt == "csv" or plot is not None:
            kept.append(rec)

    metrics_problems: list[str] = []
    with records, sigterm_as_interrupt():
        result = _run(
            cfg,
            prompts,
            run_id,
            sink,
            problems,
            quiet=fmt != "table" or no_progress,
            workers=workers,
            metrics_problems=metrics_problems,
        )
    result = result.model_copy(update={"records_file": str(records.path)})
    written = _write_summaries(result, out_dir)
    if fmt == "csv":
        written = _write_csv(result, kept, out_dir) and written
    if plot is not None:
        _plots(result, plot, kept, quiet=fmt != "table")
    if as_json:
        print_json(result.payload())
    elif fmt == "csv":
        from alphagate.bench.export import level_rows, to_csv

        typer.echo(to_csv(level_rows(result)), nl=False)
    else:
        from alphagate.report.bench import render_bench

        console.print(render_bench(result))
        console.print(
            f"records: {records.path}   summary: {out_dir / 'summary.json'}   run: {run_id}"
        )
    for why in metrics_problems:
        flag = "--metrics-url" if metrics_url else "the target's /metrics (--no-metrics skips it)"
        err_console.print(f"[red]{flag}: {why}[/red]")
    code = _exit_code(result, max_error_rate)
    if code != 130 and metrics_problems:
        code = 2  # a wrong source: bad input, though every record and the summary are kept
    raise typer.Exit(code or (0 if written else 1))


def _check_utf8_path(path: Path | None, flag: str) -> None:
    """Results name their files in UTF-8 JSON: a path whose bytes are not UTF-8 is refused before
    any work (it would make summary.json unwritable after the run)."""
    if path is None:
        return
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        shown = os.fsencode(path).decode("utf-8", "backslashreplace")
        fail(f"the path '{shown}' is not valid UTF-8; use a UTF-8 path", flag)


def _check_replay(
    prompts: list[Prompt],
    time_scale: float,
    max_duration: float | None,
    duration: float | None,
    *,
    quiet: bool,
) -> None:
    """A trace's replay takes its span × ``time_scale``: past :data:`MAX_REPLAY_S` it is refused
    unless a limit ends it sooner; a replay of over a minute says how long it will take."""
    span = max((p.arrival_s or 0.0) for p in prompts) * time_scale
    limit = min(x for x in (max_duration, duration, float("inf")) if x is not None)
    if span > MAX_REPLAY_S and limit > MAX_REPLAY_S:
        fail(
            f"replaying it takes {span:,.0f} s ({span / 86_400:,.1f} days) at --time-scale "
            f"{time_scale:g}: its last request is sent then. Above {MAX_REPLAY_S:,.0f} s (24 h) "
            "give --time-scale (0.01 replays 100× faster) or --max-duration to end it sooner",
            "--trace",
        )
    if span > 60 and not quiet:
        ends = f"; --max-duration/--duration ends it after {limit:,.0f} s" if limit < span else ""
        err_console.print(
            f"trace replay: {len(prompts):,} requests over {span:,.0f} s of wall time "
            f"(--time-scale {time_scale:g}){ends}"
        )


def _useful_workers(workers: int, cfg: BenchConfig, n_requests: int, *, quiet: bool) -> int:
    """No more worker processes than requests a level sends, nor than users (or the cap on
    requests in flight) a level has: the rest would sit idle. Fewer are started, and said."""
    if workers == 1 or cfg.sweep is not None:  # a sweep's levels differ: each is split as it comes
        return workers
    useful, why = workers, ""
    if n_requests < useful:
        useful, why = n_requests, f"{n_requests} request{'s' * (n_requests > 1)} per level"
    caps = [lv.concurrency for lv in cfg.levels]
    top = max((c for c in caps if c is not None), default=None)
    if top is not None and None not in caps and top < useful:  # closed loops, or capped
        useful, why = top, f"at most {top} request{'s' * (top > 1)} in flight"
    if useful < workers and not quiet:
        err_console.print(
            f"[yellow]--workers {workers}: only {useful} would have work ({why}); starting "
            f"{useful}[/yellow]"
        )
    return useful


def _check_load_flags(
    trace: Path | None,
    dataset: str | None,
    rate: float | None,
    sweep: str | None,
    concurrency: str | None,
    slo: str | None,
) -> None:
    """One load shape per run: levels, a rate, a sweep or a trace."""
    if trace is not None:
        for given, flag in ((dataset, "--dataset"), (rate, "--rate"), (sweep, "--sweep")):
            if given is not None:
                fail(f"a trace brings its own requests and arrival times; drop {flag}", "--trace")
    if sweep is not None:
        if slo is None:
            fail("a sweep searches for the load at which the SLO breaks: give --slo", "--sweep")
        for given, flag in ((rate, "--rate"), (concurrency, "--concurrency")):
            if given is not None:
                fail(f"--sweep chooses the loads itself; drop {flag}", "--sweep")


def _prompts(
    trace: Path | None,
    dataset: str | None,
    num_prompts: int | None,
    seed: int,
    strict: bool,
    *,
    class_field: str | None = None,
    only_class: str | None = None,
) -> tuple[list[Prompt], list[str]]:
    from alphagate.bench.dataset import DatasetError, load_prompts

    if trace is not None:
        if class_field is not None or only_class is not None:
            fail("a trace's class is its 'class' field; drop --class-field/--only-class", "--trace")
        from alphagate.bench.trace import load_trace

        try:
            return load_trace(str(trace), num_prompts, seed, strict=strict)
        except DatasetError as exc:
            fail(str(exc), "--trace")
    try:
        return load_prompts(
            dataset or "synthetic:in=512,out=256",
            num_prompts or 200,
            seed,
            strict=strict,
            class_field=class_field,
            only_class=only_class,
        )
    except DatasetError as exc:
        fail(str(exc), exc.flag)


def _slo_and_sweep(
    slo: str | None, attainment: float, sweep: str | None, tolerance: float
) -> tuple[SLO | None, Sweep | None]:
    from alphagate.bench.slo import parse_slo
    from alphagate.bench.sweep import parse_sweep
    from alphagate.core.errors import ConfigError

    the_slo = the_sweep = None
    try:
        the_slo = None if slo is None else parse_slo(slo, attainment)
    except ConfigError as exc:
        config_error(exc, "--slo")
    try:
        the_sweep = None if sweep is None else parse_sweep(sweep, tolerance)
    except ConfigError as exc:
        config_error(exc, "--sweep")
    if the_sweep is not None and the_sweep.kind == "concurrency" and the_sweep.hi > 100_000:
        fail(f"{the_sweep.hi:g} is above the largest concurrency, 100,000", "--sweep")
    return the_slo, the_sweep


def _targets(
    url: str | None, baseline: str | None, candidate: str | None
) -> tuple[tuple[str, str], ...]:
    if url and (baseline or candidate):
        fail("give --url, or --baseline-url with --candidate-url", "--url")
    if url:
        return (("default", url),)
    if baseline and candidate:
        return (("baseline", baseline), ("candidate", candidate))
    fail("give --url, or both --baseline-url and --candidate-url", "--url")


def _config(
    targets: tuple[tuple[str, str], ...],
    api_key: str | None,
    header: list[str] | None,
    concurrency: str | None,
    rate: float | None,
    metrics_url: list[str] | None,
    time_scale: float | None,
    **fields: object,
) -> BenchConfig:
    from pydantic import SecretStr, ValidationError

    from alphagate.bench.config import BenchConfig, levels_for
    from alphagate.bench.secrets import auth_headers
    from alphagate.core.errors import ConfigError
    from alphagate.core.secrets import redact

    try:
        headers, clean = auth_headers(header or [], api_key, targets)
    except ConfigError as exc:
        config_error(exc)
    for m in metrics_url or []:
        if not m.startswith(("http://", "https://")):
            fail(f"{redact(m)!r} is not an http(s) URL", "--metrics-url")
    conc = int_list(concurrency, "--concurrency", 1, 100_000) if concurrency is not None else None
    try:
        return BenchConfig(
            targets=clean,
            api_key=SecretStr(api_key) if api_key else None,
            headers=headers,
            levels=() if fields.get("sweep") is not None else levels_for(conc, rate, time_scale),
            metrics_urls=tuple(metrics_url) if metrics_url else None,
            **fields,
        )
    except ValidationError as exc:
        config_error(exc)


def _run(
    cfg: BenchConfig,
    prompts: list[Prompt],
    run_id: str,
    sink: Callable[[RequestRecord], None],
    problems: list[str],
    *,
    quiet: bool,
    workers: int = 1,
    metrics_problems: list[str] | None = None,
) -> BenchResult:
    from alphagate.bench.progress import LiveStats
    from alphagate.bench.run import run_bench
    from alphagate.report.bench import progress_line

    if quiet:
        result = run_bench(
            cfg,
            prompts,
            run_id=run_id,
            sink=sink,
            dataset_problems=problems,
            workers=workers,
            metrics_problems=metrics_problems,
        )
    else:
        from rich.live import Live
        from rich.table import Table

        # a sweep's levels send different numbers of requests
        total = None if cfg.sweep is not None else len(prompts)
        stats = LiveStats(len(prompts))

        def line() -> Table:  # called by the display's thread at each refresh, not per record
            now = stats.snapshot()
            return progress_line(
                now.level,
                now.target,
                now.done,
                now.failed,
                now.tokens_per_s,
                now.p99_itl_per_token_ms,
                total,
            )

        with Live(console=console, refresh_per_second=4, transient=True, get_renderable=line):
            result = run_bench(
                cfg,
                prompts,
                run_id=run_id,
                sink=sink,
                on_record=stats.add,
                dataset_problems=problems,
                workers=workers,
                metrics_problems=metrics_problems,
            )
    for why in result.worker_failures:
        err_console.print(f"[red]bench worker: {why}[/red]")
    total, _ = result.requests
    if result.interrupted:
        err_console.print(
            f"[yellow]interrupted: the summary covers the {total} requests that completed[/yellow]"
        )
    elif result.stop_reason:
        err_console.print(f"[yellow]stopped early: {result.stop_reason}[/yellow]")
    return result


def _write_summaries(result: BenchResult, out_dir: Path) -> bool:
    """summary-RUN.json and summary.json; on a full disk, say so and keep going (the records
    written so far are whole, and the summary is still printed)."""
    from alphagate.cli._app import json_dumps

    text = json_dumps(result.payload()) + "\n"
    try:
        replace_file(out_dir / f"summary-{result.run_id}.json", text)
        replace_file(out_dir / "summary.json", text)
    except OSError as exc:
        err_console.print(
            f"[red]cannot write the summary in {out_dir}: {exc.strerror or exc}[/red]"
        )
        return False
    return True


def _write_csv(result: BenchResult, records: list[RequestRecord], out_dir: Path) -> bool:
    """requests.csv and levels.csv of this run (atomically, as summary.json)."""
    from alphagate.bench.export import level_rows, request_rows, to_csv

    try:
        replace_file(out_dir / "requests.csv", to_csv(request_rows(records, result.slo)))
        replace_file(out_dir / "levels.csv", to_csv(level_rows(result)))
    except OSError as exc:
        err_console.print(
            f"[red]cannot write the CSV files in {out_dir}: {exc.strerror or exc}[/red]"
        )
        return False
    return True


def _plots(result: BenchResult, folder: Path, records: list[RequestRecord], *, quiet: bool) -> None:
    from alphagate.report.bench_plots import bench_figures
    from alphagate.report.charts import bench_charts
    from alphagate.report.plots import draw, figure_png

    figures = {f"{c.key}.png": draw(c) for c in bench_charts(result, records)}
    figures.update(bench_figures(result))
    if not figures:
        err_console.print("[yellow]--plot: nothing to draw (no request completed)[/yellow]")
        return
    for name, fig in figures.items():
        path = folder / name
        try:
            folder.mkdir(parents=True, exist_ok=True)
            path.write_bytes(figure_png(fig))
        except OSError as exc:
            fail(f"cannot write {path}: {exc.strerror or exc}", "--plot")
        if not quiet:
            err_console.print(f"plot: {path}")


def _exit_code(result: BenchResult, max_error_rate: float) -> int:
    if result.interrupted:
        return 130
    why = result.failure(max_error_rate)
    if why is not None:
        err_console.print(f"[red]{why}[/red]")
        return 1
    return 0
