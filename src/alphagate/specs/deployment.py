"""A deployment: model, GPU, tensor parallelism, dtypes, engine limits and the drafter.

The user-facing configuration is one frozen pydantic tree (:class:`DeploymentConfig` with a
discriminated :data:`DrafterConfig`). :func:`resolve_deployment` turns it into numbers — shapes,
the GPU with efficiency overrides applied, a tensor-parallel degree that fits, and the KV-cache
capacity left after weights — that the step-time model in :mod:`alphagate.sim.cost` consumes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import Field

from alphagate.quantities import Frozen, TransformerShape
from alphagate.specs.gpus import GpuSpec, resolve_gpu
from alphagate.specs.models import SpecError, resolve_model
from alphagate.theory.memory import (
    BYTES_PER_PARAM,
    Footprint,
    eagle3_head_footprint,
    eagle_head_footprint,
    model_footprint,
)

__all__ = [
    "DeploymentConfig",
    "DraftModelDrafter",
    "DrafterConfig",
    "Eagle3Drafter",
    "EagleDrafter",
    "MtpDrafter",
    "NgramDrafter",
    "ResolvedDeployment",
    "resolve_deployment",
]

WeightDtype = Literal["bf16", "fp8", "int4"]
KvDtype = Literal["bf16", "fp8"]
TP_CHOICES = (1, 2, 4, 8)


class _DrafterBase(Frozen):
    forward_overhead_ms: float = Field(
        default=0.10, ge=0, description="fixed cost per draft forward (kernel launches, sampling)"
    )


class Eagle3Drafter(_DrafterBase):
    """EAGLE-3 head derived from the target config (fc 3h→h, one 2h-wide layer, draft-vocab LM head)."""

    method: Literal["eagle3"] = "eagle3"
    draft_vocab_size: int = Field(default=32_000, gt=0)


class EagleDrafter(_DrafterBase):
    """EAGLE-1 head: fc 2h→h and one decoder layer; uses the target's LM head."""

    method: Literal["eagle"] = "eagle"


class MtpDrafter(_DrafterBase):
    """Multi-token-prediction module: one extra decoder layer and the target's LM head."""

    method: Literal["mtp"] = "mtp"


class DraftModelDrafter(_DrafterBase):
    """A classic smaller draft model (a preset or a local config.json)."""

    method: Literal["draft_model"] = "draft_model"
    model: str = "llama-3.2-1b"


class NgramDrafter(Frozen):
    """Prompt lookup / n-gram drafting: CPU-side, near-zero GPU cost; acceptance comes from traffic."""

    method: Literal["ngram"] = "ngram"
    cpu_cost_ms: float = Field(default=0.05, ge=0, description="host-side lookup time per step")


DrafterConfig = Annotated[
    Eagle3Drafter | EagleDrafter | MtpDrafter | DraftModelDrafter | NgramDrafter,
    Field(discriminator="method"),
]


class DeploymentConfig(Frozen):
    """Where the model runs and the engine limits that shape batching."""

    model: str = "llama-3.3-70b"
    gpu: str = "h100"
    tp: int | None = Field(
        default=None, description="tensor-parallel degree; None = smallest that fits"
    )
    weight_dtype: WeightDtype = "bf16"
    kv_dtype: KvDtype = "bf16"
    bw_efficiency: float | None = Field(default=None, gt=0, le=1)
    compute_efficiency: float | None = Field(default=None, gt=0, le=1)
    gpu_memory_utilization: float = Field(default=0.90, gt=0, le=1)
    step_overhead_ms: float = Field(
        default=1.0, ge=0, description="scheduler + sampling per engine step"
    )
    per_seq_overhead_us: float = Field(
        default=2.0, ge=0, description="per running sequence per step"
    )
    max_num_seqs: int = Field(default=256, ge=1)
    max_num_batched_tokens: int = Field(default=8192, ge=1)
    drafter: DrafterConfig = Field(default_factory=Eagle3Drafter)


