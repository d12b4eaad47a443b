"""``alphagate calibrate``: fit the step-time model's coefficients to your own server.

Exit codes: 0 a usable profile written; 1 a profile written but marked unusable (the fit
explains too little; it says why); 2 bad input, a server that fails or answers nonsense;
130 interrupted (the levels that completed are kept: a profile marked partial, and their records
under ``--bench-out``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import RenderableType

from alphagate.cli._app import (
    JsonOpt,
    app,
    config_error,
    console,
    err_console,
    fail,
    finite_float,
    int_list,
    json_dumps,
    show,
    status,
)
from alphagate.cli._files import atomic_write_text, sigterm_as_interrupt
from alphagate.cli._groups import takes_groups
from alphagate.cli._options import (
    CostFlags,
    CudagraphOpt,
    DeploymentFlags,
    DraftTpOpt,
    SeedOpt,
    check_no_overwrite,
    check_output_path,
)

if TYPE_CHECKING:
    from alphagate.calibrate.observations import Observation
    from alphagate.calibrate.sweep import LiveSweep, SweepRun
    from alphagate.specs.calibration import CalibrationProfile
    from alphagate.specs.deployment import DeploymentConfig


@app.command("calibrate", short_help="Fit the step-time model to your own server.")
@takes_groups
def calibrate_cmd(
    results: Annotated[
        list[Path] | None,
        typer.Argument(
            metavar="RESULTS",
            help="Saved measurements: alphagate bench results (a summary.json, or its folder, "
            "with its requests.jsonl), vllm bench serve --save-result JSON files, or a vllm "
            "bench sweep serve output folder (every run=N.json under it).",
            show_default=False,
        ),
    ] = None,
    url: Annotated[
        list[str] | None,
        typer.Option(
            "--url",
            help="Measure a live OpenAI-compatible server (repeat: one per configuration, e.g. a "
            "baseline and a speculative server). K and α by position come from its /metrics.",
        ),
    ] = None,
    metrics_url: Annotated[
        list[str] | None,
        typer.Option("--metrics-url", help="Each --url's metrics endpoint (default URL/metrics)."),
    ] = None,
    served_model: Annotated[
        str | None,
        typer.Option("--served-model", help="Model name to send (default: the server's first)."),
    ] = None,
    api_key: Annotated[
        str | None,
        typer.Option(
            "--api-key",
            envvar="ALPHAGATE_API_KEY",
            help="Bearer key for --url (or $ALPHAGATE_API_KEY, as bench and twin read it).",
        ),
    ] = None,
    concurrency: Annotated[
        str,
        typer.Option("--concurrency", "-c", help="Closed-loop levels of the live sweep."),
    ] = "1,4,16",
    requests_per_user: Annotated[
        int,
        typer.Option(
            "--requests-per-user", min=1, max=10_000, help="Requests per user at every level."
        ),
    ] = 8,
    prompt_tokens: Annotated[
        int, typer.Option("--prompt-tokens", min=1, max=1_000_000, help="Prompt words per request.")
    ] = 512,
    output_tokens: Annotated[
        int,
        typer.Option(
            "--output-tokens", min=2, max=1_000_000, help="Tokens per request (ignore_eos)."
        ),
    ] = 128,
    dataset: Annotated[
        str | None,
        typer.Option(
            "--dataset",
            help="Prompts for the live levels (JSONL or ShareGPT, as alphagate bench reads); "
            "default: --prompt-tokens synthetic words. Acceptance depends on the prompts.",
        ),
    ] = None,
    prefill_probe: Annotated[
        int,
        typer.Option(
            "--prefill-probe-tokens",
            min=0,
            max=1_000_000,
            help="Words in the prompts of the prefill probe (8 requests at concurrency 1 whose "
            "TTFT is one long prefill; 0 = none).",
        ),
    ] = 2048,
    deploy: DeploymentFlags = DeploymentFlags(),
    draft_tp: DraftTpOpt = None,
    cudagraph_max_tokens: CudagraphOpt = None,
    time_scale: Annotated[
        float,
        typer.Option(
            "--time-scale",
            callback=finite_float("--time-scale", 1e-6, 1e6),
            help="Wall seconds per server second (an alphagate twin run at --time-scale); the "
            "measured times are divided by it.",
        ),
    ] = 1.0,
    seed: SeedOpt = 0,
    timeout: Annotated[
        float | None,
        typer.Option(
            "--timeout",
            callback=finite_float("--timeout", 0.01, 86_400.0),
            help="Seconds one request of the live sweep may take, and the limit of a connect or "
            "a /metrics read (default: 30 + 0.25 per output token).",
        ),
    ] = None,
    out: Annotated[
        Path,
        typer.Option("--out", "-o", help="Where to write the calibration profile (JSON)."),
    ] = Path("calibration.json"),
    bench_out: Annotated[
        Path | None,
        typer.Option(
            "--bench-out",
            help="Also keep the live sweep's measurements here, one alphagate bench result "
            "folder per --url (calibrate can re-fit from them).",
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Fit the coefficients of the step-time model (the time scales of the target's and the
    drafter's modelled GPU time, and the host costs per step, sequence, token and draft forward)
    to measured levels of your server, and write a calibration profile that `simulate`, `plan`
    and `twin` take with --calibration.

    Give the deployment the server runs (--model, --gpu, --tp, --dtype, --method, --draft): the
    terms are computed for it. A level's mean engine step is its requests' decode time (first
    to last token) over their decode steps (tokens after the first; with speculation, vLLM's
    drafts, one per sequence per step); its mean TTFT at concurrency 1 prices the prefill. A live sweep (--url)
    sends requests_per_user × C requests of --prompt-tokens words and --output-tokens tokens at
    every concurrency: about requests_per_user × output_tokens engine steps per level.

    Exit codes: 0 a usable profile; 1 the profile is written but marked unusable (the fit
    explains too little: its RMS residual is too large, or the data moved no coefficient off
    its prior); 2 bad input or a failing server; 130 interrupted (the completed levels are
    fitted into a profile marked partial, and their records kept under --bench-out).
    """
    from pydantic import SecretStr

    from alphagate.calibrate.sweep import SweepInterrupted

    if not results and not url:
        fail("give saved results (FILE …) or a live server (--url)", "--url")
    check_output_path(out, "--out", directory=False)
    if bench_out is not None:
        check_output_path(bench_out, "--bench-out", directory=True)
    check_no_overwrite([(out, "--out", False), (bench_out, "--bench-out", True)], results or [])
    dep = CostFlags(draft_tp=draft_tp, cudagraph_max_tokens=cudagraph_max_tokens).apply(
        deploy.config()
    )
    observations = _saved(results or [])
    partial = False
    if url:
        try:
            with sigterm_as_interrupt():  # SIGTERM as Ctrl-C: what completed is kept
                observations += _live(
                    url,
                    metrics_url,
                    served_model,
                    SecretStr(api_key) if api_key else None,
                    int_list(concurrency, "--concurrency", 1, 65_536),
                    requests_per_user,
                    prompt_tokens,
                    output_tokens,
                    dataset,
                    prefill_probe or None,
                    seed,
                    timeout,
                    bench_out,
                    as_json,
                )
        except SweepInterrupted as stop:
            observations += stop.observations
            partial = True
            if not stop.observations:
                err_console.print(
                    "[yellow]interrupted before a level completed: no profile written[/yellow]"
                )
                raise typer.Exit(130) from None
    _fit_and_write(dep, observations, time_scale, seed, out, as_json, partial)


