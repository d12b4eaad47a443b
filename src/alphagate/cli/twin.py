"""``alphagate twin``: a vLLM-like OpenAI endpoint on the simulator, with or without speculation."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from alphagate.cli._app import app, config_error, console, fail, finite_float
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
    CalibrationOpt,
    CostFlags,
    CudagraphOpt,
    DraftOpt,
    DraftOverheadOpt,
    DraftScaleOpt,
    DraftTpOpt,
    DtypeOpt,
    GpuOpt,
    KvDtypeOpt,
    MaxBatchedOpt,
    MaxSeqsOpt,
    MethodOpt,
    ModelOpt,
    OutputLenOpt,
    PerSeqOverheadOpt,
    PerTokenOverheadOpt,
    PromptLenOpt,
    SeedOpt,
    SpecOverheadOpt,
    StepOverheadOpt,
    TargetScaleOpt,
    TpOpt,
    calibrated_deployment,
    deployment,
    traffic_classes,
    workload,
)


@app.command("twin", short_help="A vLLM-like endpoint on the simulator.")
def twin_cmd(
    ctx: typer.Context,
    model: ModelOpt = DEFAULT_MODEL,
    gpu: GpuOpt = DEFAULT_GPU,
    tp: TpOpt = None,
    dtype: DtypeOpt = DEFAULT_DTYPE,
    kv_dtype: KvDtypeOpt = DEFAULT_KV_DTYPE,
    method: MethodOpt = DEFAULT_METHOD,
    draft: DraftOpt = None,
    k: Annotated[
        int, typer.Option("--k", "-k", min=0, max=64, help="Drafts per step; 0 = no speculation.")
    ] = 3,
    alpha: Annotated[
        float,
        typer.Option(
            "--alpha",
            "-a",
            callback=finite_float("--alpha", 0.0, 1.0),
            help="α of the single class.",
        ),
    ] = 0.7,
    classes: Annotated[
        list[str] | None,
        typer.Option(
            "--class",
            help="NAME:SHARE:ALPHA or NAME:SHARE:A1,A2,… (α per draft position), repeated "
            "(replaces --alpha).",
        ),
    ] = None,
    prompt_len: PromptLenOpt = DEFAULT_PROMPT_LEN,
    output_len: OutputLenOpt = DEFAULT_OUTPUT_LEN,
    time_scale: Annotated[
        float,
        typer.Option(
            "--time-scale",
            callback=finite_float("--time-scale", 0.0, 1000.0),
            help="Wall seconds per simulated second; 0 = as fast as possible.",
        ),
    ] = 1.0,
    max_num_seqs: MaxSeqsOpt = DEFAULT_MAX_SEQS,
    max_batched: MaxBatchedOpt = DEFAULT_MAX_BATCHED,
    max_model_len: Annotated[int, typer.Option("--max-model-len", min=2, max=1_048_576)] = 8192,
    host: Annotated[
        str, typer.Option("--host", help="Bind address (loopback by default).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535)] = 8000,
    served: Annotated[
        str, typer.Option("--served-model-name", help="Model name clients send.")
    ] = "alphagate-twin",
    api_key: Annotated[
        str | None,
        typer.Option(
            "--api-key",
            envvar="ALPHAGATE_API_KEY",
            help="Require this Bearer key (or $ALPHAGATE_API_KEY).",
        ),
    ] = None,
    seed: SeedOpt = 0,
    log_stats_interval: Annotated[
        float,
        typer.Option(
            "--log-stats-interval",
            callback=finite_float("--log-stats-interval", 0.0, 86_400.0),
            help="Seconds between vLLM-format 'SpecDecoding metrics' lines on stderr (vLLM's "
            "VLLM_LOG_STATS_INTERVAL; 0 = none). `alphagate measure logs` reads them.",
        ),
    ] = 10.0,
    calibration: CalibrationOpt = None,
    step_overhead_ms: StepOverheadOpt = None,
    per_seq_overhead_us: PerSeqOverheadOpt = None,
    per_token_overhead_us: PerTokenOverheadOpt = None,
    draft_overhead_ms: DraftOverheadOpt = None,
    spec_overhead_ms: SpecOverheadOpt = None,
    target_time_scale: TargetScaleOpt = None,
    draft_time_scale: DraftScaleOpt = None,
    draft_tp: DraftTpOpt = None,
    cudagraph_max_tokens: CudagraphOpt = None,
    emit_send_time: Annotated[bool, typer.Option("--emit-send-time", hidden=True)] = False,
) -> None:
    """A vLLM-like OpenAI endpoint on the simulator, with or without speculative decoding.

    Step timing comes from the simulator's roofline model for MODEL on GPU, acceptance from α,
    and /metrics uses vLLM's metric names. A request's class is its `alphagate_class` body field,
    else the suffix of `model` ("NAME:CLASS"), else drawn by the class shares.
    """
    from pydantic import ValidationError

    from alphagate.core.errors import ConfigError
    from alphagate.core.traffic import TrafficClass
    from alphagate.twin.config import TwinConfig
    from alphagate.twin.server import serve

    if not host.strip():
        fail(
            "the bind address is empty; use 127.0.0.1 (loopback) or 0.0.0.0 (every interface)",
            "--host",
        )
    if os.environ.get("ALPHAGATE_API_KEY") == "" and api_key is None:
        api_key = ""  # an empty variable is a mistake, not "no authentication"
    if api_key is not None and not api_key.strip():
        fail(
            "the API key is empty; omit --api-key (and unset ALPHAGATE_API_KEY) to serve without one",
            "--api-key",
        )
    mix = (
        traffic_classes(classes, require_alpha=True)
        if classes
        else (TrafficClass(name="default", share=1.0, alpha=alpha),)
    )
    flags = CostFlags(
        step_overhead_ms, per_seq_overhead_us, per_token_overhead_us, draft_overhead_ms,
        target_time_scale, draft_time_scale, draft_tp, cudagraph_max_tokens, spec_overhead_ms,
    )  # fmt: skip
    dep, profile = calibrated_deployment(
        ctx,
        deployment(
            model=model,
            gpu=gpu,
            tp=tp,
            dtype=dtype,
            kv_dtype=kv_dtype,
            method=method,
            draft=draft,
            max_num_seqs=max_num_seqs,
            max_batched=max_batched,
        ),
        calibration,
        flags,
    )
    try:
        cfg = TwinConfig(
            deployment=dep,
            workload=workload(prompt_len, output_len, mix),
            k=k,
            served_model_name=served,
            time_scale=time_scale,
            max_model_len=max_model_len,
            api_key=api_key,
            seed=seed,
            log_stats_interval_s=log_stats_interval,
            emit_send_time=emit_send_time,
        )
        spec = (
            f"K={k}, α " + ", ".join(f"{c.name} {c.alpha_label()}" for c in mix)
            if k
            else "no speculation"
        )
        console.print(
            f"alphagate twin: {served} on http://{host}:{port} — {dep.model} on {dep.gpu}, {spec}, "
            f"time scale {time_scale:g}" + (f"; {profile.summary()}" if profile is not None else "")
        )
        serve(cfg, host, port)
    except ConfigError as exc:
        config_error(exc, "--model/--gpu/--tp/--dtype")
    except ValidationError as exc:
        config_error(exc)
    except OSError as exc:
        fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}", "--host/--port")
