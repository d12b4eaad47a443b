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
from alphagate.cli._options import (
    DEFAULT_DTYPE,
    DEFAULT_GPU,
    DEFAULT_KV_DTYPE,
    DEFAULT_MAX_BATCHED,
    DEFAULT_MAX_SEQS,
    DEFAULT_METHOD,
    DEFAULT_MODEL,
    DEFAULT_OUTPUT_LEN,
    DEFAULT_PROMPT_LEN,
    DraftOpt,
    DtypeOpt,
    GpuOpt,
    KvDtypeOpt,
    MaxBatchedOpt,
    MaxSeqsOpt,
    MethodOpt,
    ModelOpt,
    OutputLenOpt,
    PromptLenOpt,
    SeedOpt,
    TpOpt,
    check_output_path,
    deployment,
    traffic_classes,
    workload,
)

if TYPE_CHECKING:
    from alphagate.sim.sweep import SweepResult


@app.command("simulate", short_help="Where speculation pays, and what P99 ITL does.")
def simulate_cmd(
    model: ModelOpt = DEFAULT_MODEL,
    gpu: GpuOpt = DEFAULT_GPU,
    tp: TpOpt = None,
    dtype: DtypeOpt = DEFAULT_DTYPE,
    kv_dtype: KvDtypeOpt = DEFAULT_KV_DTYPE,
    method: MethodOpt = DEFAULT_METHOD,
    draft: DraftOpt = None,
    ks: Annotated[
        str, typer.Option("--k", "-k", help="Comma-separated K values to compare.")
    ] = "1,3,5",
    alphas: Annotated[
        str, typer.Option("--alpha", "-a", help="Comma-separated α values (one class each).")
    ] = "0.4,0.5,0.55,0.6,0.7,0.8",
    classes: Annotated[
        list[str] | None,
        typer.Option(
            "--class", help="NAME:SHARE:ALPHA, repeated: one traffic mix (replaces --alpha)."
        ),
    ] = None,
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
    prompt_len: PromptLenOpt = DEFAULT_PROMPT_LEN,
    output_len: OutputLenOpt = DEFAULT_OUTPUT_LEN,
    num_requests: Annotated[
        int | None,
        typer.Option(
            "--num-requests",
            "-n",
            min=1,
            max=10_000_000,
            help="Requests per load level (default: 8 per user, >= 100).",
        ),
    ] = None,
    disable_above: Annotated[
        int | None,
        typer.Option(
            "--disable-above-batch", min=1, help="Turn speculation off above this batch size."
        ),
    ] = None,
    max_num_seqs: MaxSeqsOpt = DEFAULT_MAX_SEQS,
    max_batched: MaxBatchedOpt = DEFAULT_MAX_BATCHED,
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
    step_overhead_ms: Annotated[
        float,
        typer.Option(
            "--step-overhead-ms",
            callback=finite_float("--step-overhead-ms", 0.0, 1000.0),
            help="Scheduler and sampling time per engine step.",
        ),
    ] = 1.0,
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
    if plot is not None:
        check_output_path(plot, "--plot", directory=True)
    mix = traffic_classes(classes, require_alpha=True) if classes else None
    try:
        cfg = SweepConfig(
            deployment=deployment(
                model=model,
                gpu=gpu,
                tp=tp,
                dtype=dtype,
                kv_dtype=kv_dtype,
                method=method,
                draft=draft,
                max_num_seqs=max_num_seqs,
                max_batched=max_batched,
                bw_efficiency=bw_eff,
                compute_efficiency=compute_eff,
                step_overhead_ms=step_overhead_ms,
            ),
            workload=workload(prompt_len, output_len, mix),
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
            result = simulate(cfg)
    except ConfigError as exc:
        config_error(exc, "--model/--gpu/--tp/--dtype")
    except ValidationError as exc:
        config_error(exc)
    if plot is not None:
        _plots(result, plot)
    show("simulate", result, as_json, _render)
    if plot is not None and not as_json:
        console.print(f"plots written to {plot}/")


def _render(result: SweepResult) -> RenderableType:
    from alphagate.report.simulate import render_sweep

    return render_sweep(result)


def _plots(result: SweepResult, folder: Path) -> None:
    from alphagate.cli._plots import write_plots
    from alphagate.report.charts import sweep_charts

    write_plots(sweep_charts(result), folder, "--plot")
