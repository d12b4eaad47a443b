"""``alphagate bench``: benchmark an OpenAI-compatible endpoint, or baseline vs candidate.

Exit codes: 0 done; 1 every request failed, the error rate exceeded ``--max-error-rate``, or the
records could not be written; 2 bad input; 130 interrupted (Ctrl-C or SIGTERM — the summary is
still written from every completed record).
"""

from __future__ import annotations

import os
import time
import uuid
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
from alphagate.cli._options import SeedOpt, check_output_path

if TYPE_CHECKING:
    from alphagate.bench.dataset import Prompt
    from alphagate.bench.records import BenchResult, RequestRecord
    from alphagate.bench.runner import BenchConfig

_OUT_HELP = (
    "Folder for requests.jsonl and summary.json (default results/bench-TIME). A re-run into the "
    "same folder appends its records under a new run id; summary.json describes the newest run and "
    "summary-RUN_ID.json keeps each run's own."
)


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
        str,
        typer.Option(
            "--dataset",
            "--dataset-path",
            help="ShareGPT .json, .jsonl (prompt|messages, class, max_tokens) or synthetic:in=N,out=M.",
        ),
    ] = "synthetic:in=512,out=256",
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
    num_prompts: Annotated[int, typer.Option("--num-prompts", "-n", min=1, max=10_000_000)] = 200,
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
        bool, typer.Option("--strict", help="A malformed dataset line is fatal.")
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
    with every completed record kept and summary.json written (marked interrupted).
    """
    from alphagate.bench.dataset import DatasetError, load_prompts

    if os.environ.get("ALPHAGATE_API_KEY") == "" and api_key is None:
        fail("ALPHAGATE_API_KEY is set but empty; unset it to send no key", "--api-key")

    if dataset_name == "random":
        dataset = f"synthetic:in={random_input_len},out={random_output_len}"
    if warmup >= num_prompts:
        fail(f"--warmup {warmup} leaves no request of the {num_prompts} to measure", "--warmup")
    out_dir = out or Path("results") / time.strftime("bench-%Y%m%d-%H%M%S")
    check_output_path(out_dir, "--out", directory=True)
    try:
        prompts, problems = load_prompts(dataset, num_prompts, seed, strict=strict)
    except DatasetError as exc:
        fail(str(exc), "--dataset")
    cfg = _config(
        _targets(url, baseline_url, candidate_url),
        api_key,
        header,
        concurrency,
        rate,
        metrics_url,
        endpoint=endpoint,
        model=model,
        num_prompts=num_prompts,
        duration_s=duration,
        burstiness=burstiness,
        warmup=warmup,
        seed=seed,
        timeout_s=timeout,
        scrape_metrics=not no_metrics,
        max_errors=max_errors,
        max_error_rate=max_error_rate,
        max_duration_s=max_duration,
    )
    run_id = time.strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6]
    records = RecordsFile(out_dir / "requests.jsonl", "--out")
    for note in records.notes:
        err_console.print(f"[yellow]{note}[/yellow]")
    if not as_json:
        for p in problems:
            err_console.print(f"[yellow]skipped:[/yellow] {p}")
    with records, sigterm_as_interrupt():
        result = _run(cfg, prompts, run_id, records, problems, quiet=as_json)
    result = result.model_copy(update={"records_file": str(records.path)})
    written = _write_summaries(result, out_dir)
    if as_json:
        print_json(result.payload())
    else:
        from alphagate.report.bench import render_bench

        console.print(render_bench(result))
        console.print(
            f"records: {records.path}   summary: {out_dir / 'summary.json'}   run: {run_id}"
        )
    raise typer.Exit(_exit_code(result, max_error_rate) or (0 if written else 1))


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
    **fields: object,
) -> BenchConfig:
    from pydantic import SecretStr, ValidationError

    from alphagate.bench.runner import BenchConfig, levels_for
    from alphagate.bench.secrets import auth_headers
    from alphagate.core.errors import ConfigError

    try:
        headers, clean = auth_headers(header or [], api_key, targets)
    except ConfigError as exc:
        flag = (
            "--header"
            if "NAME:VALUE" in str(exc)
            else "--api-key"
            if "key" in str(exc)
            else "--url"
        )
        config_error(exc, flag)
    for m in metrics_url or []:
        if not m.startswith(("http://", "https://")):
            fail(f"{m!r} is not an http(s) URL", "--metrics-url")
    conc = int_list(concurrency, "--concurrency", 1, 100_000) if concurrency else None
    try:
        return BenchConfig(
            targets=clean,
            api_key=SecretStr(api_key) if api_key else None,
            headers=headers,
            levels=levels_for(conc, rate),
            metrics_urls=tuple(metrics_url) if metrics_url else None,
            **fields,
        )
    except ValidationError as exc:
        config_error(exc)


def _run(
    cfg: BenchConfig,
    prompts: list[Prompt],
    run_id: str,
    records: RecordsFile,
    problems: list[str],
    *,
    quiet: bool,
) -> BenchResult:
    from alphagate.bench.progress import LiveStats
    from alphagate.bench.run import run_bench
    from alphagate.report.bench import progress_line

    if quiet:
        result = run_bench(
            cfg, prompts, run_id=run_id, sink=records.append, dataset_problems=problems
        )
    else:
        from rich.live import Live

        stats = LiveStats(len(prompts))
        with Live(console=console, refresh_per_second=4, transient=True) as live:

            def on_record(rec: RequestRecord) -> None:
                stats.add(rec)
                live.update(
                    progress_line(
                        stats.level,
                        stats.target,
                        stats.done,
                        stats.failed,
                        stats.tokens_per_s,
                        stats.p99_itl_per_token_ms,
                        len(prompts),
                    ),
                    refresh=False,
                )

            result = run_bench(
                cfg,
                prompts,
                run_id=run_id,
                sink=records.append,
                on_record=on_record,
                dataset_problems=problems,
            )
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


def _exit_code(result: BenchResult, max_error_rate: float) -> int:
    if result.interrupted:
        return 130
    why = result.failure(max_error_rate)
    if why is not None:
        err_console.print(f"[red]{why}[/red]")
        return 1
    return 0
