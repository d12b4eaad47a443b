"""Options shared by several verbs, with one default per concept (taken from the config records),
and the functions that turn them into the typed configs of the lower layers."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError

from alphagate.cli._app import config_error, fail
from alphagate.core.errors import ConfigError
from alphagate.core.traffic import TrafficClass, parse_traffic_class, validate_classes
from alphagate.specs.deployment import DeploymentConfig, KvDtype, Method, WeightDtype, drafter_for
from alphagate.specs.workload import LengthDist, WorkloadConfig, parse_length

__all__ = [
    "DraftOpt",
    "DtypeOpt",
    "GpuOpt",
    "KvDtypeOpt",
    "MaxBatchedOpt",
    "MaxSeqsOpt",
    "MethodOpt",
    "ModelOpt",
    "OutputLenOpt",
    "PromptLenOpt",
    "SeedOpt",
    "TpOpt",
    "check_output_path",
    "deployment",
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
        help="Target: a preset (llama-3.1-8b, llama-3.3-70b, llama-3.2-1b) or a config.json.",
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
DtypeOpt = Annotated[WeightDtype, typer.Option("--dtype", help="Weight dtype.")]
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

DEFAULT_MODEL = _D.model
DEFAULT_GPU = _D.gpu
DEFAULT_DTYPE: WeightDtype = _D.weight_dtype
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


def deployment(
    *,
    model: str,
    gpu: str,
    tp: int | None,
    dtype: WeightDtype,
    kv_dtype: KvDtype,
    method: Method,
    draft: str | None,
    max_num_seqs: int = DEFAULT_MAX_SEQS,
    max_batched: int = DEFAULT_MAX_BATCHED,
    **extra: float | None,
) -> DeploymentConfig:
    """The deployment config from the shared flags (extra: efficiencies and overheads)."""
    try:
        return DeploymentConfig(
            model=model,
            gpu=gpu,
            tp=tp,
            weight_dtype=dtype,
            kv_dtype=kv_dtype,
            max_num_seqs=max_num_seqs,
            max_num_batched_tokens=max_batched,
            drafter=drafter_for(method, draft),
            **{k: v for k, v in extra.items() if v is not None},
        )
    except (ConfigError, ValidationError) as exc:
        config_error(exc, "--method/--draft")


def check_output_path(path: Path, flag: str, *, directory: bool) -> None:
    """Refuse an output path that cannot be written, before any long work starts."""
    import os

    target = path if directory else path.parent
    if directory and path.exists() and not path.is_dir():
        fail(f"{path} exists and is not a folder", flag)
    if not directory and path.exists() and not path.is_file():
        kind = "a folder" if path.is_dir() else "not a regular file"
        fail(f"{path} is {kind}; give a file path", flag)
    probe = target
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir() or not os.access(probe, os.W_OK | os.X_OK):
        fail(f"{target} cannot be written (no permission, or a read-only file system)", flag)
    if str(path.resolve()).startswith(("/proc/", "/sys/")):
        fail(f"{path} is not a place for output", flag)
