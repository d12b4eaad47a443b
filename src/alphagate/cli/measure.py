"""``alphagate measure``: acceptance (α, ρ, τ with 95% intervals) from running servers, a
Prometheus server, server logs, or offline from request logs and the models. Exit codes: 0 measured; 2 bad input or an unreachable or
wrong source; 3 the source works but has not seen enough drafts yet; 130 interrupted."""

from __future__ import annotations

import time
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
    json_dumps,
    print_json,
)
from alphagate.cli._files import atomic_write_text, sigterm_as_interrupt
from alphagate.cli._options import check_no_overwrite, check_output_path

if TYPE_CHECKING:
    from alphagate.measure.offline.config import OfflineConfig
    from alphagate.measure.results import MeasureResult

measure_app = typer.Typer(
    help="Measure acceptance: from live /metrics, a Prometheus server, server logs, or offline "
    "from request logs with the target and a candidate drafter. Every "
    "source writes the same results JSON (alphagate.results/v1), which `plan --alpha-from` and "
    "`gate --measure` read.",
    no_args_is_help=True,
)
app.add_typer(
    measure_app, name="measure", short_help="α, ρ, τ from servers, Prometheus, logs or offline."
)

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
    (or SIGTERM) ends the window early: it is printed and written, and the exit code is 130
    (before the first scrapes completed there is no window: nothing is written). Credentials in
    a URL are sent as an Authorization header, and every URL shown or written is redacted; two
    URLs of one replica (127.0.0.1 and localhost) are refused.
    """
    from pydantic import ValidationError

    from alphagate.measure.live import LiveConfig, measure_live
    from alphagate.measure.results import MeasureError

    if out is not None:
        check_output_path(out, "--out", directory=False)
    check_no_overwrite([(out, "--out", False)], from_files or [])
    if bool(urls) == bool(from_files):
        fail("give --url (live servers) or --from-file (saved scrapes), not both", "--url")
    if from_files:
        from alphagate.measure.live import measure_scrape_files

        try:
            saved = measure_scrape_files(from_files, model_name=model_name, engine=engine, k=k)
        except MeasureError as exc:
            _measure_error(exc)
        _finish(saved, as_json, out, min_drafts)
        return
    from alphagate.core.secrets import redact

    urls = urls or []
    for u in urls:
        if not u.startswith(("http://", "https://")):
            fail(f"{redact(u)!r} is not an http(s) URL", "--url")
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
            err_console.print(
                "[yellow]interrupted before the first scrapes completed: no window was measured, "
                "nothing written[/yellow]"
            )
            raise typer.Exit(130) from None
        err_console.print("[yellow]interrupted: the window so far[/yellow]")
        _finish(last["r"], as_json, out)
        raise typer.Exit(130) from None
    gauge_only = (
        result.overall is not None
        and result.overall.num_drafts == 0
        and any("SGLang" in n for n in result.notes)
    )
    _finish(result, as_json, out, None if gauge_only else min_drafts)


@measure_app.command("bench", short_help="Acceptance per class from a bench run's records.")
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
    out: OutOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Acceptance a bench run measured: per traffic class from the server's per-request counts
    (vLLM --per-request-spec-decode-metrics), cluster-robust over requests; else the server's
    counters for all traffic (or for the one class a run sent)."""
    from alphagate.bench.acceptance import measure_bench
    from alphagate.core.errors import ConfigError

    if out is not None:
        check_output_path(out, "--out", directory=False)
    check_no_overwrite([(out, "--out", False)], [summary])
    try:
        result = measure_bench(summary)
    except ConfigError as exc:
        _measure_error(exc)
    _finish(result, as_json, out, min_drafts)


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

    from alphagate.core.secrets import redact
    from alphagate.measure.prometheus import PrometheusQuery, measure_prometheus, parse_duration
    from alphagate.measure.results import MeasureError

    if out is not None:
        check_output_path(out, "--out", directory=False)
    if not url.startswith(("http://", "https://")):
        fail(f"{redact(url)!r} is not an http(s) URL", "--url")
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
    _finish(result, as_json, out)


