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

from alphagate.cli._app import JsonOpt, app, console, err_console, json_dumps, show, status
from alphagate.cli._check import bounded, config_error, fail, flag_errors
from alphagate.cli._files import atomic_write_text, sigterm_as_interrupt
from alphagate.cli._groups import takes_groups
from alphagate.cli._options import DeploymentFlags, SeedOpt
from alphagate.cli._paths import check_outputs
from alphagate.cli.calibrate._live import SweepFlags, run_sweep
from alphagate.specs.calibration import EngineSettings

if TYPE_CHECKING:
    from alphagate.calibrate.observations import Observation
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
    sweep: SweepFlags = SweepFlags(),
    deploy: DeploymentFlags = DeploymentFlags(),
    engine: EngineSettings = EngineSettings(),
    time_scale: Annotated[
        float,
        bounded(
            "--time-scale",
            lo=1e-6,
            hi=1e6,
            help="Wall seconds per server second (an alphagate twin run at --time-scale); the "
            "measured times are divided by it.",
        ),
    ] = 1.0,
    seed: SeedOpt = 0,
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
    from alphagate.calibrate.sweep import SweepInterrupted

    if not results and not sweep.url:
        fail("give saved results (FILE …) or a live server (--url)", "--url")
    check_outputs([(out, "--out", False), (bench_out, "--bench-out", True)], results or [])
    with flag_errors("--draft-tp/--cudagraph-max-tokens"):
        dep = engine.apply(deploy.config())
    observations = _saved(results or [])
    partial = False
    if sweep.url:
        try:
            with sigterm_as_interrupt():  # SIGTERM as Ctrl-C: what completed is kept
                observations += run_sweep(sweep.sweep(seed), bench_out, quiet=as_json)
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


def _render(profile: CalibrationProfile) -> RenderableType:
    from alphagate.report.cost import render_calibration

    return render_calibration(profile)
