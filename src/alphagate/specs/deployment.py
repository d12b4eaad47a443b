"""A deployment: model, GPU, tensor parallelism, dtypes, engine limits and the drafter.

The user-facing configuration is one frozen pydantic tree (:class:`DeploymentConfig` with a
discriminated :data:`DrafterConfig`), built once by :func:`drafter_for` and the CLI and handed
down. :func:`resolve_deployment` turns it into numbers — shapes, the GPU with efficiency overrides
applied, a tensor-parallel degree that fits, and the KV-cache room left after weights — that the
step-time model in :mod:`alphagate.sim.cost` consumes. The KV room and the largest batch follow
one rule (:func:`kv_tokens_needed`, :class:`BatchRoom`) for every verb, per arm: the server without
speculation has the whole KV cache for the target's tokens, the speculative one shares it with the
drafter's KV and holds draft and lookahead slots for every running sequence
(:func:`speculative_kv_slots`), so it holds fewer sequences.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Final, Literal, get_args

from pydantic import Field, model_validator

from alphagate.core.errors import ConfigError, SpecError
from alphagate.core.records import Frozen
from alphagate.core.shapes import TransformerShape
from alphagate.specs.gpus import GpuSpec, resolve_gpu
from alphagate.specs.models import MODEL_PRESETS, native_dtype, resolve_model
from alphagate.specs.workload import WorkloadConfig
from alphagate.theory.memory import (
    Footprint,
    eagle3_head_footprint,
    eagle_head_footprint,
    model_footprint,
)
from alphagate.theory.roofline import compute_bound_tokens, weight_read_seconds

__all__ = [
    "HOST_DRAFTERS",
    "KV_DTYPES",
    "METHODS",
    "TP_CHOICES",
    "WEIGHT_DTYPES",
    "ArmCaps",
    "BatchRoom",
    "DeploymentConfig",
    "DeploymentSummary",
    "DraftModelDrafter",
    "DrafterConfig",
    "Eagle3Drafter",
    "EagleDrafter",
    "KvDtype",
    "Method",
    "MtpDrafter",
    "NgramDrafter",
    "ResolvedDeployment",
    "SuffixDrafter",
    "SuffixParams",
    "WeightDtype",
    "drafter_for",
    "kv_tokens_needed",
    "resolve_deployment",
    "speculative_kv_slots",
]

Method = Literal["eagle3", "eagle", "draft_model", "ngram", "mtp", "suffix"]
WeightDtype = Literal["bf16", "fp8", "int4"]
KvDtype = Literal["bf16", "fp8"]
METHODS: Final[tuple[str, ...]] = get_args(Method)
WEIGHT_DTYPES: Final[tuple[str, ...]] = get_args(WeightDtype)
KV_DTYPES: Final[tuple[str, ...]] = get_args(KvDtype)
TP_CHOICES: Final = (1, 2, 4, 8)
#: The draft model used for its *shape* when ``--draft`` names a hub checkpoint, not a local file.
FALLBACK_DRAFT_MODEL: Final = "llama-3.2-1b"
#: Share of GPU memory kept for activations and CUDA graphs (not KV, not weights).
ACTIVATION_RESERVE: Final = 0.04
#: Host time per engine step (ms): SGLang's measured decode rate of Llama-3.1-8B on one H100
#: (158 tok/s at batch 1, SGLang docs) leaves about 1.0 ms per step beyond the forward's weight
#: and KV reads; the kernel gaps and the sampler, terms of their own, take about 0.17 ms of it at
#: batch 1, so the host part is the rest.
STEP_OVERHEAD_MS: Final = 0.85
#: Host time per step that async scheduling overlaps with the forward (scheduling, input
#: preparation, output processing): vLLM v0.6 spent 29% of a Llama-3-8B H100 step scheduling
#: (vLLM blog, 2024-09-05: ~2 ms of a ~7 ms step); the V1 engine's leaner loop, about half.
SYNC_STEP_OVERHEAD_MS: Final = 1.0


class _DrafterBase(Frozen):
    forward_overhead_ms: float = Field(
        default=0.10, ge=0, description="fixed cost per draft forward (kernel launches, sampling)"
    )
    checkpoint: str | None = Field(
        default=None, description="the draft checkpoint (path or repo id) the engine loads"
    )


class Eagle3Drafter(_DrafterBase):
    """EAGLE-3 head derived from the target config (fc 3h→h, one 2h-wide layer, draft-vocab LM head)."""

    method: Literal["eagle3"] = "eagle3"
    draft_vocab_size: int = Field(default=32_000, gt=0)

    def footprint(self, target: TransformerShape, dtype: str, kv_dtype: str) -> Footprint:
        return eagle3_head_footprint(
            target, dtype, draft_vocab_size=self.draft_vocab_size, kv_dtype=kv_dtype
        )


class EagleDrafter(_DrafterBase):
    """EAGLE-1 head: fc 2h→h and one decoder layer; uses the target's LM head."""

    method: Literal["eagle"] = "eagle"

    def footprint(self, target: TransformerShape, dtype: str, kv_dtype: str) -> Footprint:
        return eagle_head_footprint(target, dtype, kv_dtype=kv_dtype, kind="eagle")