@measure_app.command("logs", short_help="Acceptance from vLLM's SpecDecoding log lines.")
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
    out: OutOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Sum vLLM's periodic 'SpecDecoding metrics' lines over a window; without them, SGLang's
    logged /generate responses (meta_info) or its 'Decode batch … accept len' lines."""
    from alphagate.measure.logs import measure_logs, parse_when, read_lines
    from alphagate.measure.prometheus import parse_duration
    from alphagate.measure.results import MeasureError

    if out is not None:
        check_output_path(out, "--out", directory=False)
    check_no_overwrite([(out, "--out", False)], [Path(f) for f in files if f != "-"])
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
        _measure_error(exc)
    except OSError as exc:
        fail(f"cannot read {exc.filename or 'the log'}: {exc.strerror or exc}", "FILES")
    _finish(result, as_json, out)


@measure_app.command("offline", short_help="α of a candidate drafter on logged traffic.")
def offline(
    logs: Annotated[
        list[Path],
        typer.Option(
            "--log",
            help="Request log: `bench --save-text` requests.jsonl, OpenAI request/response "
            "JSONL, messages JSONL or ShareGPT JSON. Repeat for several files.",
        ),
    ],
    target: Annotated[
        str, typer.Option("--target", help="The target model: a local directory or cached id.")
    ],
    drafter: Annotated[
        str,
        typer.Option(
            "--drafter",
            help="ngram, ngram:MIN:MAX (prompt lookup window), draft_model:PATH or eagle3:PATH "
            "(a head in vLLM's LlamaForCausalLMEagle3 format).",
        ),
    ],
    k: Annotated[int, typer.Option("--k", min=1, max=32, help="Draft tokens per step.")] = 3,
    k_max: Annotated[
        int | None,
        typer.Option("--k-max", min=1, max=32, help="Also every K up to this (one pass)."),
    ] = None,
    class_field: Annotated[
        str | None,
        typer.Option("--class-field", help="Class from this field (dotted path, e.g. meta.cls)."),
    ] = None,
    class_rule: Annotated[
        list[str] | None,
        typer.Option(
            "--class-rule",
            help="NAME=REGEX over the prompt text; first match wins, else 'other'. Repeat.",
        ),
    ] = None,
    temperature: Annotated[
        float,
        typer.Option(
            "--temperature",
            callback=finite_float("--temperature", 0.0, 2.0),
            help="The engine's temperature (0: greedy, exact).",
        ),
    ] = 0.0,
    top_p: Annotated[
        float, typer.Option("--top-p", callback=finite_float("--top-p", 1e-6, 1.0))
    ] = 1.0,
    top_k: Annotated[int, typer.Option("--top-k", min=0, help="0: off.")] = 0,
    draft_sampling: Annotated[
        Literal["greedy", "probabilistic"],
        typer.Option(
            "--draft-sampling",
            help="vLLM's draft_sample_method: greedy (its default) or probabilistic.",
        ),
    ] = "greedy",
    sample_n: Annotated[
        int | None,
        typer.Option("--sample", min=1, help="Use a seeded subset of N requests."),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seeds --sample, sampling, bootstrap.")] = 0,
    regenerate: Annotated[
        bool,
        typer.Option(
            "--regenerate",
            help="Replace each logged output with the target's own continuation (exact when the "
            "log is not the target's trajectory).",
        ),
    ] = False,
    tokenizer: Annotated[
        str | None, typer.Option("--tokenizer", help="Tokenizer (default: the target's).")
    ] = None,
    device: Annotated[str, typer.Option("--device", help="auto, cpu, cuda, cuda:1 …")] = "auto",
    dtype: Annotated[
        Literal["auto", "float32", "bfloat16", "float16"],
        typer.Option("--dtype", help="auto: float32 on CPU, bfloat16 on GPU."),
    ] = "auto",
    max_model_len: Annotated[
        int | None,
        typer.Option("--max-model-len", min=8, help="The server's context limit."),
    ] = None,
    threads: Annotated[
        int | None,
        typer.Option("--threads", min=1, help="CPU threads for torch (default: torch's)."),
    ] = None,
    checkpoint: Annotated[
        Path | None,
        typer.Option("--checkpoint", help="Append each scored request here; resume from it."),
    ] = None,
    ray: Annotated[
        str | None,
        typer.Option(
            "--ray",
            metavar="local|ADDRESS",
            help="Score on Ray actors: `local` starts a Ray instance here for this run; an "
            "address (HOST:PORT of `ray start --head`) joins that cluster. "
            "Same numbers as without. Needs alphagate[ray].",
        ),
    ] = None,
    ray_workers: Annotated[
        int | None,
        typer.Option(
            "--ray-workers", min=1, help="Ray actors (default: one per GPU, else per CPU)."
        ),
    ] = None,
    no_progress: Annotated[bool, typer.Option("--no-progress", help="No progress bar.")] = False,
    out: OutOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Replay logged requests through the target and a candidate drafter: vLLM's acceptance
    counters (ρ, τ, α by position, acceptance lengths) per class, with 95% bootstrap intervals.

    Greedy (temperature 0) is exact on logs the target wrote at temperature 0: one
    teacher-forced target pass per request, then every engine step is replayed. With
    --temperature the log must be a sample of the target at those settings (--regenerate draws
    one). Models load from local paths or the local Hugging Face cache only. The results JSON is
    what `plan --alpha-from` and `gate --measure` read. With --ray the requests are shared out
    to Ray actors (each loads the models once) on this machine or a cluster. Exit codes: 0
    measured, 2 bad input.
    """
    from pydantic import ValidationError

    from alphagate.measure.offline.config import OfflineConfig, parse_drafter
    from alphagate.measure.offline.run import measure_offline
    from alphagate.measure.results import MeasureError
    from alphagate.report.offline import render_offline
    from alphagate.report.reasons import with_offline_notes

    if out is not None:
        check_output_path(out, "--out", directory=False)
    if checkpoint is not None:
        check_output_path(checkpoint, "--checkpoint", directory=False)
    check_no_overwrite([(out, "--out", False), (checkpoint, "--checkpoint", False)], logs)
    if out is not None and checkpoint is not None and out.resolve() == checkpoint.resolve():
        fail(f"{out} is also the --checkpoint: give the results another file", "--out")
    try:
        cfg = OfflineConfig(
            logs=tuple(logs),
            target=target,
            tokenizer=tokenizer,
            k=k,
            k_max=k_max,
            class_field=class_field,
            class_rules=tuple(class_rule or ()),
            temperature=temperature,
            top_p=top_p,
            top_k=top_k,
            draft_sampling=draft_sampling,
            sample=sample_n,
            seed=seed,
            regenerate=regenerate,
            device=device,
            dtype=dtype,
            max_model_len=max_model_len,
            threads=threads,
            checkpoint=checkpoint,
            ray=ray,
            ray_workers=ray_workers,
            **parse_drafter(drafter),
        )
    except MeasureError as exc:
        fail(str(exc), "--drafter")
    except ValidationError as exc:
        config_error(exc)
    try:
        with sigterm_as_interrupt():
            if as_json or no_progress:
                result = measure_offline(cfg)
            else:
                result = _with_progress(cfg, measure_offline)
    except MeasureError as exc:
        _measure_error(exc)
    except KeyboardInterrupt:
        hint = f"; run again with --checkpoint {checkpoint} to resume" if checkpoint else ""
        err_console.print(f"[yellow]interrupted{hint}[/yellow]")
        raise typer.Exit(130) from None
    result = with_offline_notes(result)
    if out is not None:
        atomic_write_text(out, json_dumps(result.payload()) + "\n", "--out")
    if as_json:
        print_json(result.payload())
        return
    console.print(render_offline(result))
    if out is not None:
        console.print(f"results written to {out}")


def _with_progress(cfg: OfflineConfig, run: Callable[..., MeasureResult]) -> MeasureResult:
    """``run(cfg)`` under a progress bar with the requests done, tokens per second and an ETA."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    with Progress(
        TextColumn("scoring requests"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=err_console,
        transient=True,
    ) as bar:
        task = bar.add_task("score", total=None, rate="")
        t0 = time.perf_counter()

        def tick(done: int, total: int, tokens: int) -> None:
            rate = tokens / max(time.perf_counter() - t0, 1e-9)
            bar.update(task, completed=done, total=total, rate=f"{rate:,.0f} tok/s")

        return run(cfg, on_progress=tick)