def _fit_and_write(
    dep: DeploymentConfig,
    observations: list[Observation],
    time_scale: float,
    seed: int,
    out: Path,
    as_json: bool,
    partial: bool,
) -> None:
    """Fit, write the profile (usable or not: it shows why) and exit 1 when it is unusable,
    130 when the sweep was interrupted."""
    from pydantic import ValidationError

    from alphagate.calibrate.fit import fit_profile
    from alphagate.core.errors import ConfigError

    try:
        with status("fitting…", as_json):
            profile = fit_profile(
                dep, observations, time_scale=time_scale, seed=seed, partial=partial
            )
    except KeyboardInterrupt:
        err_console.print("[yellow]interrupted while fitting: no profile written[/yellow]")
        raise typer.Exit(130) from None
    except (ConfigError, ValidationError) as exc:
        if partial:
            err_console.print(
                f"[yellow]interrupted; the completed levels do not make a profile: {exc}[/yellow]"
            )
            raise typer.Exit(130) from None
        if isinstance(exc, ConfigError):
            config_error(exc, "--model/--gpu/--tp/--dtype")
        config_error(exc)
    atomic_write_text(out, json_dumps(profile.payload()) + "\n", "--out")
    show("calibrate", profile, as_json, _render)
    if not as_json:
        console.print(
            f"profile written to {out} (alphagate simulate|plan|twin --calibration {out})"
        )
    if partial:
        err_console.print(
            f"[yellow]interrupted: {out} is a partial profile, fitted on the "
            f"{len(observations)} levels that completed[/yellow]"
        )
    if not profile.usable:
        err_console.print(
            f"[red]the profile is unusable: {profile.unusable_reason}; simulate, plan and twin "
            "refuse it[/red]"
        )
    if partial:
        raise typer.Exit(130)
    if not profile.usable:
        raise typer.Exit(1)