class MtpDrafter(_DrafterBase):
    """Multi-token-prediction module: one extra decoder layer and the target's LM head."""

    method: Literal["mtp"] = "mtp"

    def footprint(self, target: TransformerShape, dtype: str, kv_dtype: str) -> Footprint:
        return eagle_head_footprint(target, dtype, kv_dtype=kv_dtype, kind="mtp")


class DraftModelDrafter(_DrafterBase):
    """A classic smaller draft model: ``model`` (a preset or a local config.json) sets its shape."""

    method: Literal["draft_model"] = "draft_model"
    model: str = FALLBACK_DRAFT_MODEL

    def shape(self) -> TransformerShape:
        return resolve_model(self.model)

    def footprint(self, target: TransformerShape, dtype: str, kv_dtype: str) -> Footprint:
        return model_footprint(self.shape(), dtype, kv_dtype=kv_dtype)


class NgramDrafter(Frozen):
    """Prompt lookup / n-gram drafting: CPU-side, near-zero GPU cost; acceptance comes from traffic."""

    method: Literal["ngram"] = "ngram"
    cpu_cost_ms: float = Field(default=0.05, ge=0, description="host-side lookup time per step")
    prompt_lookup_min: int = Field(default=2, ge=1)
    prompt_lookup_max: int = Field(default=4, ge=1)
    checkpoint: None = None

    def footprint(self, target: TransformerShape, dtype: str, kv_dtype: str) -> None:
        return None


class SuffixParams(Frozen):
    """Suffix decoding's parameters, with vLLM 0.32's names (less their ``suffix_decoding_``
    prefix), defaults and bounds (``vllm/config/speculative.py``, ``_validate_suffix_decoding``)."""

    max_tree_depth: int = Field(
        default=24, ge=1, description="depth of the prompt and response trees: match + draft"
    )
    max_cached_requests: int = Field(
        default=10_000, ge=0, description="responses the global tree keeps (FIFO); 0: none"
    )
    max_spec_factor: float = Field(
        default=1.0, ge=0, description="a draft is at most this × the matched suffix's length"
    )
    min_token_prob: float = Field(
        default=0.1, ge=0, le=1, description="stop drafting below this estimated probability"
    )


class SuffixDrafter(SuffixParams):
    """Suffix decoding (vLLM ``method: "suffix"``, arctic-inference's suffix trees over the
    prompt and the server's past responses): host-side, no GPU cost; it drafts a variable
    number of tokens per step, up to ``num_speculative_tokens``, so its acceptance is a
    measured draft-length profile (``measure offline --drafter suffix``)."""

    method: Literal["suffix"] = "suffix"
    cpu_cost_ms: float = Field(
        default=0.02,
        ge=0,
        description="host time per decoding sequence per step: a walk of its prompt's tree and "
        "of the responses' tree, and appending the step's tokens to both (about 0.012 ms with "
        "400 cached responses on one core, benchmarks/bench_offline_suffix.py)",
    )
    checkpoint: None = None

    def footprint(self, target: TransformerShape, dtype: str, kv_dtype: str) -> None:
        return None


