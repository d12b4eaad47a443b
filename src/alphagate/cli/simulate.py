"""``alphagate simulate``: continuous batching on a roofline step-time model — where speculation
pays, where it stops, and what P99 ITL does."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import RenderableType

from alphagate.cli._app import JsonOpt, app, console, show, status
from alphagate.cli._check import bounded, deployment_errors, fail, int_list
from alphagate.cli._groups import given, takes_groups
from alphagate.cli._options import CalibrationOpt, DeploymentFlags, SeedOpt, calibrated_deployment
from alphagate.cli._paths import check_outputs
from alphagate.cli._traffic import SimLoadFlags
from alphagate.cli._workload import LengthFlags, SimulateMixFlags
from alphagate.specs.calibration import CostOverrides

if TYPE_CHECKING:
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
    mix: SimulateMixFlags = SimulateMixFlags(),
    load: SimLoadFlags = SimLoadFlags(),
    lengths: LengthFlags = LengthFlags(),
    disable_above: Annotated[
        int | None,
        typer.Option(
            "--disable-above-batch", min=1, help="Turn speculation off above this batch size."
        ),
    ] = None,
    bw_eff: Annotated[
        float | None,
        bounded(
            "--bw-efficiency",
            lo=0.01,
            hi=1.0,
            help="Achieved ÷ peak HBM bandwidth (default: the GPU preset's).",
        ),
    ] = None,
    compute_eff: Annotated[
        float | None,
        bounded(
            "--compute-efficiency",
            lo=0.01,
            hi=1.0,
            help="Achieved ÷ peak dense FLOP/s (default: the GPU preset's).",
        ),
    ] = None,
    cost: CostOverrides = CostOverrides(),
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
    from alphagate.sim.sweep import SweepConfig, simulate

    if load.concurrency and load.rate:
        fail("give --concurrency or --rate, not both", "--rate")
    mix.check(ctx)
    check_outputs([(plot, "--plot", True)], [])
    classes = mix.mix(ks)
    dep, profile = calibrated_deployment(
        ctx, deploy.config(bw_efficiency=bw_eff, compute_efficiency=compute_eff), calibration, cost
    )
    wl = lengths.workload(classes)
    if explain_cost:
        k_list = int_list(ks, "--k", 1, 64) if given(ctx, "ks") else [1, 2, 3, 4, 5]
        _explain(dep, profile, wl, k_list, load.top(), as_json)
        return
    with deployment_errors():
        cfg = SweepConfig(
            deployment=dep,
            workload=wl,
            alphas=mix.alpha_grid(classes),
            ks=tuple(int_list(ks, "--k", 1, 64)),
            concurrencies=load.concurrencies(),
            rates=load.rates(),
            burstiness=load.burstiness,
            think_time_s=load.think_time,
            num_requests=load.num_requests,
            disable_above_batch=disable_above,
            seed=seed,
            simulate_breakeven=not no_breakeven_sim,
        )
        with status("simulating…", as_json):
            result = simulate(cfg, profile)
    if plot is not None:
        _plots(result, plot)
    show("simulate", result, as_json, _render)
    if not as_json and result.calibration:
        console.print("Calibration: " + "; ".join(result.calibration))
    if plot is not None and not as_json:
        console.print(f"plots written to {plot}/")


def _explain(
    dep: DeploymentConfig,
    profile: CalibrationProfile | None,
    wl: WorkloadConfig,
    ks: list[int],
    top: int,
    as_json: bool,
) -> None:
    from alphagate.sim.cost import build_cost_model
    from alphagate.sim.explain import explain_cost, powers_of_two
    from alphagate.specs.deployment import resolve_deployment
    from alphagate.specs.uncertainty import cost_ranges

    with deployment_errors():
        resolved = resolve_deployment(dep, wl, top)
    cost = build_cost_model(resolved)
    batches = powers_of_two(min(top, resolved.largest_batch(wl, k=0)))
    ranges = cost_ranges(dep, profile)
    e = explain_cost(cost, batches, ks, wl.mean_context(), ranges, wl.mean_sequence_tokens())
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
