"""``alphagate plan``: the staged rollout plan for one deployment, its traffic and its load.

Measured α is folded into the classes by :func:`alphagate.plan.fold.fold_measurements`, which
the Python API shares."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from alphagate.cli._app import JsonOpt, app, status
from alphagate.cli._check import deployment_errors, fail
from alphagate.cli._groups import takes_groups
from alphagate.cli._options import CalibrationOpt, DeploymentFlags, SeedOpt, calibrated_deployment
from alphagate.cli._workload import LengthFlags, PlanMixFlags
from alphagate.cli.plan._load import PlanLoadFlags
from alphagate.cli.plan._output import PlanOutputFlags, RunbookFlags, show_plan
from alphagate.specs.calibration import CostOverrides

if TYPE_CHECKING:
    from alphagate.plan.records import MeasuredTree


@app.command("plan", short_help="The staged rollout plan for your traffic.")
@takes_groups
def plan_cmd(
    ctx: typer.Context,
    mix: PlanMixFlags,
    load: PlanLoadFlags,
    deploy: DeploymentFlags = DeploymentFlags(),
    engine: Annotated[
        Literal["vllm", "sglang"],
        typer.Option(
            "--engine",
            help="Serving engine. sglang with --alpha-from a `measure offline --tree` result: "
            "the EAGLE draft tree (steps, top-k, draft tokens) per concurrency.",
        ),
    ] = "vllm",
    engine_version: Annotated[
        str | None,
        typer.Option(
            "--engine-version", help="e.g. 0.11 (vLLM has a batch-size schedule for K from 0.32)."
        ),
    ] = None,
    k: Annotated[
        int | None,
        typer.Option(
            "--k", "-k", min=1, max=16, help="Fixed K to evaluate (default: the simulator's best)."
        ),
    ] = None,
    lengths: LengthFlags = LengthFlags(),
    runbook: RunbookFlags = RunbookFlags(),
    seed: SeedOpt = 0,
    output: PlanOutputFlags = PlanOutputFlags(),
    calibration: CalibrationOpt = None,
    cost: CostOverrides = CostOverrides(),
    as_json: JsonOpt = False,
) -> None:
    """Staged rollout plan: verdict, policy (K per concurrency), predicted table, per-class calls,
    gate, memory, engine config, stages, risks and a P99 playbook."""
    from alphagate.plan import PlanRequest, build_plan
    from alphagate.plan.fold import measured_suffix
    from alphagate.report.reasons import worded

    output.check([*(mix.alpha_from or []), calibration])
    _check_engine_version(engine_version)
    classes = mix.mix(k)
    trees = _measured_trees(mix.alpha_from) if engine == "sglang" else ()
    dep, profile = calibrated_deployment(ctx, deploy.config(), calibration, cost)
    with deployment_errors():
        dep = measured_suffix(dep, mix.alpha_from or [])
        req = PlanRequest(
            deployment=dep,
            calibration=profile,
            workload=lengths.workload(classes),
            **load.fields(),
            engine=engine,
            engine_version=engine_version,
            k=k,
            seed=seed,
            **runbook.fields(),
            **output.fields(),
            calibration_file=None if calibration is None else str(calibration),
            alpha_files=tuple(str(f) for f in mix.alpha_from or []),
            alpha_overall=mix.alpha_overall,
            trees=trees,
        )
        with status("planning…", as_json):
            plan = worded(build_plan(req))
    show_plan(plan, output, as_json=as_json)


def _measured_trees(paths: list[Path] | None) -> tuple[MeasuredTree, ...]:
    """The SGLang draft shapes measured in the ``--alpha-from`` files (``measure offline``)."""
    from alphagate.core.errors import ConfigError
    from alphagate.plan.trees import load_trees

    try:
        return load_trees(list(paths or []))
    except ConfigError as exc:
        fail(str(exc), "--alpha-from")


def _check_engine_version(version: str | None) -> None:
    if version is None:
        return
    from alphagate.plan.records import parse_engine_version

    try:
        parse_engine_version(version)
    except ValueError as exc:
        fail(str(exc), "--engine-version")