#: Drafters that run on the host, with no weights, KV cache or GPU time: their host cost is
#: ``cpu_cost_ms`` (per step for n-gram, per decoding sequence for suffix decoding).
HOST_DRAFTERS: Final = (NgramDrafter, SuffixDrafter)

DrafterConfig = Annotated[
    Eagle3Drafter | EagleDrafter | MtpDrafter | DraftModelDrafter | NgramDrafter | SuffixDrafter,
    Field(discriminator="method"),
]


def _is_local_model(name: str) -> bool:
    return name.strip().lower() in MODEL_PRESETS or Path(name).exists()


def drafter_for(method: str, draft: str | None = None) -> DrafterConfig:
    """The drafter for ``--method`` (and ``--draft``), the one place a method becomes a drafter.

    For ``draft_model``, ``draft`` is a preset, a local config.json (its shape is modelled) or a
    hub id (kept for the engine config; the shape of Llama-3.2-1B is modelled instead).
    """
    m = method.strip().lower()
    if m == "eagle3":
        return Eagle3Drafter(checkpoint=draft)
    if m == "eagle":
        return EagleDrafter(checkpoint=draft)
    if m == "mtp":
        return MtpDrafter(checkpoint=draft)
    if m == "ngram":
        return NgramDrafter()
    if m == "suffix":
        return SuffixDrafter()
    if m == "draft_model":
        model = draft if draft is not None and _is_local_model(draft) else FALLBACK_DRAFT_MODEL
        return DraftModelDrafter(model=model, checkpoint=draft)
    raise ConfigError(f"unknown method {method!r}; use one of {', '.join(METHODS)}")


