"""``alphagate twin``: a vLLM-like OpenAI endpoint on the simulator, with or without speculation."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from alphagate.cli._app import app, console
from alphagate.cli._check import DEPLOYMENT_FLAGS, bounded, config_error, fail
from alphagate.cli._groups import given, takes_groups
from alphagate.cli._options import CalibrationOpt, DeploymentFlags, SeedOpt, calibrated_deployment
from alphagate.cli._workload import LengthFlags, traffic_classes
from alphagate.cli.twin._engine import EngineFlags
from alphagate.cli.twin._serve import ServeFlags, start_in_background
from alphagate.specs.calibration import CostOverrides

if TYPE_CHECKING:
    from alphagate.core.traffic import TrafficClass

__all__ = ["twin_cmd"]


@app.command("twin", short_help="A vLLM-like endpoint on the simulator.")
@takes_groups
def twin_cmd(
    ctx: typer.Context,
    deploy: DeploymentFlags = DeploymentFlags(),
    k: Annotated[
        int, typer.Option("--k", "-k", min=0, max=64, help="Drafts per step; 0 = no speculation.")
    ] = 3,
    alpha: Annotated[
        float,
        bounded("--alpha", "-a", lo=0.0, hi=1.0, help="α of the single class."),
    ] = 0.7,
    classes: Annotated[
        list[str] | None,
        typer.Option(
            "--class",
            help="NAME:SHARE:ALPHA or NAME:SHARE:A1,A2,… (α per draft position), repeated "
            "(replaces --alpha); with --alpha-from, NAME:SHARE.",
        ),
    ] = None,
    alpha_from: Annotated[
        list[Path] | None,
        typer.Option(
            "--alpha-from",
            help="A measurement (e.g. `measure offline`): each --class NAME:SHARE takes its "
            "measured α — for suffix decoding its draft-length profile, which K defaults to — "
            "and without --class one class takes the file's overall figure.",
        ),
    ] = None,
    lengths: LengthFlags = LengthFlags(),
    time_scale: Annotated[
        float,
        bounded(
            "--time-scale",
            lo=0.0,
            hi=1000.0,
            help="Wall seconds per simulated second; 0 = as fast as possible.",
        ),
    ] = 1.0,
    seed: SeedOpt = 0,
    calibration: CalibrationOpt = None,
    cost: CostOverrides = CostOverrides(),
    serve: ServeFlags = ServeFlags(),
    engine: EngineFlags = EngineFlags(),
) -> None:
    """A vLLM-like OpenAI endpoint on the simulator, with or without speculative decoding.

    Step timing comes from the simulator's roofline model for MODEL on GPU, acceptance from α,
    and /metrics uses vLLM's metric names. A request's class is its `alphagate_class` body field,
    else the suffix of `model` ("NAME:CLASS"), else drawn by the class shares.
    """
    from pydantic import ValidationError

    from alphagate.core.errors import ConfigError
    from alphagate.plan.fold import measured_suffix
    from alphagate.twin.config import TwinConfig
    from alphagate.twin.server import serve as serve_twin

    serve.check()
    if (classes or alpha_from) and given(ctx, "alpha"):
        fail("--class and --alpha-from give each traffic class its α: drop --alpha", "--alpha")
    api_key = serve.key()
    k, schedule, method = engine.speculative(ctx, k, deploy.method)
    mix = _mix(classes, alpha, alpha_from)
    dep, profile = calibrated_deployment(
        ctx, dataclasses.replace(deploy, method=method).config(), calibration, cost
    )
    k = _suffix(ctx, dep.method, mix, k)
    try:
        dep = measured_suffix(dep, alpha_from or [])
        cfg = TwinConfig(
            deployment=dep,
            workload=lengths.workload(mix),
            k=k,
            k_by_batch_size=schedule,
            served_model_name=serve.served,
            time_scale=time_scale,
            api_key=api_key,
            seed=seed,
            **engine.config_fields(),
        )
        spec = (
            f"K={k}, α " + ", ".join(f"{c.name} {c.alpha_label()}" for c in mix)
            if k
            else "no speculation"
        )

        def listening(actual: int) -> None:
            console.print(
                f"alphagate twin: {serve.served} on {serve.url(actual)} — {dep.model} on "
                f"{dep.gpu}, {spec}, time scale {time_scale:g}"
                + (f"; {profile.summary()}" if profile is not None else ""),
                soft_wrap=True,
            )

        if serve.background:
            start_in_background(serve.log_file)
            return
        serve_twin(cfg, serve.host, serve.port, listening)
    except ConfigError as exc:
        config_error(exc, DEPLOYMENT_FLAGS)
    except ValidationError as exc:
        fields = {str(e["loc"][0]) for e in exc.errors() if e["loc"]}
        config_error(exc, "--served-model-name" if "served_model_name" in fields else None)
    except OSError as exc:
        fail(f"cannot listen on {serve.host}:{serve.port}: {exc.strerror or exc}", "--host/--port")


def _mix(
    classes: list[str] | None, alpha: float, alpha_from: list[Path] | None
) -> tuple[TrafficClass, ...]:
    """The --class mix, or one class of α ``alpha``; with --alpha-from, α (or a draft-length
    profile) from the measurement."""
    from alphagate.core.errors import ConfigError
    from alphagate.core.traffic import TrafficClass
    from alphagate.plan.fold import fold_measurements

    if not alpha_from:
        if classes:
            return traffic_classes(classes, require_alpha=True)
        return (TrafficClass(name="default", share=1.0, alpha=alpha),)
    mix = (
        traffic_classes(classes, require_alpha=False)
        if classes
        else (TrafficClass(name="default", share=1.0),)
    )
    try:
        return fold_measurements(mix, alpha_from, overall=not classes, require_all=True)
    except ConfigError as exc:
        config_error(exc)


def _suffix(ctx: typer.Context, method: str, mix: tuple[TrafficClass, ...], k: int) -> int:
    """Suffix decoding draws each step from measured draft-length profiles: K defaults to
    the cap they were measured at."""
    if method != "suffix" or k == 0:
        return k
    caps = [len(c.draft_steps) - 1 for c in mix if c.draft_steps is not None]
    if len(caps) < len(mix):
        fail(
            "--method suffix draws each step's draft from a measured draft-length profile: give "
            "--alpha-from the result of `alphagate measure offline --drafter suffix`",
            "--alpha-from",
        )
    return k if given(ctx, "k") else min(caps)
