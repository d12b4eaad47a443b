"""Options shared by several verbs, with one default per concept (taken from the config records),
and the functions that turn them into the typed configs of the lower layers."""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from pydantic import ValidationError

from alphagate.cli._check import config_error, fail, finite_float
from alphagate.core.errors import ConfigError
from alphagate.core.traffic import TrafficClass, parse_traffic_class, validate_classes
from alphagate.specs.deployment import DeploymentConfig, KvDtype, Method, WeightDtype, drafter_for
from alphagate.specs.workload import LengthDist, WorkloadConfig, parse_length

if TYPE_CHECKING:
    from alphagate.specs.calibration import CalibrationProfile

__all__ = [
    "CalibrationOpt",
    "CostFlags",
    "CudagraphOpt",
    "DeploymentFlags",
    "DraftOpt",
    "DraftOverheadOpt",
    "DraftScaleOpt",
    "DraftTpOpt",
    "DtypeOpt",
    "GpuOpt",
    "KvDtypeOpt",
    "LengthFlags",
    "MaxBatchedOpt",
    "MaxSeqsOpt",
    "MethodOpt",
    "ModelOpt",
    "OutputLenOpt",
    "PerSeqOverheadOpt",
    "PerTokenOverheadOpt",
    "PromptLenOpt",
    "SeedOpt",
    "StepOverheadOpt",
    "TargetScaleOpt",
    "TpOpt",
    "calibrated_deployment",
    "given",
    "length",
    "traffic_classes",
    "workload",
]

_D = DeploymentConfig()
_W = WorkloadConfig()

ModelOpt = Annotated[
    str,
    typer.Option(
        "--model",
        "-m",
        help="Target: a preset (llama-3.3-70b-fp8, llama-3.3-70b, llama-3.1-8b, llama-3.1-8b-fp8, "
        "llama-3.2-1b) or a config.json.",
    ),
]
GpuOpt = Annotated[
    str,
    typer.Option(
        "--gpu", "-g", help="GPU preset (h100, h200, a100-80gb, b200, mi300x) or a spec JSON file."
    ),
]
TpOpt = Annotated[
    int | None,
    typer.Option(
        "--tp", min=1, max=64, help="Tensor-parallel degree (default: the smallest that fits)."
    ),
]
DtypeOpt = Annotated[
    WeightDtype | None,
    typer.Option(
        "--dtype",
        help="Weight dtype (default: the checkpoint's own — bf16 for llama-3.1-8b and "
        "llama-3.3-70b, fp8 for the -fp8 presets, a config.json's quantization_config).",
    ),
]
KvDtypeOpt = Annotated[KvDtype, typer.Option("--kv-dtype", help="KV-cache dtype.")]
MethodOpt = Annotated[Method, typer.Option("--method", help="Drafting method.")]
DraftOpt = Annotated[
    str | None,
    typer.Option(
        "--draft",
        help="Draft checkpoint: a preset or config.json is modelled; a repo id goes into the engine config.",
    ),
]
MaxSeqsOpt = Annotated[
    int, typer.Option("--max-num-seqs", min=1, max=65_536, help="Engine batch limit.")
]
MaxBatchedOpt = Annotated[
    int,
    typer.Option(
        "--max-num-batched-tokens",
        min=1,
        max=1_048_576,
        help="Tokens per engine step (chunked prefill).",
    ),
]
PromptLenOpt = Annotated[
    str,
    typer.Option(
        "--prompt-len", help="fixed:N | uniform:LO:HI | lognormal:MEAN[:SIGMA] | file:PATH"
    ),
]
OutputLenOpt = Annotated[str, typer.Option("--output-len", help="Same forms as --prompt-len.")]
SeedOpt = Annotated[
    int, typer.Option("--seed", min=0, help="Random seed (same seed, same numbers).")
]
CalibrationOpt = Annotated[
    Path | None,
    typer.Option(
        "--calibration",
        help="A profile written by `alphagate calibrate`: the step-time coefficients fitted to your "
        "server. --model, --gpu, --tp, --dtype, --method and --draft default to the deployment it "
        "was fitted for (give them only to repeat them).",
    ),
]
StepOverheadOpt = Annotated[
    float | None,
    typer.Option(
        "--step-overhead-ms",
        callback=finite_float("--step-overhead-ms", 0.0, 1000.0),
        help="Host time per engine step: scheduler, input preparation (default 0.85, or the "
        "profile's).",
    ),
]
PerSeqOverheadOpt = Annotated[
    float | None,
    typer.Option(
        "--per-seq-overhead-us",
        callback=finite_float("--per-seq-overhead-us", 0.0, 1e6),
        help="Host time per running sequence per step (default 2, or the profile's).",
    ),
]
PerTokenOverheadOpt = Annotated[
    float | None,
    typer.Option(
        "--per-token-overhead-us",
        callback=finite_float("--per-token-overhead-us", 0.0, 1e6),
        help="Host time per scheduled token per step (default 0, or the profile's).",
    ),
]
SpecOverheadOpt = Annotated[
    float | None,
    typer.Option(
        "--spec-overhead-ms",
        callback=finite_float("--spec-overhead-ms", 0.0, 1000.0),
        help="Host time per speculative step whatever K is: rejection sampler, proposer set-up "
        "(default 0, or the profile's).",
    ),
]
DraftOverheadOpt = Annotated[
    float | None,
    typer.Option(
        "--draft-overhead-ms",
        callback=finite_float("--draft-overhead-ms", 0.0, 1000.0),
        help="Host time per draft forward (n-gram: the lookup per step; default 0.1 / 0.05, or "
        "the profile's).",
    ),
]
TargetScaleOpt = Annotated[
    float | None,
    typer.Option(
        "--target-time-scale",
        callback=finite_float("--target-time-scale", 0.001, 1000.0),
        help="× the target's modelled GPU time (default 1, or the profile's).",
    ),
]
DraftScaleOpt = Annotated[
    float | None,
    typer.Option(
        "--draft-time-scale",
        callback=finite_float("--draft-time-scale", 0.001, 1000.0),
        help="× the drafter's modelled GPU time (default 1, or the profile's).",
    ),
]
DraftTpOpt = Annotated[
    int | None,
    typer.Option(
        "--draft-tp",
        min=1,
        max=64,
        help="The drafter's tensor-parallel degree (vLLM draft_tensor_parallel_size: 1 or the "
        "target's; default the target's).",
    ),
]
CudagraphOpt = Annotated[
    int | None,
    typer.Option(
        "--cudagraph-max-tokens",
        min=0,
        max=1_048_576,
        help="Largest CUDA-graph capture size in tokens (default vLLM's min(2·max-num-seqs, "
        "512); 0 = eager, as --enforce-eager).",
    ),
]