class DeploymentConfig(Frozen):
    """Where the model runs and the engine limits that shape batching."""

    model: str = Field(default="llama-3.3-70b-fp8", description="target: a preset or a config.json")
    gpu: str = Field(default="h100", description="GPU preset or a spec JSON file")
    tp: int | None = Field(
        default=None, ge=1, le=64, description="tensor-parallel degree; None = smallest that fits"
    )
    weight_dtype: WeightDtype = Field(
        default="fp8",
        description="weight dtype; not given, the dtype the model's checkpoint is stored in",
    )
    kv_dtype: KvDtype = "bf16"
    bw_efficiency: float | None = Field(default=None, gt=0, le=1)
    compute_efficiency: float | None = Field(default=None, gt=0, le=1)
    gpu_memory_utilization: float = Field(default=0.90, gt=0, le=1)
    step_overhead_ms: float = Field(
        default=STEP_OVERHEAD_MS,
        ge=0,
        le=1000,
        description="host time per engine step: scheduler, input preparation, graph launch",
    )
    per_seq_overhead_us: float = Field(
        default=2.0, ge=0, le=1e6, description="host time per running sequence per step"
    )
    per_token_overhead_us: float = Field(
        default=0.0,
        ge=0,
        le=1e6,
        description="host time per scheduled token per step (0: vLLM V1 detokenizes and streams "
        "in its front-end process, off the engine's critical path)",
    )
    spec_seq_overhead_us: float = Field(
        default=0.0,
        ge=0,
        le=1e6,
        description="host time per decoding sequence per speculative step, whatever K is: the "
        "verify's and the rejection sampler's per-sequence work (0: batched on a GPU; "
        "alphagate calibrate fits it where the data call for it)",
    )
    draft_seq_overhead_us: float = Field(
        default=0.0,
        ge=0,
        le=1e6,
        description="host time per decoding sequence per draft forward: the drafter's attention "
        "metadata, rebuilt for every forward (0: on a GPU it is built with batched tensor ops; "
        "vLLM's CPU build schedules its attention per request; alphagate calibrate fits it)",
    )
    spec_step_overhead_ms: float = Field(
        default=0.0,
        ge=0,
        le=1000,
        description="host time per speculative step whatever K is: rejection sampler and "
        "proposer set-up (0: no documented figure; alphagate calibrate fits it)",
    )
    async_scheduling: bool | None = Field(
        default=None,
        description="vLLM's async scheduling (--async-scheduling / --no-async-scheduling); None: "
        "vLLM's default, on unless the drafting method forces it off (n-gram on the CPU does, "
        "vllm/config/vllm.py)",
    )
    sync_step_overhead_ms: float = Field(
        default=SYNC_STEP_OVERHEAD_MS,
        ge=0,
        le=1000,
        description="host time per step that async scheduling hides behind the forward, paid "
        "by a server (or an arm) that runs without it",
    )
    target_time_scale: float = Field(
        default=1.0,
        gt=0,
        le=1000,
        allow_inf_nan=False,
        description="× the target's modelled GPU time (a calibration fits it)",
    )
    draft_time_scale: float = Field(
        default=1.0,
        gt=0,
        le=1000,
        allow_inf_nan=False,
        description="× the drafter's modelled GPU time (a calibration fits it)",
    )
    draft_tp: int | None = Field(
        default=None,
        ge=1,
        le=64,
        description="the drafter's tensor-parallel degree (vLLM draft_tensor_parallel_size: 1 or "
        "the target's); None = the target's",
    )
    cudagraph_max_tokens: int | None = Field(
        default=None,
        ge=0,
        le=1_048_576,
        description="largest CUDA-graph capture size in tokens; None = vLLM's default "
        "min(2 · max_num_seqs, 512); 0 = eager (--enforce-eager)",
    )
    max_num_seqs: int = Field(default=256, ge=1, le=65_536)
    max_num_batched_tokens: int = Field(default=8192, ge=1, le=1_048_576)
    drafter: DrafterConfig = Field(default_factory=Eagle3Drafter)

    @model_validator(mode="before")
    @classmethod
    def _native_dtype(cls, data: object) -> object:
        """No weight dtype given (or None): the checkpoint's own (:func:`native_dtype`)."""
        if isinstance(data, dict) and data.get("weight_dtype") is None:
            model = data.get("model", cls.model_fields["model"].default)
            data = {**data, "weight_dtype": native_dtype(str(model))}
        return data

    @property
    def method(self) -> str:
        return self.drafter.method


def kv_tokens_needed(concurrency: int, workload: WorkloadConfig, max_num_seqs: int) -> int:
    """KV room a deployment needs: every running sequence at its full length.

    The batch never exceeds ``max_num_seqs``, so that caps the sequences counted.
    """
    return int(min(concurrency, max_num_seqs) * workload.mean_sequence_tokens())


def speculative_kv_slots(drafter: DrafterConfig, k: int, *, launched: int | None = None) -> int:
    """KV slots a running sequence holds beyond its own tokens at a step of K drafts, on a
    server started with ``launched`` (``num_speculative_tokens``; None: K itself) — 0 on a
    server without speculation.

    vLLM 0.32's scheduler allocates each running request its computed tokens plus the step's
    new ones — the K unverified drafts among them — and ``VllmConfig.num_lookahead_tokens`` more
    (``vllm/v1/core/sched/scheduler.py``, ``kv_cache_manager.allocate_slots``): the launched K
    for EAGLE, EAGLE-3, MTP and a draft model, whose drafter writes KV past the verified range,
    at every step, a step that a batch-size schedule (``num_speculative_tokens_per_batch_size``)
    runs with fewer drafts or none included; none for n-gram and suffix decoding, which keep no
    KV (``vllm/config/vllm.py``).
    """
    launched = k if launched is None else launched
    if launched <= 0:
        return 0
    return k if isinstance(drafter, HOST_DRAFTERS) else k + launched


