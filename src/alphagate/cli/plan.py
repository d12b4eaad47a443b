"""``alphagate plan``: the staged rollout plan for one deployment, its traffic and its load."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import typer

from alphagate.cli._app import JsonOpt, app, config_error, console, finite_float, print_json, status
from alphagate.cli._files import atomic_write_text
from alphagate.cli._options import (
    DEFAULT_DTYPE,
    DEFAULT_GPU,
    DEFAULT_KV_DTYPE,
    DEFAULT_METHOD,
    DEFAULT_MODEL,
    DEFAULT_OUTPUT_LEN,
    DEFAULT_PROMPT_LEN,
    DraftOpt,
    DtypeOpt,
    GpuOpt,
    KvDtypeOpt,
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


@app.command("plan", short_help="The staged rollout plan for your traffic.")
def plan_cmd(
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
    model: ModelOpt = DEFAULT_MODEL,
    gpu: GpuOpt = DEFAULT_GPU,
    tp: TpOpt = None,
    dtype: DtypeOpt = DEFAULT_DTYPE,
    kv_dtype: KvDtypeOpt = DEFAULT_KV_DTYPE,
    method: MethodOpt = DEFAULT_METHOD,
    draft: DraftOpt = None,
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
        Path | None,
        typer.Option(
            "--alpha-from", help="Measured α: an alphagate results file or vllm bench serve JSON."
        ),
    ] = None,
    alpha_overall: Annotated[
        bool,
        typer.Option(
            "--alpha-overall",
            help="Apply one overall measured α (e.g. a bench summary) to every class.",
        ),
    ] = False,
    prompt_len: PromptLenOpt = DEFAULT_PROMPT_LEN,
    output_len: OutputLenOpt = DEFAULT_OUTPUT_LEN,
    url: Annotated[
        str, typer.Option("--url", help="Server URL used in the printed commands.")
    ] = "http://127.0.0.1:8000",
    seed: SeedOpt = 0,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write the markdown plan here.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Staged rollout plan: verdict, policy (K per concurrency), predicted table, per-class calls,
    gate, memory, engine config, stages, risks and a P99 playbook."""
    from pydantic import ValidationError

    from alphagate.core.errors import ConfigError
    from alphagate.plan import PlanRequest, build_plan
    from alphagate.plan.measured import apply_measurement, load_measurement
    from alphagate.report.plan import render_plan_console, render_plan_markdown

    if out is not None:
        check_output_path(out, "--out", directory=False)
    parsed = traffic_classes(classes, require_alpha=False)
    if alpha_from is not None:
        try:
            parsed = apply_measurement(
                parsed, load_measurement(alpha_from, k), overall=alpha_overall
            )
        except ConfigError as exc:
            config_error(exc, "--alpha-from")
    try:
        req = PlanRequest(
            deployment=deployment(
                model=model,
                gpu=gpu,
                tp=tp,
                dtype=dtype,
                kv_dtype=kv_dtype,
                method=method,
                draft=draft,
            ),
            workload=workload(prompt_len, output_len, parsed),
            concurrency=concurrency,
            peak_concurrency=peak,
            slo_p99_itl_ms=slo,
            engine=engine,
            engine_version=engine_version,
            k=k,
            seed=seed,
            url=url,
        )
        with status("planning…", as_json):
            plan = build_plan(req)
    except ConfigError as exc:
        config_error(exc, "--model/--gpu/--tp/--dtype")
    except ValidationError as exc:
        config_error(exc)
    if out is not None:
        atomic_write_text(out, render_plan_markdown(plan), "--out")
    if as_json:
        print_json(plan.payload())
        return
    console.print(render_plan_console(plan))
    if out is not None:
        console.print(f"plan written to {out}")