def _saved(paths: list[Path]) -> list[Observation]:
    from alphagate.calibrate.observations import read_observations
    from alphagate.core.errors import ConfigError

    out: list[Observation] = []
    for p in paths:
        try:
            out += read_observations(p)
        except ConfigError as exc:
            fail(str(exc), "RESULTS")
    return out


def _live(
    urls: list[str],
    metrics_urls: list[str] | None,
    served_model: str | None,
    api_key: object,
    concurrencies: list[int],
    requests_per_user: int,
    prompt_tokens: int,
    output_tokens: int,
    dataset: str | None,
    prefill_probe: int | None,
    seed: int,
    timeout: float | None,
    bench_out: Path | None,
    quiet: bool,
) -> list[Observation]:
    """The live sweep's observations; its records kept under ``bench_out`` (those of the
    completed levels when it is interrupted: :class:`SweepInterrupted` is raised again)."""
    from pydantic import ValidationError

    from alphagate.calibrate.sweep import LiveSweep, SweepInterrupted, run_live_sweep
    from alphagate.core.errors import ConfigError

    try:
        sweep = LiveSweep(
            urls=tuple(urls),
            metrics_urls=tuple(metrics_urls) if metrics_urls else None,
            model=served_model,
            api_key=api_key,
            concurrencies=tuple(concurrencies),
            requests_per_user=requests_per_user,
            prompt_tokens=prompt_tokens,
            output_tokens=output_tokens,
            dataset=dataset,
            prefill_probe_tokens=prefill_probe,
            seed=seed,
            timeout_s=timeout,
        )
        warnings = sweep.warnings()
    except ValidationError as exc:
        config_error(exc, "--url")
    except ConfigError as exc:
        fail(str(exc), "--url")
    for why in warnings:
        err_console.print(f"[yellow]warning: {why}[/yellow]", markup=True, highlight=False)
    with status("calibrating…", quiet) as spin:
        progress = _Progress(sweep, spin)
        try:
            observations, runs = run_live_sweep(
                sweep, on_level=progress.level, on_record=progress.record
            )
        except ConfigError as exc:
            fail(str(exc), "--url")
        except SweepInterrupted as stop:
            if bench_out is not None and stop.runs:
                _keep(stop.runs, bench_out)
            raise
    if bench_out is not None:
        _keep(runs, bench_out)
    return observations


class _Progress:
    """The spinner's line: server, level and requests done of the level's."""

    def __init__(self, sweep: LiveSweep, spin: object) -> None:
        self.sweep, self.spin = sweep, spin
        self.url = self.label = ""
        self.done = 0

    def level(self, url: str, label: str) -> None:
        self.url, self.label, self.done = url, label, 0

    def record(self, _: object) -> None:
        self.done += 1
        update = getattr(self.spin, "update", None)
        if update is None:
            return
        of = self.sweep.requests(int(self.label[1:])) if self.label.startswith("c") else 2
        update(f"calibrating {self.url}: level {self.label}, {self.done}/{of} requests")


def _keep(runs: list[SweepRun], folder: Path) -> None:
    """Each server's run as an alphagate bench result folder (summary.json + requests.jsonl)."""
    for i, run in enumerate(runs):
        sub = folder / f"server-{i}"
        lines = "".join(r.model_dump_json() + "\n" for r in run.records)
        atomic_write_text(sub / "requests.jsonl", lines, "--bench-out")
        result = run.result.model_copy(update={"records_file": "requests.jsonl"})
        atomic_write_text(sub / "summary.json", json_dumps(result.payload()) + "\n", "--bench-out")


def _render(profile: CalibrationProfile) -> RenderableType:
    from alphagate.report.cost import render_calibration

    return render_calibration(profile)
