"""``alphagate bench``: benchmark an OpenAI-compatible endpoint, or baseline vs candidate.

Exit codes: 0 done (a sweep whose SLO breaks is a result, not an error); 1 every request failed,
the error rate exceeded ``--max-error-rate``, or the records could not be written; 2 bad input
(also after a run whose ``/metrics`` counters no decoder could produce: the records and summary
are kept, that acceptance left out); 130 interrupted (Ctrl-C, SIGTERM or SIGHUP — the summary
is still written from every completed record; Ctrl-C while the command is still starting exits
130 too, with nothing to keep).

The rules of a run (one load shape, the targets, the largest sweep, a replay's length, the
workers that have work) are :mod:`alphagate.bench.config`'s, which the Python API shares.
"""

from __future__ import annotations

import sys

try:  # ~0.2 s of imports: a Ctrl-C that lands here has nothing to keep, and gets no traceback
    import time
    import uuid
    from typing import TYPE_CHECKING, Annotated

    import typer

    from alphagate.cli._app import JsonOpt, app, err_console
    from alphagate.cli._check import bounded, flag_errors
    from alphagate.cli._groups import takes_groups
    from alphagate.cli._options import SeedOpt
    from alphagate.cli.bench._load import LoadFlags
    from alphagate.cli.bench._output import OutputFlags, exit_code
    from alphagate.cli.bench._prompts import PromptFlags
    from alphagate.cli.bench._run import run
    from alphagate.cli.bench._target import LimitFlags, TargetFlags
except KeyboardInterrupt:  # pragma: no cover - timing; tests/cli/test_signals.py sends it
    sys.stderr.write("interrupted\n")
    raise SystemExit(130) from None

if TYPE_CHECKING:
    from alphagate.bench.config import BenchConfig
    from alphagate.bench.dataset import Prompt

__all__ = ["bench_cmd"]

_WORKERS_HELP = (
    "Send the load from N worker processes, each with its own event loop and HTTP session, so "
    "that the chunks of one engine step are read by N loops (thousands of streams; use at most "
    "one per free core). Open-loop arrivals are drawn once and dealt round-robin; a closed "
    "loop's concurrency is divided. One requests.jsonl, one summary, one display; a worker that "
    "dies is reported (exit 1) and its completed records are kept."
)


@app.command("bench", short_help="Benchmark one endpoint, or baseline vs candidate.")
@takes_groups
def bench_cmd(
    target: TargetFlags = TargetFlags(),
    prompts_from: PromptFlags = PromptFlags(),
    load: LoadFlags = LoadFlags(),
    limits: LimitFlags = LimitFlags(),
    output: OutputFlags = OutputFlags(),
    temperature: Annotated[
        float,
        bounded(
            "--temperature",
            lo=0.0,
            hi=2.0,
            help="Sampling temperature sent with every request (acceptance depends on it).",
        ),
    ] = 0.0,
    seed: SeedOpt = 0,
    workers: Annotated[int, typer.Option("--workers", min=1, max=256, help=_WORKERS_HELP)] = 1,
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
    as_json: JsonOpt = False,
) -> None:
    """Benchmark an OpenAI-compatible endpoint (vLLM, SGLang, the twin) — or baseline vs candidate.

    Each finished request is appended to requests.jsonl at once; Ctrl-C or SIGTERM ends the run
    with every completed record kept and summary.json written (marked interrupted). With --slo,
    goodput per level; with --sweep, each target's knee; with --trace, production arrivals.
    """
    from alphagate.bench.config import check_warmup

    target.check_environment()
    as_json = output.as_json(as_json)
    _check_load_shape(prompts_from, load)
    slo, sweep = load.slo_and_sweep()
    out_dir = output.folder(prompts_from)
    prompts, problems = prompts_from.load(load.num_prompts, seed)
    with flag_errors():
        check_warmup(load.warmup, len(prompts))
    prompts_from.check_replay(prompts, (limits.max_duration, load.duration), quiet=as_json)
    cfg = _config(
        target, prompts_from, load, limits, prompts,
        seed=seed, temperature=temperature, save_text=save_text, probe_send_time=probe_send_time,
        slo=slo, sweep=sweep,
    )  # fmt: skip
    done = run(
        cfg,
        prompts,
        run_id=time.strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6],
        out_dir=out_dir,
        problems=problems,
        keep=output.keeps_records,
        quiet=output.fmt != "table" or output.no_progress,
        workers=_workers(workers, cfg, len(prompts), quiet=as_json),
    )
    written = output.write(done.result, done.records, out_dir)
    output.show(done.result, out_dir, as_json=as_json)
    for why in done.metrics_problems:
        flag = (
            "--metrics-url"
            if target.metrics_url
            else "the target's /metrics (--no-metrics skips it)"
        )
        err_console.print(f"[red]{flag}: {why}[/red]")
    raise typer.Exit(
        exit_code(
            done.result,
            limits.max_error_rate,
            written=written,
            bad_source=bool(done.metrics_problems),
        )
    )


def _check_load_shape(prompts: PromptFlags, load: LoadFlags) -> None:
    """One load shape per run (:func:`alphagate.bench.config.check_load_shape`)."""
    from alphagate.bench.config import check_load_shape

    with flag_errors():
        check_load_shape(
            trace=prompts.trace is not None,
            dataset=prompts.source is not None,
            rate=load.rate is not None,
            sweep=load.sweep is not None,
            concurrency=load.concurrency is not None,
            slo=load.slo is not None,
        )


def _config(
    target: TargetFlags,
    prompts_from: PromptFlags,
    load: LoadFlags,
    limits: LimitFlags,
    prompts: list[Prompt],
    **fields: object,
) -> BenchConfig:
    """The run's config from its option groups (``fields``: the verb's own options, the SLO
    and the sweep)."""
    from alphagate.bench.config import BenchConfig

    targets = target.config_fields()
    time_scale = prompts_from.time_scale if prompts_from.trace is not None else None
    levels = load.levels(time_scale, swept=fields["sweep"] is not None)
    with flag_errors():
        return BenchConfig(
            **targets,
            **limits.config_fields(),
            **load.config_fields(),
            levels=levels,
            num_prompts=len(prompts),
            dataset=prompts_from.recorded_dataset,
            only_class=prompts_from.only_class,
            **fields,
        )


def _workers(workers: int, cfg: BenchConfig, n_requests: int, *, quiet: bool) -> int:
    """The worker processes that have work (:func:`alphagate.bench.config.useful_workers`);
    fewer than asked for are started, and said."""
    from alphagate.bench.config import useful_workers

    useful, why = useful_workers(workers, cfg, n_requests)
    if useful < workers and not quiet:
        err_console.print(
            f"[yellow]--workers {workers}: only {useful} would have work ({why}); starting "
            f"{useful}[/yellow]"
        )
    return useful
