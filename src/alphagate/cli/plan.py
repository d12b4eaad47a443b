"""``alphagate plan``: the staged rollout plan for one deployment, its traffic and its load."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import typer

from alphagate.cli._app import (
    JsonOpt,
    app,
    config_error,
    console,
    fail,
    finite_float,
    json_dumps,
    print_json,
    status,
)
from alphagate.cli._files import atomic_write_text
from alphagate.cli._groups import takes_groups
from alphagate.cli._options import (
    CalibrationOpt,
    CostFlags,
    DeploymentFlags,
    LengthFlags,
    SeedOpt,
    calibrated_deployment,
    check_no_overwrite,
    check_output_path,
    traffic_classes,
)


def _plan_file(out: Path | None) -> str:
    """The plan JSON that ``--out`` writes (and the printed gate commands read)."""
    if out is None:
        return "plan.json"
    return str(out if out.suffix.lower() == ".json" else out.with_suffix(".json"))


def _out_stem(out: Path | None) -> str:
    """Where the printed re-plan commands write, beside ``--out``."""
    if out is None:
        return "plan"
    return str(out.with_suffix(""))


@app.command("plan", short_help="The staged rollout plan for your traffic.")
@takes_groups
def plan_cmd(
    ctx: typer.Context,
    classes: Annotated[
        list[str],
        typer.Option(
            "--class",
            help="NAME:SHARE[:ALPHA], repeated; SHARE = fraction of output tokens. A class without "
            "ALPHA gets a documented prior (or a measurement from --alpha-from).",
        ),
    ],
    concurrency: Annotated[
        int, typer.Option("--concurrency", "-c", min=1, max=65_536, help="Target concurrency.")
    ],
    deploy: DeploymentFlags = DeploymentFlags(),
    peak: Annotated[
        int | None,
        typer.Option(
            "--peak-concurrency", min=1, max=65_536, help="Peak concurrency (default: the target)."
        ),
    ] = None,
    slo: Annotated[
        float | None,
        typer.Option(
            "--slo-p99-itl-ms",
            callback=finite_float("--slo-p99-itl-ms", 1e-6),
            help="P99 ITL-per-token SLO (ms).",
        ),
    ] = None,
    engine: Annotated[
        Literal["vllm", "sglang"], typer.Option("--engine", help="Serving engine.")
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
    alpha_from: Annotated[
        list[Path] | None,
        typer.Option(
            "--alpha-from",
            help="Measured α: an alphagate results file (measure, bench summary) or vllm bench "
            "serve JSON; repeat for files that each measure other classes.",
        ),
    ] = None,
    alpha_overall: Annotated[
        bool,
        typer.Option(
            "--alpha-overall",
            help="Apply one overall measured α (e.g. a bench summary) to every class.",
        ),
    ] = False,
    lengths: LengthFlags = LengthFlags(),
    url: Annotated[
        str,
        typer.Option(
            "--url", help="The baseline server (speculation off) the printed commands benchmark."
        ),
    ] = "http://127.0.0.1:8000",
    candidate_url: Annotated[
        str | None,
        typer.Option(
            "--candidate-url",
            help="The staging replica with speculation on, in the printed commands (default: "
            "the --url host, next port).",
        ),
    ] = None,
    repeats: Annotated[
        int,
        typer.Option(
            "--repeats",
            min=2,
            max=20,
            help="Alternated baseline/candidate runs per level in the printed A/B (their spread "
            "is the gate's interval: with 5, Student's t is 2.8 standard errors).",
        ),
    ] = 5,
    bench_requests: Annotated[
        int | None,
        typer.Option(
            "--bench-requests",
            min=1,
            max=10_000_000,
            help="Requests per level and run in the printed bench commands (default: 384 over "
            "the runs, for the gate's 1% error-rate rule, and 4 per user at the peak).",
        ),
    ] = None,
    p99_budget: Annotated[
        float | None,
        typer.Option(
            "--p99-budget",
            callback=finite_float("--p99-budget", 1.0, 10.0),
            help="Allow the candidate's P99 ITL per token at the target up to this many times the "
            "baseline's (1.1 = 10% worse); default: not worse.",
        ),
    ] = None,
    served_model: Annotated[
        str | None,
        typer.Option(
            "--served-model",
            help="The model name the server serves (--served-model-name), for the printed "
            "commands; default: the preset's Hugging Face id.",
        ),
    ] = None,
    seed: SeedOpt = 0,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help="Write the markdown plan here, and the plan as JSON beside it (PATH.json, for "
            "alphagate gate --plan); a .json PATH gets the JSON only.",
        ),
    ] = None,
    plot: Annotated[
        Path | None,
        typer.Option(
            "--plot",
            help="Write PNG plots into this folder: speedup and K against concurrency, P50/P99 "
            "ITL, α by position, acceptance length.",
        ),
    ] = None,
    calibration: CalibrationOpt = None,
    cost: CostFlags = CostFlags(),
    as_json: JsonOpt = False,
) -> None:
    """Staged rollout plan: verdict, policy (K per concurrency), predicted table, per-class calls,
    gate, memory, engine config, stages, risks and a P99 playbook."""
    from pydantic import ValidationError

    from alphagate.core.errors import ConfigError
    from alphagate.plan import PlanRequest, build_plan
    from alphagate.plan.measured import apply_measurement, load_measurement, merge_measurements
    from alphagate.report.plan import render_plan_console, render_plan_markdown
    from alphagate.report.reasons import worded

    if out is not None:
        check_output_path(out, "--out", directory=False)
    if plot is not None:
        check_output_path(plot, "--plot", directory=True)
    written = [] if out is None else [(out, "--out", False)]
    if out is not None and out.suffix.lower() != ".json":
        written.append((out.with_suffix(".json"), "--out", False))
    check_no_overwrite(written, [*(alpha_from or []), calibration])
    if engine_version is not None:
        from alphagate.plan.records import parse_engine_version

        try:
            parse_engine_version(engine_version)
        except ValueError as exc:
            fail(str(exc), "--engine-version")
    parsed = traffic_classes(classes, require_alpha=False)
    if alpha_from:
        if alpha_overall and len(alpha_from) > 1:
            fail(
                "--alpha-overall applies one file's overall α: give one --alpha-from",
                "--alpha-overall",
            )
        try:
            measured = merge_measurements([load_measurement(f, k) for f in alpha_from])
            parsed = apply_measurement(parsed, measured, overall=alpha_overall)
        except ConfigError as exc:
            config_error(exc, "--alpha-from")
    dep, profile = calibrated_deployment(ctx, deploy.config(), calibration, cost)
    try:
        req = PlanRequest(
            deployment=dep,
            calibration=profile,
            workload=lengths.workload(parsed),
            concurrency=concurrency,
            peak_concurrency=peak,
            slo_p99_itl_ms=slo,
            engine=engine,
            engine_version=engine_version,
            k=k,
            seed=seed,
            url=url,
            candidate_url=candidate_url,
            served_model=served_model,
            repeats=repeats,
            bench_requests=bench_requests,
            p99_budget=p99_budget,
            plan_file=_plan_file(out),
            out_stem=_out_stem(out),
            calibration_file=None if calibration is None else str(calibration),
        )
        with status("planning…", as_json):
            plan = worded(build_plan(req))
    except ConfigError as exc:
        config_error(exc, "--model/--gpu/--tp/--dtype")
    except ValidationError as exc:
        config_error(exc)
    plan_json = None
    if out is not None:
        if out.suffix.lower() == ".json":
            atomic_write_text(out, json_dumps(plan.payload()) + "\n", "--out")
        else:  # the markdown, and the plan as JSON beside it for `alphagate gate --plan`
            plan_json = out.with_suffix(".json")
            check_output_path(plan_json, "--out", directory=False)
            atomic_write_text(out, render_plan_markdown(plan), "--out")
            atomic_write_text(plan_json, json_dumps(plan.payload()) + "\n", "--out")
    if plot is not None:
        from alphagate.cli._plots import write_plots
        from alphagate.report.charts import plan_charts

        write_plots(plan_charts(plan), plot, "--plot")
    if as_json:
        print_json(plan.payload())
        return
    console.print(render_plan_console(plan), crop=False)
    if plot is not None:
        console.print(f"plots written to {plot}/")
    if out is not None:
        beside = f" (and {plan_json}, which alphagate gate --plan reads)" if plan_json else ""
        console.print(f"plan written to {out}{beside}")