DEFAULT_MODEL = _D.model
DEFAULT_GPU = _D.gpu
DEFAULT_DTYPE: WeightDtype | None = None  # the checkpoint's own
DEFAULT_KV_DTYPE: KvDtype = _D.kv_dtype
DEFAULT_METHOD: Method = _D.drafter.method
DEFAULT_MAX_SEQS = _D.max_num_seqs
DEFAULT_MAX_BATCHED = _D.max_num_batched_tokens
DEFAULT_PROMPT_LEN = "lognormal:512"
DEFAULT_OUTPUT_LEN = "lognormal:256"


def length(text: str, flag: str) -> LengthDist:
    try:
        return parse_length(text)
    except ConfigError as exc:
        fail(str(exc), flag)


def traffic_classes(values: list[str], *, require_alpha: bool) -> tuple[TrafficClass, ...]:
    """``--class NAME:SHARE[:ALPHA]`` values, validated together (names, shares sum to 1)."""
    try:
        classes = tuple(parse_traffic_class(v, require_alpha=require_alpha) for v in values)
        validate_classes(classes)
    except (ConfigError, ValidationError) as exc:
        config_error(exc, "--class")
    return classes


def workload(
    prompt_len: str, output_len: str, classes: tuple[TrafficClass, ...] | None = None
) -> WorkloadConfig:
    try:
        return WorkloadConfig(
            prompt_len=length(prompt_len, "--prompt-len"),
            output_len=length(output_len, "--output-len"),
            classes=classes or _W.classes,
        )
    except ValidationError as exc:
        config_error(exc, "--class")


