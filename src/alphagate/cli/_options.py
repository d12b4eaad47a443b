"""The deployment as flags, shared by the verbs that model or run one (an option group,
:mod:`alphagate.cli._groups`, with one default per concept taken from the config records), the
calibration profile taken over it, and options several verbs share."""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from alphagate.cli._check import flag_errors
from alphagate.cli._groups import given
from alphagate.specs.deployment import DeploymentConfig, KvDtype, Method, WeightDtype, drafter_for

if TYPE_CHECKING:
    from alphagate.specs.calibration import CalibrationProfile, EngineSettings

__all__ = [
    "API_KEY_ENV",
    "CalibrationOpt",
    "DeploymentFlags",
    "DtypeOpt",
    "KvDtypeOpt",
    "SeedOpt",
    "api_key_option",
    "calibrated_deployment",
]

_D = DeploymentConfig()

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
#: where every verb that sends or checks a key reads it from when no flag gives it
API_KEY_ENV = "ALPHAGATE_API_KEY"


def api_key_option(help: str) -> Any:
    """``--api-key``, read from :data:`API_KEY_ENV` when not given (``help``: what the verb
    does with it)."""
    return typer.Option("--api-key", envvar=API_KEY_ENV, help=help)


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
DEFAULT_MODEL = _D.model
DEFAULT_GPU = _D.gpu
DEFAULT_DTYPE: WeightDtype | None = None  # the checkpoint's own
DEFAULT_KV_DTYPE: KvDtype = _D.kv_dtype
DEFAULT_METHOD: Method = _D.drafter.method
DEFAULT_MAX_SEQS = _D.max_num_seqs
DEFAULT_MAX_BATCHED = _D.max_num_batched_tokens


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
        with flag_errors("--method/--draft"):
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


#: The calibration profile's name for each deployment flag (its parameter name elsewhere).
_PROFILE_NAME = {"max_batched": "max_num_batched_tokens"}


def calibrated_deployment(
    ctx: typer.Context,
    from_flags: DeploymentConfig,
    calibration: Path | None,
    cost: EngineSettings,
) -> tuple[DeploymentConfig, CalibrationProfile | None]:
    """The deployment a verb runs: its flags', or the calibration profile's (whose terms the
    coefficients were fitted for: :meth:`CalibrationProfile.check_fits` refuses a flag that
    asks for another) — then the coefficients and settings given on top (``cost``)."""
    profile = None
    if calibration is not None:
        from alphagate.specs.calibration import load_profile

        with flag_errors("--calibration"):
            profile = load_profile(calibration)
        asked = {
            _PROFILE_NAME.get(f.name, f.name): ctx.params[f.name]
            for f in fields(DeploymentFlags)
            if f.name in ctx.params and given(ctx, f.name)
        }
        with flag_errors():
            profile.check_fits(asked, str(calibration))
    with flag_errors("--draft-tp/--cudagraph-max-tokens"):
        return cost.apply(from_flags if profile is None else profile.deployment), profile