@dataclass(frozen=True)
class ResolvedDeployment:
    """The numbers behind a :class:`DeploymentConfig`."""

    config: DeploymentConfig
    target: TransformerShape
    gpu: GpuSpec
    tp: int
    tp_was_chosen: bool
    target_footprint: Footprint
    draft_footprint: Footprint | None
    draft_shape: TransformerShape | None
    kv_capacity_tokens: int

    @property
    def weight_bytes_per_gpu(self) -> float:
        return self.target_footprint.weight_bytes / self.tp

    def describe(self) -> str:
        how = "chosen as the smallest that fits" if self.tp_was_chosen else "as configured"
        return (
            f"{self.target.name} {self.config.weight_dtype} on {self.tp}× {self.gpu.name} "
            f"(TP={self.tp}, {how}; weights {self.weight_bytes_per_gpu / 1e9:.1f} GB/GPU, "
            f"KV room {self.kv_capacity_tokens:,} tokens at {self.config.kv_dtype})"
        )


def _draft_footprint(
    cfg: DeploymentConfig, target: TransformerShape
) -> tuple[Footprint | None, TransformerShape | None]:
    d = cfg.drafter
    dtype, kv = cfg.weight_dtype, cfg.kv_dtype
    if isinstance(d, Eagle3Drafter):
        return eagle3_head_footprint(
            target, dtype, draft_vocab_size=d.draft_vocab_size, kv_dtype=kv
        ), None
    if isinstance(d, EagleDrafter | MtpDrafter):
        fp = eagle_head_footprint(target, dtype, kv_dtype=kv)
        return Footprint(
            fp.name.replace("EAGLE", "MTP") if isinstance(d, MtpDrafter) else fp.name,
            d.method,
            fp.params,
            fp.weight_bytes,
            fp.kv_bytes_per_token,
            1,
        ), None
    if isinstance(d, DraftModelDrafter):
        shape = resolve_model(d.model)
        return model_footprint(shape, dtype, kv_dtype=kv), shape
    return None, None


def _kv_capacity(
    cfg: DeploymentConfig, gpu: GpuSpec, tp: int, target: Footprint, draft: Footprint | None
) -> int:
    usable = gpu.memory_bytes * cfg.gpu_memory_utilization * tp
    weights = target.weight_bytes + (draft.weight_bytes if draft else 0.0)
    activations = 0.04 * gpu.memory_bytes * tp  # activation / CUDA-graph reserve
    kv_per_token = target.kv_bytes_per_token + (draft.kv_bytes_per_token if draft else 0.0)
    return max(0, int((usable - weights - activations) // kv_per_token))


def resolve_deployment(cfg: DeploymentConfig, need_kv_tokens: int = 0) -> ResolvedDeployment:
    """Resolve presets, apply efficiency overrides, and pick (or check) TP.

    With ``tp=None`` the smallest TP in 1, 2, 4, 8 is chosen whose KV room holds
    ``need_kv_tokens`` (e.g. concurrency × mean context). Raises :class:`SpecError` when nothing fits.
    """
    target = resolve_model(cfg.model)
    gpu = resolve_gpu(cfg.gpu)
    overrides = {
        k: v
        for k, v in (
            ("bw_efficiency", cfg.bw_efficiency),
            ("compute_efficiency", cfg.compute_efficiency),
        )
        if v is not None
    }
    if overrides:
        gpu = gpu.model_copy(update=overrides)
    if cfg.weight_dtype not in BYTES_PER_PARAM:  # pragma: no cover - guarded by the Literal
        raise SpecError(f"unknown weight dtype {cfg.weight_dtype!r}")
    t_fp = model_footprint(target, cfg.weight_dtype, kv_dtype=cfg.kv_dtype, kind="target")
    d_fp, d_shape = _draft_footprint(cfg, target)
    candidates = (
        [cfg.tp]
        if cfg.tp is not None
        else [t for t in TP_CHOICES if t <= target.num_key_value_heads]
    )
    for tp in candidates:
        cap = _kv_capacity(cfg, gpu, tp, t_fp, d_fp)
        if cap > 0 and cap >= need_kv_tokens:
            return ResolvedDeployment(
                cfg, target, gpu, tp, cfg.tp is None, t_fp, d_fp, d_shape, cap
            )
    tp_txt = f"TP={cfg.tp}" if cfg.tp is not None else f"any TP in {TP_CHOICES}"
    need = f" with room for {need_kv_tokens:,} KV tokens" if need_kv_tokens else ""
    raise SpecError(
        f"{target.name} at {cfg.weight_dtype} ({t_fp.weight_bytes / 1e9:.1f} GB of weights) does not fit "
        f"on {gpu.name} ({gpu.memory_bytes / 1e9:.0f} GB) with {tp_txt}{need}"
    )