@dataclass(frozen=True)
class DeploymentFlags:
    """The deployment a verb models or runs, as flags: an option group
    (:mod:`alphagate.cli._groups`); :meth:`config` is the deployment config they give."""

    model: ModelOpt = DEFAULT_MODEL
    gpu: GpuOpt = DEFAULT_GPU
    tp: TpOpt = None
    dtype: DtypeOpt = DEFAULT_DTYPE
    kv_dtype: KvDtypeOpt = DEFAULT_KV_DTYPE
    method: MethodOpt = DEFAULT_METHOD
    draft: DraftOpt = None
    max_num_seqs: MaxSeqsOpt = DEFAULT_MAX_SEQS
    max_batched: MaxBatchedOpt = DEFAULT_MAX_BATCHED

    def config(self, **extra: float | None) -> DeploymentConfig:
        """The deployment config (``extra``: efficiencies given as flags, None when not)."""
        try:
            return DeploymentConfig(
                model=self.model,
                gpu=self.gpu,
                tp=self.tp,
                weight_dtype=self.dtype,
                kv_dtype=self.kv_dtype,
                max_num_seqs=self.max_num_seqs,
                max_num_batched_tokens=self.max_batched,
                drafter=drafter_for(self.method, self.draft),
                **{k: v for k, v in extra.items() if v is not None},
            )
        except (ConfigError, ValidationError) as exc:
            config_error(exc, "--method/--draft")


@dataclass(frozen=True)
class LengthFlags:
    """Request lengths, as flags: an option group (:mod:`alphagate.cli._groups`)."""

    prompt_len: PromptLenOpt = DEFAULT_PROMPT_LEN
    output_len: OutputLenOpt = DEFAULT_OUTPUT_LEN

    def workload(self, classes: tuple[TrafficClass, ...] | None = None) -> WorkloadConfig:
        """The workload of these lengths and ``classes`` (the default mix when None)."""
        return workload(self.prompt_len, self.output_len, classes)


@dataclass(frozen=True)
class CostFlags:
    """The step-time model's coefficients and engine settings given as flags (None: not given):
    an option group (:mod:`alphagate.cli._groups`)."""

    step_overhead_ms: StepOverheadOpt = None
    per_seq_overhead_us: PerSeqOverheadOpt = None
    per_token_overhead_us: PerTokenOverheadOpt = None
    draft_overhead_ms: DraftOverheadOpt = None
    spec_step_overhead_ms: SpecOverheadOpt = None
    target_time_scale: TargetScaleOpt = None
    draft_time_scale: DraftScaleOpt = None
    draft_tp: DraftTpOpt = None
    cudagraph_max_tokens: CudagraphOpt = None

    def apply(self, dep: DeploymentConfig) -> DeploymentConfig:
        from alphagate.specs.deployment import NgramDrafter

        update: dict[str, object] = {
            f.name: getattr(self, f.name)
            for f in fields(self)
            if f.name != "draft_overhead_ms" and getattr(self, f.name) is not None
        }
        if self.draft_overhead_ms is not None:
            d = dep.drafter
            key = "cpu_cost_ms" if isinstance(d, NgramDrafter) else "forward_overhead_ms"
            update["drafter"] = d.model_copy(update={key: self.draft_overhead_ms})
        try:
            return DeploymentConfig.model_validate({**dep.model_dump(), **update})
        except ValidationError as exc:
            config_error(exc, "--draft-tp/--cudagraph-max-tokens")


#: The calibration profile's name for each deployment flag (its parameter name elsewhere).
_PROFILE_NAME = {"max_batched": "max_num_batched_tokens"}


def calibrated_deployment(
    ctx: typer.Context, from_flags: DeploymentConfig, calibration: Path | None, flags: CostFlags
) -> tuple[DeploymentConfig, CalibrationProfile | None]:
    """The deployment a verb runs: its flags', or the calibration profile's (whose terms the
    coefficients were fitted for) — then the coefficient flags given on top."""
    if calibration is None:
        return flags.apply(from_flags), None
    from alphagate.specs.calibration import load_profile

    try:
        profile = load_profile(calibration)
    except ConfigError as exc:
        fail(str(exc), "--calibration")
    asked = {
        _PROFILE_NAME.get(f.name, f.name): ctx.params[f.name]
        for f in fields(DeploymentFlags)
        if f.name in ctx.params and given(ctx, f.name)
    }
    try:
        profile.check_fits(asked, str(calibration))
    except ConfigError as exc:
        config_error(exc)
    fitted = profile.deployment
    return flags.apply(fitted), profile


def given(ctx: typer.Context, param: str) -> bool:
    """Whether the parameter ``param`` (its Python name) was typed on the command line or set
    from the environment, not left at its default."""
    source = ctx.get_parameter_source(param)
    return source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP")
