"""``alphagate simulate``: continuous batching on a roofline step-time model — where speculation
pays, where it stops, and what P99 ITL does."""

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
    fail,
    finite_float,
    float_list,
    int_list,
    show,
    status,
)
from alphagate.cli._groups import takes_groups
from alphagate.cli._options import (
    CalibrationOpt,
    CostFlags,
    DeploymentFlags,
    LengthFlags,
    SeedOpt,
    calibrated_deployment,
    check_output_path,
    given,
    traffic_classes,
)

if TYPE_CHECKING:
    from alphagate.core.traffic import TrafficClass
    from alphagate.sim.explain import CostExplanation
    from alphagate.sim.sweep import SweepResult
    from alphagate.specs.calibration import CalibrationProfile
    from alphagate.specs.deployment import DeploymentConfig
    from alphagate.specs.workload import WorkloadConfig


@app.command("simulate", short_help="Where speculation pays, and what P99 ITL does.")
@takes_groups
def simulate_cmd(
    ctx: typer.Context,
    deploy: DeploymentFlags = DeploymentFlags(),
    ks: Annotated[
        str, typer.Option("--k", "-k", help="Comma-separated K values to compare.")
    ] = "1,3,5",
    alphas: Annotated[
        str, typer.Option("--alpha", "-a", help="Comma-separated α values (one class each).")
    ] = "0.4,0.5,0.55,0.6,0.7,0.8",
    classes: Annotated[
        list[str] | None,
        typer.Option(
            "--class",
            help="NAME:SHARE:ALPHA or NAME:SHARE:A1,A2,… (α per draft position), repeated: one "
            "traffic mix (replaces --alpha); NAME:SHARE with --alpha-from.",
        ),
    ] = None,
    alpha_from: Annotated[
        Path | None,
        typer.Option(
            "--alpha-from",
            help="α for the classes without one: an alphagate measure results file (α by "
            "position per class), a bench summary or vllm bench serve JSON.",
        ),
    ] = None,
    alpha_overall: Annotated[
        bool,
        typer.Option("--alpha-overall", help="Apply one overall measured α to every class."),
    ] = False,
    concurrency: Annotated[
        str | None, typer.Option("--concurrency", "-c", help="Closed-loop users, comma-separated.")
    ] = None,
    rate: Annotated[
        str | None, typer.Option("--rate", help="Open-loop request rates (req/s), comma-separated.")
    ] = None,
    burstiness: Annotated[
        float,
        typer.Option(
            "--burstiness",
            callback=finite_float("--burstiness", 0.01, 100.0),
            help="Gamma shape of open-loop gaps (1 = Poisson).",
        ),
    ] = 1.0,
    think_time: Annotated[
        float,
        typer.Option(
            "--think-time",
            callback=finite_float("--think-time", 0.0, 3600.0),
            help="Closed-loop think time (s).",
        ),
    ] = 0.0,
    lengths: LengthFlags = LengthFlags(),
    num_requests: Annotated[
        int | None,
        typer.Option(
            "--num-requests",
            "-n",
            min=1,
            max=10_000_000,
            help="Requests per load level (default: 16 per user, >= 200).",
        ),
    ] = None,
    disable_above: Annotated[
        int | None,
        typer.Option(
            "--disable-above-batch", min=1, help="Turn speculation off above this batch size."
        ),
    ] = None,
    bw_eff: Annotated[
        float | None,
        typer.Option(
            "--bw-efficiency",
            callback=finite_float("--bw-efficiency", 0.01, 1.0),
            help="Achieved ÷ peak HBM bandwidth (default: the GPU preset's).",
        ),
    ] = None,
    compute_eff: Annotated[
        float | None,
        typer.Option(
            "--compute-efficiency",
            callback=finite_float("--compute-efficiency", 0.01, 1.0),
            help="Achieved ÷ peak dense FLOP/s (default: the GPU preset's).",
        ),
    ] = None,
    cost: CostFlags = CostFlags(),
    calibration: CalibrationOpt = None,
    explain_cost: Annotated[
        bool,
        typer.Option(
            "--explain-cost",
            help="Print how each term of the step-time model moves the verify cost v(B, K) and "
            "the draft cost c(B, K) at batch 1, 2, 4, … up to the largest --concurrency (64 by "
            "default) and every --k (1–5 by default), then exit without simulating.",
        ),
    ] = False,
    seed: SeedOpt = 0,
    no_breakeven_sim: Annotated[
        bool, typer.Option("--no-breakeven-sim", help="Skip the simulator bisection for α_be.")
    ] = False,
    plot: Annotated[
        Path | None,
        typer.Option(
            "--plot",
            help="Write PNG plots into this folder: speedup vs load, P99 ITL, the ITL CDF, α by "
            "position, acceptance length.",
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Continuous-batching simulation: where speculation pays, where it stops, and what P99 ITL does.

    With no arguments: Llama-3.3-70B FP8 on H100, EAGLE-3, K ∈ {1, 3, 5}, α ∈ {0.4 … 0.8},
    concurrency ∈ {1, 16, 64, 256}, each paired with a no-speculation run on the same requests.
    """
    from pydantic import ValidationError

    from alphagate.core.errors import ConfigError
    from alphagate.sim.sweep import SweepConfig, simulate

    if concurrency and rate:
        fail("give --concurrency or --rate, not both", "--rate")
    if classes and given(ctx, "alphas"):
        fail(
            "--class gives each traffic class its α (or --alpha-from does): drop --alpha, or "
            "drop --class to compare the --alpha values",
            "--alpha",
        )
    if plot is not None:
        check_output_path(plot, "--plot", directory=True)
    mix = _classes(classes, alpha_from, alpha_overall, ks)
    dep, profile = calibrated_deployment(
        ctx, deploy.config(bw_efficiency=bw_eff, compute_efficiency=compute_eff), calibration, cost
    )
    wl = lengths.workload(mix)
    if explain_cost:
        k_list = int_list(ks, "--k", 1, 64) if given(ctx, "ks") else [1, 2, 3, 4, 5]
        top = max(int_list(concurrency, "--concurrency", 1, 65_536)) if concurrency else 64
        _explain(dep, profile, wl, k_list, top, as_json)
        return
    try:
        cfg = SweepConfig(
            deployment=dep,
            workload=wl,
            alphas=None if mix else tuple(float_list(alphas, "--alpha", 0.0, 1.0)),
            ks=tuple(int_list(ks, "--k", 1, 64)),
            concurrencies=None
            if rate
            else tuple(int_list(concurrency or "1,16,64,256", "--concurrency", 1, 65_536)),
            rates=tuple(float_list(rate, "--rate", 1e-6, 1e6)) if rate else None,
            burstiness=burstiness,
            think_time_s=think_time,
            num_requests=num_requests,
            disable_above_batch=disable_above,
            seed=seed,
            simulate_breakeven=not no_breakeven_sim,
        )
        with status("simulating…", as_json):
            result = simulate(cfg, profile)
    except ConfigError as exc:
        config_error(exc, "--model/--gpu/--tp/--dtype")
    except ValidationError as exc:
        config_error(exc)
    if plot is not None:
        _plots(result, plot)
    show("simulate", result, as_json, _render)
    if not as_json and result.calibration:
        console.print("Calibration: " + "; ".join(result.calibration))
    if plot is not None and not as_json:
        console.print(f"plots written to {plot}/")


def _classes(
    classes: list[str] | None, alpha_from: Path | None, overall: bool, ks: str
) -> tuple[TrafficClass, ...] | None:
    """The traffic mix: --class values, with α read from --alpha-from where a class has none."""
    from alphagate.core.errors import ConfigError

    if not classes:
        if alpha_from is not None:
            fail("--alpha-from fills the α of --class NAME:SHARE classes; give --class", "--class")
        return None
    mix = traffic_classes(classes, require_alpha=alpha_from is None)
    if alpha_from is not None:
        from alphagate.plan.measured import apply_measurement, load_measurement

        try:
            mix = apply_measurement(
                mix, load_measurement(alpha_from, max(int_list(ks, "--k", 1, 64))), overall=overall
            )
        except ConfigError as exc:
            config_error(exc, "--alpha-from")
        missing = [c.name for c in mix if not c.has_alpha]
        if missing:
            fail(f"{alpha_from} has no α for {', '.join(missing)}", "--alpha-from")
    return mix


def _explain(
    dep: DeploymentConfig,
    profile: CalibrationProfile | None,
    wl: WorkloadConfig,
    ks: list[int],
    top: int,
    as_json: bool,
) -> None:
    from alphagate.core.errors import ConfigError
    from alphagate.sim.cost import build_cost_model
    from alphagate.sim.explain import explain_cost, powers_of_two
    from alphagate.specs.deployment import resolve_deployment
    from alphagate.specs.uncertainty import cost_ranges

    try:
        resolved = resolve_deployment(dep, wl, top)
    except ConfigError as exc:
        config_error(exc, "--model/--gpu/--tp/--dtype")
    cost = build_cost_model(resolved)
    batches = powers_of_two(min(top, resolved.largest_batch(wl)))
    e = explain_cost(cost, batches, ks, wl.mean_context(), cost_ranges(dep, profile))
    show("simulate --explain-cost", e, as_json, _render_explanation)


def _render_explanation(e: CostExplanation) -> RenderableType:
    from alphagate.report.cost import render_explanation

    return render_explanation(e, 3)


def _render(result: SweepResult) -> RenderableType:
    from alphagate.report.simulate import render_sweep

    return render_sweep(result)


def _plots(result: SweepResult, folder: Path) -> None:
    from alphagate.cli._plots import write_plots
    from alphagate.report.charts import sweep_charts

    write_plots(sweep_charts(result), folder, "--plot")