class ArmCaps(Frozen):
    """Running sequences of each arm of a comparison: at most what its KV room holds
    (:meth:`BatchRoom.largest_batch`), the rest of its requests queue."""

    baseline: int = Field(ge=1, description="the server without speculation")
    speculative: int = Field(
        ge=1,
        description="the speculative server: its KV room shared with the drafter's, each "
        "sequence holding its draft and lookahead slots",
    )


@dataclass(frozen=True)
class BatchRoom:
    """What caps each arm's running batch: ``max_num_seqs``, and the KV room in tokens of the
    server without speculation (the target's alone) and of the speculative one (the drafter's
    KV takes its share of the same cache, ``vllm/v1/worker/gpu_model_runner.py``,
    ``get_kv_cache_spec``: every attention layer, the drafter's included)."""

    max_num_seqs: int
    kv_tokens_baseline: int
    kv_tokens_speculative: int
    drafter: DrafterConfig

    def largest_batch(self, sequence_tokens: float, k: int, *, launched: int | None = None) -> int:
        """The most sequences of ``sequence_tokens`` each (at their full length) one arm holds,
        capped by ``max_num_seqs``: K = 0 the server without speculation, K ≥ 1 the speculative
        one, whose sequences also hold :func:`speculative_kv_slots`. ``launched``: the K the
        speculative server was started with, where a batch-size schedule runs K (0 included)
        below it — it keeps the drafter's KV and its lookahead slots."""
        started = k if launched is None else launched
        room = self.kv_tokens_baseline if started <= 0 else self.kv_tokens_speculative
        per_seq = sequence_tokens + speculative_kv_slots(self.drafter, k, launched=launched)
        return max(1, min(self.max_num_seqs, int(room // per_seq)))


class DeploymentSummary(Frozen):
    """The resolved deployment as data, next to its sentence (:meth:`ResolvedDeployment.describe`)."""

    model: str
    model_ref: str | None = Field(
        default=None, description="the model as given: a preset slug or a config.json path"
    )
    gpu: str
    tp: int
    tp_was_chosen: bool
    weight_dtype: str
    kv_dtype: str
    method: str
    draft: str | None
    weight_bytes_per_gpu: float
    kv_capacity_tokens: int
    kv_capacity_tokens_without_draft: int | None = Field(
        default=None,
        description="the KV room of the server without speculation (kv_capacity_tokens: with "
        "the drafter's KV); None in a file written before it was recorded",
    )
    compute_bound_tokens_per_step: float


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
    kv_capacity_tokens_without_draft: int

    @property
    def weight_bytes_per_gpu(self) -> float:
        return self.target_footprint.weight_bytes / self.tp

    @property
    def draft_tp(self) -> int:
        """The drafter's tensor-parallel degree (the target's unless configured)."""
        return self.config.draft_tp or self.tp

    def async_by_arm(self) -> tuple[bool, bool]:
        """Whether the server without speculation and the one with it schedule asynchronously
        (vLLM 0.32, ``VllmConfig`` post-init: on by default; a speculative method outside
        EAGLE/MTP, draft model and GPU n-gram turns it off — here n-gram, which runs on the
        CPU, and suffix decoding)."""
        if self.config.async_scheduling is False:
            return False, False
        forced_off = isinstance(self.config.drafter, HOST_DRAFTERS)
        return True, not forced_off

    @property
    def cudagraph_max_tokens(self) -> int:
        """Largest captured CUDA-graph size in tokens (vLLM's default when not configured)."""
        if self.config.cudagraph_max_tokens is not None:
            return self.config.cudagraph_max_tokens
        return min(2 * self.config.max_num_seqs, 512)

    @property
    def batch_room(self) -> BatchRoom:
        """What caps each arm's batch (:class:`BatchRoom`)."""
        return BatchRoom(
            max_num_seqs=self.config.max_num_seqs,
            kv_tokens_baseline=self.kv_capacity_tokens_without_draft,
            kv_tokens_speculative=self.kv_capacity_tokens,
            drafter=self.config.drafter,
        )

    def largest_batch(
        self, workload: WorkloadConfig, *, k: int, launched: int | None = None
    ) -> int:
        """The largest batch one arm holds on ``workload``'s sequences: K = 0 the server without
        speculation, K ≥ 1 the speculative one; ``launched``: a speculative server started with
        that K running K (:meth:`BatchRoom.largest_batch`)."""
        return self.batch_room.largest_batch(workload.mean_sequence_tokens(), k, launched=launched)

    def compute_bound_tokens(self) -> float:
        """Tokens per step at which the target's weight GEMMs turn compute-bound (effective rates)."""
        g = self.gpu
        b_w = self.target_footprint.weight_bytes / self.target_footprint.params
        return compute_bound_tokens(
            g.peak_flops(self.config.weight_dtype) * g.compute_efficiency,
            g.hbm_bandwidth * g.bw_efficiency,
            b_w,
        )

    def summary(self) -> DeploymentSummary:
        d = self.config.drafter
        return DeploymentSummary(
            model=self.target.name,
            model_ref=self.config.model,
            gpu=self.gpu.name,
            tp=self.tp,
            tp_was_chosen=self.tp_was_chosen,
            weight_dtype=self.config.weight_dtype,
            kv_dtype=self.config.kv_dtype,
            method=d.method,
            draft=self.draft_footprint.name if self.draft_footprint else None,
            weight_bytes_per_gpu=self.weight_bytes_per_gpu,
            kv_capacity_tokens=self.kv_capacity_tokens,
            kv_capacity_tokens_without_draft=self.kv_capacity_tokens_without_draft,
            compute_bound_tokens_per_step=self.compute_bound_tokens(),
        )

    def describe(self) -> str:
        how = "the smallest that fits" if self.tp_was_chosen else "as configured"
        floor_ms = 1e3 * weight_read_seconds(
            self.weight_bytes_per_gpu, 1.0, self.gpu.hbm_bandwidth * self.gpu.bw_efficiency
        )
        text = (
            f"{self.target.name} {self.config.weight_dtype} on {self.tp}× {self.gpu.name} "
            f"(TP={self.tp}, {how}); weights {self.weight_bytes_per_gpu / 1e9:.1f} GB per GPU, "
            f"≥ {floor_ms:.1f} ms per step to read them; KV room {self.kv_capacity_tokens:,} tokens "
            f"({self.config.kv_dtype}); weight GEMMs turn compute-bound at ≈ "
            f"{self.compute_bound_tokens():.0f} tokens per step"
        )
        d = self.config.drafter
        if isinstance(d, DraftModelDrafter) and d.checkpoint and d.checkpoint != d.model:
            text += f"; draft {d.checkpoint} modelled with the shape of {d.model}"
        return text


def _kv_capacity(
    cfg: DeploymentConfig, gpu: GpuSpec, tp: int, target: Footprint, draft: Footprint | None
) -> int:
    usable = gpu.memory_bytes * tp * (cfg.gpu_memory_utilization - ACTIVATION_RESERVE)
    weights = target.weight_bytes + (draft.weight_bytes if draft else 0.0)
    kv_per_token = target.kv_bytes_per_token + (draft.kv_bytes_per_token if draft else 0.0)
    return max(0, int((usable - weights) // kv_per_token))


def _apply_overrides(cfg: DeploymentConfig, gpu: GpuSpec) -> GpuSpec:
    overrides = {
        k: v
        for k, v in (
            ("bw_efficiency", cfg.bw_efficiency),
            ("compute_efficiency", cfg.compute_efficiency),
        )
        if v is not None
    }
    return gpu.model_copy(update=overrides) if overrides else gpu


def _check_draft_tp(cfg: DeploymentConfig, tp: int) -> None:
    """vLLM's rule (``SpeculativeConfig.draft_tensor_parallel_size``): 1 or the target's TP."""
    if cfg.draft_tp is not None and cfg.draft_tp not in (1, tp):
        raise SpecError(
            f"draft TP {cfg.draft_tp} is neither 1 nor the target's TP ({tp}); vLLM's "
            "draft_tensor_parallel_size can only be 1 or the target's"
        )


def _fitting_tp(
    cfg: DeploymentConfig,
    gpu: GpuSpec,
    candidates: list[int],
    footprints: tuple[Footprint, Footprint | None],
    need: int,
) -> int | None:
    """The first TP whose KV room holds ``need`` tokens with the drafter's share taken, else the
    first whose room without the drafter holds them (the speculative server holds fewer
    sequences and queues the rest, :class:`BatchRoom`); None: neither. The drafts' slots
    (:func:`speculative_kv_slots`) depend on K, which a deployment does not fix: they are not
    counted here, so near the edge the speculative server may hold a few fewer than ``need``."""
    target, draft = footprints

    def holds(tp: int, with_draft: bool) -> bool:
        spec = _kv_capacity(cfg, gpu, tp, target, draft)
        room = spec if with_draft else _kv_capacity(cfg, gpu, tp, target, None)
        return spec > 0 and room >= need

    for with_draft in (True, False):
        tp = next((t for t in candidates if holds(t, with_draft)), None)
        if tp is not None:
            return tp
    return None


def resolve_deployment(
    cfg: DeploymentConfig,
    workload: WorkloadConfig | None = None,
    concurrency: int | None = None,
) -> ResolvedDeployment:
    """Resolve presets, apply efficiency overrides, and pick (or check) TP.

    With ``tp=None`` the smallest TP in 1, 2, 4, 8 (up to the KV-head count) is chosen whose KV
    room holds :func:`kv_tokens_needed` for ``concurrency`` (default: ``max_num_seqs``) sequences of
    the workload beside the drafter's KV — or, where none does, the smallest whose room holds them
    without it, the speculative server queueing what it cannot hold (:func:`_fitting_tp`); a given
    TP is checked the same way. Raises :class:`SpecError` when nothing fits.
    """
    target = resolve_model(cfg.model)
    gpu = _apply_overrides(cfg, resolve_gpu(cfg.gpu))
    t_fp = model_footprint(target, cfg.weight_dtype, kv_dtype=cfg.kv_dtype, kind="target")
    d = cfg.drafter
    d_fp = d.footprint(target, cfg.weight_dtype, cfg.kv_dtype)
    need = (
        0
        if workload is None
        else kv_tokens_needed(concurrency or cfg.max_num_seqs, workload, cfg.max_num_seqs)
    )
    if cfg.tp is not None and target.num_attention_heads % cfg.tp:
        raise SpecError(
            f"TP={cfg.tp} does not divide the {target.num_attention_heads} attention heads of "
            f"{target.name}; use one of "
            + ", ".join(str(t) for t in TP_CHOICES if target.num_attention_heads % t == 0)
        )
    candidates = (
        [cfg.tp]
        if cfg.tp is not None
        else [t for t in TP_CHOICES if t <= target.num_key_value_heads]
    )
    tp = _fitting_tp(cfg, gpu, candidates, (t_fp, d_fp), need)
    if tp is None:
        tp_txt = f"TP={cfg.tp}" if cfg.tp is not None else f"any TP in {TP_CHOICES}"
        need_txt = f" with room for {need:,} KV tokens" if need else ""
        raise SpecError(
            f"{target.name} at {cfg.weight_dtype} ({t_fp.weight_bytes / 1e9:.1f} GB of weights) "
            f"does not fit on {gpu.name} ({gpu.memory_bytes / 1e9:.0f} GB) with {tp_txt}{need_txt}"
        )
    _check_draft_tp(cfg, tp)
    return ResolvedDeployment(
        config=cfg,
        target=target,
        gpu=gpu,
        tp=tp,
        tp_was_chosen=cfg.tp is None,
        target_footprint=t_fp,
        draft_footprint=d_fp,
        draft_shape=d.shape() if isinstance(d, DraftModelDrafter) else None,
        kv_capacity_tokens=_kv_capacity(cfg, gpu, tp, t_fp, d_fp),
        kv_capacity_tokens_without_draft=_kv_capacity(cfg, gpu, tp, t_fp, None),
    )
