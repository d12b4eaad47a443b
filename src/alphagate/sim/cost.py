"""Step-time model of one engine step of a continuous-batching server, as a sum of named terms.

One engine step with K drafts runs the drafter (K forwards) and one target pass over the B·(K+1)
verify tokens plus any prefill chunk. Each forward is priced on the roofline (Williams et al. 2009;
LLM-Viewer, arXiv 2402.16363, sums per-operator times the same way) from the byte and FLOP counts
of its weight GEMMs and KV cache (:mod:`alphagate.theory.memory`'s shapes), with the mechanisms
below — each a term of its own, with its public source::

    step = θ_target · (gemm + attention + sampler + all-reduce + kernels)(target)
         + θ_draft  · (gemm + attention + sampler + all-reduce + kernels)(drafter, K forwards)
         + host_step + host_seq · B_running + host_token · T + host_spec + host_draft · K

- **gemm** — every weight GEMM ``[M, K] × [K, N]`` costs ``max(weight bytes / BW, compute)`` plus
  a share of the smaller of the two that the kernel does not overlap (``gemm_overlap_loss``,
  measured for BF16 and FP8: a layer's GEMMs on an H200 take 1.11–1.19× their M = 1 time at
  M = 128, far below the ridge; INT4 not measured, 0);
  the compute side is tile- and wave-quantized (NVIDIA, "Matrix Multiplication Background User's
  Guide": M is padded to the tile, here 64 rows — the M of Hopper's ``wgmma`` instruction, PTX ISA
  — and tiles run in waves of one per SM; below one wave cuBLAS splits K to fill the GPU). The
  per-layer GEMMs are vLLM's fused QKV, O, gate-up and down projections
  (``vllm/model_executor/models/llama.py``), split over TP; the LM head runs only over the rows
  that are sampled (``logits_indices``);
- **attention** — ``max(KV bytes / BW, 4 · d · query rows · context / F)`` per KV head and layer,
  where a verify pass has K+1 query tokens per sequence and runs the prefill-style kernel: its
  query rows are padded to the kernel's tile, and only kernels that pack the GQA group into the tile
  (FlashAttention-3) avoid multiplying them by the group size; a pure decode step packs the group
  on both (FlashAttention-2's ``seqlenq_ngroups_swapped``). See :mod:`alphagate.specs.gpus`;
- **sampler** — vLLM V1's sampler and rejection sampler read the fp32 logits of every sampled row
  over the whole vocabulary about :data:`SAMPLER_PASSES` times (cast, temperature, softmax, the
  exponential race; ``vllm/v1/sample/sampler.py``, ``rejection_sampler.py``); draft tokens are
  sampled greedily (one argmax pass, vLLM's ``draft_sample_method="greedy"``);
- **all-reduce** — two per layer under TP: latency + ring bytes ``2(TP−1)/TP · T · h · 2`` over
  the link (nccl-tests ``doc/PERFORMANCE.md``: bus bandwidth = algorithm bandwidth · 2(n−1)/n);
- **kernels** — :data:`KERNELS_PER_LAYER` kernels per layer: a step inside a CUDA graph pays a gap
  per kernel; T is padded up to vLLM's next capture size (``vllm/config/vllm.py``: 1, 2, 4, then
  multiples of 8 to 256 and of 16 to ``min(2 · max_num_seqs, 512)``), and past the largest one the
  forward runs eager and cannot be faster than its host issuing one kernel at a time;
- **drafter** — an EAGLE / EAGLE-3 / MTP head or a draft model runs its first forward over every
  token the step scheduled (vLLM's ``EagleProposer.propose`` takes the target's hidden states of
  all of them; EAGLE-3's ``fc`` over 3·hidden runs only there), then K − 1 forwards over B tokens,
  each with an LM head over its own vocabulary (32,000 for the public EAGLE-3 heads) for B rows;
  a draft model has its own shape and its own TP (``draft_tensor_parallel_size``);
- **host** — scheduler and input preparation per step, per running sequence and per scheduled
  token; per speculative step whatever K is (``host_spec``: the rejection sampler's and the
  proposer's set-up — ``vllm/v1/worker/gpu_model_runner.py`` builds the spec-decode metadata and
  calls the proposer once per step, and the proposer's first forward prepares its inputs from
  the target's); and per draft forward (drafter inputs and attention metadata; n-gram: the lookup
  per step; suffix decoding: its tree walks per decoding sequence). Drafts of variable length
  (suffix decoding) are priced at the step's mean drafted tokens per sequence (``k`` a float):
  the verify pass holds Σ (L + 1) tokens either way, and the speculative server's costs apply
  even to a step where nothing was drafted (``proposing``).

``θ_target`` and ``θ_draft`` (``target_time_scale``, ``draft_time_scale``) and the five host
costs are the model's coefficients: defaults from the documented constants, or fitted to a real
server by ``alphagate calibrate``. Every method takes numpy arrays (one element per step or
scenario) or scalars, and returns arrays; :meth:`StepCostModel.step_seconds` prices one step in
Python floats.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, replace
from functools import cached_property, partial
from typing import TYPE_CHECKING, Final, Generic, NamedTuple, TypedDict, TypeVar, cast

import numpy as np
import numpy.typing as npt

from alphagate.core.shapes import TransformerShape
from alphagate.specs.deployment import (
    HOST_DRAFTERS,
    ArmCaps,
    BatchRoom,
    DraftModelDrafter,
    Eagle3Drafter,
    NgramDrafter,
    ResolvedDeployment,
    SuffixDrafter,
)
from alphagate.specs.gpus import GpuSpec
from alphagate.theory.memory import BYTES_PER_PARAM

if TYPE_CHECKING:  # typing has both from Python 3.11; annotations are not evaluated at run time
    from typing_extensions import NotRequired, Unpack

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
#: A term's seconds: arrays of one element per step, or a float for one step priced alone.
_Seconds = TypeVar("_Seconds", float, FloatArray)


__all__ = [
    "COEFFICIENTS",
    "GEMM_TILE_M",
    "GEMM_TILE_N",
    "KERNELS_PER_LAYER",
    "SAMPLER_PASSES",
    "TERMS",
    "Coefficients",
    "ForwardCost",
    "ForwardTerms",
    "Hardware",
    "HostTerms",
    "StepComposition",
    "StepCostModel",
    "StepTerms",
    "build_cost_model",
    "capture_sizes",
]

#: GEMM tile: 64 rows (the M of Hopper's warpgroup MMA, ``wgmma.mma_async.m64nNk16``, PTX ISA) by
#: 128 columns (a common cuBLAS/CUTLASS tile width; NVIDIA's matrix-multiplication guide).
GEMM_TILE_M: Final = 64
GEMM_TILE_N: Final = 128
#: Passes over the logits per sampled row and vocabulary entry, in fp32 units: vLLM V1's sampler at
#: temperature > 0 casts the logits to fp32 (6 B), divides by the temperature in place (8 B), takes
#: the softmax (8 B), draws the exponential race ``probs / q`` (16 B) and its argmax (4 B) — 42 B,
#: about 10 × 4 B (``vllm/v1/sample/sampler.py``, ``ops/topk_topp_sampler.py``); the rejection
#: sampler's softmax and recovered-token draw read as much (``rejection_sampler.py``).
SAMPLER_PASSES: Final = 10
#: Draft tokens are taken greedily: one argmax pass (vLLM ``draft_sample_method="greedy"``).
DRAFT_SAMPLER_PASSES: Final = 1
LOGIT_BYTES: Final = 4.0
#: Kernels per decoder layer in vLLM's Llama: two fused add-RMSNorms, QKV, rotary embedding, KV
#: cache write, attention, O, gate-up, SiLU-and-mul, down (``vllm/model_executor/models/llama.py``),
#: plus two all-reduces under TP; and per forward: embedding, final norm, LM head, logits cast and
#: two sampler kernels.
KERNELS_PER_LAYER: Final = 10
KERNELS_PER_FORWARD: Final = 6


class StepTerms(NamedTuple):
    """The named terms of one step (seconds, before the coefficients), in the order they are
    printed: the target's forward, the drafter's, then the host's counts. Arrays of one element
    per step."""

    target_gemm: FloatArray
    target_attention: FloatArray
    target_sampler: FloatArray
    target_allreduce: FloatArray
    target_kernels: FloatArray
    draft_gemm: FloatArray
    draft_attention: FloatArray
    draft_sampler: FloatArray
    draft_allreduce: FloatArray
    draft_kernels: FloatArray
    host_step: FloatArray
    host_seq: FloatArray
    host_token: FloatArray
    host_spec: FloatArray
    host_spec_seq: FloatArray
    host_draft: FloatArray
    host_draft_seq: FloatArray
    host_sync: FloatArray


TERMS: Final = StepTerms._fields
#: The coefficients and the terms each multiplies (what ``alphagate calibrate`` fits).
COEFFICIENTS: Final[dict[str, tuple[str, ...]]] = {
    "target_time_scale": tuple(t for t in TERMS if t.startswith("target_")),
    "draft_time_scale": tuple(t for t in TERMS if t.startswith("draft_")),
    "step_overhead_s": ("host_step",),
    "per_seq_overhead_s": ("host_seq",),
    "per_token_overhead_s": ("host_token",),
    "spec_step_overhead_s": ("host_spec",),
    "spec_seq_overhead_s": ("host_spec_seq",),
    "draft_forward_overhead_s": ("host_draft",),
    "draft_seq_overhead_s": ("host_draft_seq",),
    "sync_step_overhead_s": ("host_sync",),
}


def capture_sizes(max_tokens: int) -> IntArray:
    """vLLM's default CUDA-graph capture sizes up to ``max_tokens`` (``vllm/config/vllm.py``):
    1, 2, 4, multiples of 8 below 256, then multiples of 16."""
    sizes = [1, 2, 4, *range(8, 256, 8), *range(256, max_tokens + 1, 16)]
    return np.asarray([s for s in sizes if s <= max_tokens], dtype=np.int64)


@dataclass(frozen=True)
class Hardware:
    """Effective rates and kernel figures of one GPU (see :mod:`alphagate.specs.gpus`)."""

    bandwidth: float  # achieved HBM bytes/s
    gemm_flops: float  # achieved FLOP/s of the weight GEMMs (weight dtype)
    attn_flops: float  # achieved FLOP/s of attention (bf16)
    sm_count: int
    link_bandwidth: float
    allreduce_latency_s: float
    attention_tile_m: int
    attention_packs_gqa: bool
    kernel_gap_s: float
    kernel_launch_s: float
    gemm_overlap_loss: float = 0.0
    tile_m: int = GEMM_TILE_M
    tile_n: int = GEMM_TILE_N

    @classmethod
    def of(cls, gpu: GpuSpec, dtype: str) -> Hardware:
        return cls(
            bandwidth=gpu.hbm_bandwidth * gpu.bw_efficiency,
            gemm_flops=gpu.peak_flops(dtype) * gpu.compute_efficiency,
            attn_flops=gpu.bf16_flops * gpu.compute_efficiency,
            sm_count=gpu.sm_count,
            link_bandwidth=gpu.interconnect_bandwidth,
            allreduce_latency_s=gpu.allreduce_latency_s,
            attention_tile_m=gpu.attention_tile_m,
            attention_packs_gqa=gpu.attention_packs_gqa,
            kernel_gap_s=gpu.kernel_gap_s,
            kernel_launch_s=gpu.kernel_launch_s,
            gemm_overlap_loss=(
                gpu.gemm_overlap_loss_int4 if dtype == "int4" else gpu.gemm_overlap_loss
            ),
            tile_m=gpu.gemm_tile_m,
            tile_n=gpu.gemm_tile_n,
        )


@dataclass(frozen=True)
class Gemms:
    """Weight GEMMs of one forward on one GPU: output features N and input features K (after the
    TP split) and how many times each runs per forward, all of shape ``[G]``."""

    n: FloatArray
    k: FloatArray
    count: FloatArray

    @classmethod
    def of(cls, rows: list[tuple[float, float, float]]) -> Gemms:
        table = np.asarray(rows, dtype=np.float64).reshape(-1, 3)  # [G, (N, K, count)]
        return cls(table[:, 0], table[:, 1], table[:, 2])

    @property
    def params(self) -> float:
        return float((self.n * self.k * self.count).sum())

    def seconds(self, m: npt.ArrayLike, bytes_per_weight: float, hw: Hardware) -> FloatArray:
        """Time of every GEMM at M tokens, summed: ``max(weight read, quantized compute)`` plus
        the overlap loss times the smaller of the read and the unpadded compute."""
        rows = np.asarray(m, dtype=np.float64)[..., None]  # [..., 1]
        read = self.n * self.k * bytes_per_weight / hw.bandwidth  # [G]
        tiles = np.ceil(rows / hw.tile_m) * np.ceil(self.n / hw.tile_n)  # [..., G]
        # whole waves once a GEMM has more tiles than SMs; below one wave, split-K fills the GPU
        waves = np.where(tiles > hw.sm_count, np.ceil(tiles / hw.sm_count) * hw.sm_count, tiles)
        compute = waves * (2.0 * hw.tile_m * hw.tile_n) * self.k / hw.gemm_flops
        # streaming and MMAs do not overlap perfectly: below the ridge the time grows with M
        # (measured on an H200, see :mod:`alphagate.specs.gpus`)
        loss = hw.gemm_overlap_loss * np.minimum(read, 2.0 * rows * self.n * self.k / hw.gemm_flops)
        seconds = np.where(rows > 0, np.maximum(read, compute) + loss, 0.0)  # [..., G]
        return np.asarray((seconds * self.count).sum(-1))


class _Table:
    """A GEMM set's time at M = 0..n tokens, precomputed; interpolated, formula beyond."""

    def __init__(self, gemms: Gemms, bytes_per_weight: float, hw: Hardware, n: int) -> None:
        self.gemms, self.bytes_per_weight, self.hw = gemms, bytes_per_weight, hw
        self.m = np.arange(n + 1, dtype=np.float64)  # [n + 1]
        self.seconds = gemms.seconds(self.m, bytes_per_weight, hw)  # [n + 1]
        self.top = float(n)
        self.empty = gemms.n.size == 0

    @cached_property
    def values(self) -> list[float]:
        """The table as Python floats, for one step's lookup (:class:`_OneStep`)."""
        values: list[float] = self.seconds.tolist()
        return values

    def __call__(self, m: FloatArray) -> FloatArray | float:
        if self.empty:
            return 0.0
        if m.size == 0 or float(m.max()) <= self.top:
            return np.asarray(np.interp(m, self.m, self.seconds))
        return np.where(
            m <= self.top,
            np.interp(np.minimum(m, self.top), self.m, self.seconds),
            self.gemms.seconds(m, self.bytes_per_weight, self.hw),
        )


class ForwardTerms(NamedTuple, Generic[_Seconds]):
    """Seconds of one forward, by mechanism (arrays of one element per step, or floats for one
    step priced alone)."""

    gemm: _Seconds
    attention: _Seconds
    sampler: _Seconds
    allreduce: _Seconds
    kernels: _Seconds


@dataclass(frozen=True)
class ForwardCost:
    """One model's forward on one GPU after its TP split: the target, or a drafter."""

    name: str
    hw: Hardware
    tp: int
    layers: int
    gemms: Gemms  # per-layer GEMMs (× layers), every forward
    first_gemms: Gemms  # GEMMs of the first forward only (EAGLE-3's fc over 3·hidden)
    head: Gemms  # the LM head, over the sampled rows
    bytes_per_weight: float
    vocab: int  # logits per sampled row
    sampler_passes: int
    kv_bytes_per_token: float  # all layers, this GPU's share
    kv_heads: float  # per GPU
    group: int  # query heads per KV head
    head_dim: int
    hidden: int
    table_tokens: int

    # ---- per-unit figures, computed once per model (a frozen dataclass caches in __dict__)
    @cached_property
    def gemm_table(self) -> _Table:
        return _Table(self.gemms, self.bytes_per_weight, self.hw, self.table_tokens)

    @cached_property
    def first_table(self) -> _Table:
        return _Table(self.first_gemms, self.bytes_per_weight, self.hw, self.table_tokens)

    @cached_property
    def head_table(self) -> _Table:
        return _Table(self.head, self.bytes_per_weight, self.hw, self.table_tokens)

    @cached_property
    def kernels(self) -> int:
        """Kernels one forward launches."""
        per_layer = KERNELS_PER_LAYER + (2 if self.tp > 1 else 0)
        return per_layer * self.layers + KERNELS_PER_FORWARD + self.first_gemms.n.size

    @cached_property
    def kv_s(self) -> float:
        """Seconds to read one token's KV cache (all layers)."""
        return self.kv_bytes_per_token / self.hw.bandwidth

    @cached_property
    def row_s(self) -> float:
        """Seconds of attention compute per query row and context token (all layers)."""
        return 4.0 * self.layers * self.kv_heads * self.head_dim / self.hw.attn_flops

    @cached_property
    def sampler_s(self) -> float:
        """Seconds of sampling per sampled row."""
        return self.vocab * LOGIT_BYTES * self.sampler_passes / self.hw.bandwidth

    @cached_property
    def allreduce_fixed_s(self) -> float:
        """Seconds of all-reduce latency per forward (two per layer)."""
        return 2.0 * self.layers * self.hw.allreduce_latency_s

    @cached_property
    def allreduce_token_s(self) -> float:
        """Seconds of all-reduce ring traffic per token of a forward."""
        ring = 2.0 * (self.tp - 1) / self.tp
        return 2.0 * self.layers * ring * self.hidden * 2.0 / self.hw.link_bandwidth

    @cached_property
    def decode_query_rows(self) -> float:
        """:meth:`query_rows` of one query token in a pure decode step (a drafter's forwards
        after its first)."""
        return float(self.query_rows(np.ones(()), np.ones((), dtype=np.bool_)))

    @property
    def weight_bytes(self) -> float:
        return (self.gemms.params + self.head.params) * self.bytes_per_weight

    def query_rows(self, queries: FloatArray, pure_decode: BoolArray) -> FloatArray:
        """Query rows per KV head that the attention kernel computes for one sequence with
        ``queries`` query tokens: the GQA group packed into the tile, or each head's query rows
        padded apart."""
        tile, group = float(self.hw.attention_tile_m), float(self.group)
        packed = np.ceil(group * queries / tile) * tile
        if self.hw.attention_packs_gqa:
            return packed
        apart = group * np.ceil(queries / tile) * tile
        use_packed = (queries == 1) & pure_decode
        return cast(FloatArray, apart + use_packed * (packed - apart))

    def terms(
        self,
        *,
        tokens: FloatArray,
        gemm_tokens: FloatArray,
        rows: FloatArray,
        ctx_read: FloatArray,
        row_ctx: FloatArray,
        prefill_pairs: FloatArray | float,
        graph: BoolArray,
        first: bool,
    ) -> ForwardTerms[FloatArray]:
        """Seconds of one forward over ``tokens`` new tokens (``gemm_tokens`` after CUDA-graph
        padding) that samples ``rows`` of them: it reads ``ctx_read`` cached KV tokens, and its
        attention computes ``row_ctx`` query-row × context products plus ``prefill_pairs`` of
        chunked prefill; ``graph``: the step runs in a captured CUDA graph; ``first``: the
        drafter's first forward (EAGLE-3's ``fc``). Every array has the steps' shape."""
        hw = self.hw
        gemm = self.gemm_table(gemm_tokens) + self.head_table(rows)
        if first:
            gemm = gemm + self.first_table(gemm_tokens)
        attention = np.maximum(
            (ctx_read + tokens) * self.kv_s,
            (row_ctx + self.group * prefill_pairs) * self.row_s,
        )
        sampler = rows * self.sampler_s
        busy = tokens > 0  # a forward over no tokens costs nothing (no kernels launched)
        allreduce = (
            busy * (self.allreduce_fixed_s + self.allreduce_token_s * tokens)
            if self.tp > 1
            else 0.0
        )
        gpu = gemm + attention + sampler + allreduce
        gaps = self.kernels * hw.kernel_gap_s
        eager = np.maximum(gaps, self.kernels * hw.kernel_launch_s - gpu)
        kernels = busy * (eager + graph * (gaps - eager))
        zero = tokens * 0.0  # broadcast every term to the step's shape
        return ForwardTerms(
            gemm=zero + gemm,
            attention=zero + attention,
            sampler=zero + sampler,
            allreduce=zero + allreduce,
            kernels=zero + kernels,
        )


class HostTerms(NamedTuple, Generic[_Seconds]):
    """Host-side counts of one step, each multiplied by its coefficient (seconds per unit)."""

    step: _Seconds  # 1 per step
    seq: _Seconds  # running sequences
    token: _Seconds  # scheduled tokens
    spec: _Seconds  # 1 per speculative step
    spec_seq: _Seconds  # decoding sequences of a speculative step
    draft: _Seconds  # draft forwards (n-gram: 1 per speculative step)
    draft_seq: _Seconds  # decoding sequences × draft forwards (a model drafter's)
    sync: _Seconds  # 1 per step of an arm that runs without async scheduling


@dataclass(frozen=True)
class Coefficients:
    """The step-time model's coefficients (seconds, or factors on modelled GPU time)."""

    target_time_scale: float = 1.0
    draft_time_scale: float = 1.0
    step_overhead_s: float = 0.0
    per_seq_overhead_s: float = 0.0
    per_token_overhead_s: float = 0.0
    spec_step_overhead_s: float = 0.0
    spec_seq_overhead_s: float = 0.0
    draft_forward_overhead_s: float = 0.0
    draft_seq_overhead_s: float = 0.0
    sync_step_overhead_s: float = 0.0

    def as_dict(self) -> dict[str, float]:
        return {name: float(getattr(self, name)) for name in COEFFICIENTS}

    def term_weights(self) -> dict[str, float]:
        """The coefficient multiplying each term."""
        return {t: getattr(self, c) for c, ts in COEFFICIENTS.items() for t in ts}


class StepComposition(TypedDict):
    """What one step carries, or many (arrays of one element per step, or of any shapes that
    broadcast): the keyword arguments of :meth:`StepCostModel.terms` and
    :meth:`StepCostModel.step_time`. ``n_decode`` sequences (Σ context ``ctx_decode``) each
    verify ``k`` drafts (k = 0: plain decode), beside ``prefill_tokens`` of chunked prefill
    (Σ cached context ``prefill_ctx``, Σ query × context pairs ``prefill_pairs``; 0 by
    default), with ``n_running`` sequences in the batch (default ``n_decode``)."""

    k: npt.ArrayLike
    n_decode: npt.ArrayLike
    ctx_decode: npt.ArrayLike
    prefill_tokens: NotRequired[npt.ArrayLike]
    prefill_ctx: NotRequired[npt.ArrayLike]
    prefill_pairs: NotRequired[npt.ArrayLike]
    n_running: NotRequired[npt.ArrayLike | None]
    #: the drafter runs even where ``k`` is 0 — drafts of variable length (suffix decoding
    #: proposes for every sequence every step, and ``k`` is the step's mean draft); default k > 0
    proposing: NotRequired[npt.ArrayLike]


class _Steps(NamedTuple):
    """One or many steps' composition as float64 arrays (broadcastable to ``zero``'s shape),
    and what follows from it."""

    k: FloatArray
    n_decode: FloatArray
    ctx_decode: FloatArray
    prefill_tokens: FloatArray
    prefill_ctx: FloatArray
    prefill_pairs: FloatArray
    n_running: FloatArray
    zero: FloatArray  # zeros of the steps' shape
    queries: FloatArray  # query tokens per decoding sequence: the last token and K drafts
    tokens: FloatArray  # tokens the step schedules
    padded: FloatArray  # tokens after CUDA-graph padding
    graph: BoolArray  # the step fits a captured CUDA graph
    pure_decode: BoolArray
    spec: BoolArray  # the drafter runs
    on: BoolArray  # the speculative server's step (its scheduling and host costs)
    n_sampled: FloatArray  # rows sampled: one per decoding sequence and per prompt that ends


@dataclass(frozen=True)
class StepCostModel:
    """Time of one engine step (target verify or decode, plus drafting) for a deployment."""

    target: ForwardCost | None  # None: a model with host terms only (tests, reasoning)
    draft: ForwardCost | None  # None: drafting costs no GPU time (n-gram) or no drafter
    coefficients: Coefficients
    draft_host_per_step: bool  # n-gram: the host cost is per step, not per draft forward
    max_num_batched_tokens: int
    cudagraph_max_tokens: int
    description: str
    #: input slots the drafter takes per scheduled sequence beyond its K + 1 (vLLM's
    #: ``max_num_new_slots_for_drafting``: 1 for a draft model, else 0)
    draft_slots: int = 0
    #: whether the server without speculation and the one with it run without async
    #: scheduling, and so pay the host time it hides (``host_sync``) every step
    sync_arms: tuple[bool, bool] = (False, False)
    #: suffix decoding: the host cost is per decoding sequence per step
    draft_host_per_seq: bool = False
    #: query positions each decoding sequence verifies in a speculative step when they are not
    #: K + 1: an SGLang draft tree verifies its ``num_draft_tokens`` with tree attention
    #: (:mod:`alphagate.sim.tree`); None: the chain's K + 1
    verify_width: int | None = None
    #: rows per decoding sequence in each draft forward after the first: SGLang's EAGLE draft
    #: phase runs every one of the top-k nodes it keeps (1: a chain)
    draft_rows: int = 1
    #: what caps each arm's running batch (``max_num_seqs``, the KV room without and with the
    #: drafter); None: nothing (a model built without a deployment)
    batch_room: BatchRoom | None = None

    @cached_property
    def capture(self) -> IntArray:
        """CUDA-graph capture sizes, ascending."""
        return capture_sizes(self.cudagraph_max_tokens)

    @cached_property
    def weights(self) -> tuple[float, ...]:
        """The coefficient multiplying each term, in the order of :data:`TERMS`."""
        by_term = self.coefficients.term_weights()
        return tuple(by_term[t] for t in TERMS)

    @cached_property
    def memo(self) -> dict[tuple[object, ...], float]:
        """Figures derived from this model that callers compute again and again (the closed
        form's decode rate at a batch and workload): this model's, so never stale."""
        return {}

    @cached_property
    def arrays(self) -> dict[tuple[object, ...], FloatArray]:
        """As :attr:`memo`, for arrays (the closed form's step times over prefill counts)."""
        return {}

    @cached_property
    def _one_step(self) -> _OneStep:
        return _OneStep(self)

    @classmethod
    def constant(
        cls, target_s: float, draft_s: float, max_num_batched_tokens: int = 1 << 30
    ) -> StepCostModel:
        """Every step costs ``target_s`` plus ``draft_s`` per draft forward, whatever the batch."""
        return cls(
            target=None,
            draft=None,
            coefficients=Coefficients(step_overhead_s=target_s, draft_forward_overhead_s=draft_s),
            draft_host_per_step=False,
            max_num_batched_tokens=max_num_batched_tokens,
            cudagraph_max_tokens=0,
            description="constant",
        )

    def with_coefficients(self, coefficients: Coefficients) -> StepCostModel:
        return replace(self, coefficients=coefficients)

    def arm_batch(self, batch: float, k: int, sequence_tokens: float) -> float:
        """Running sequences of one arm (K = 0: the server without speculation) when ``batch``
        are offered, sequences of ``sequence_tokens`` each: at most what the arm holds
        (:meth:`~alphagate.specs.deployment.BatchRoom.largest_batch`); the rest queue."""
        if self.batch_room is None:
            return batch
        return min(batch, float(self.batch_room.largest_batch(sequence_tokens, k)))

    def arm_caps(self, k: int, sequence_tokens: float, ceiling: int) -> ArmCaps:
        """Both arms' largest batches (:meth:`arm_batch`), the speculative one at K drafts, at
        most ``ceiling`` (a scenario's ``max_num_seqs``)."""
        return ArmCaps(
            baseline=int(self.arm_batch(ceiling, 0, sequence_tokens)),
            speculative=int(self.arm_batch(ceiling, k, sequence_tokens)),
        )

    def _pad(self, tokens: FloatArray) -> tuple[FloatArray, BoolArray]:
        """Tokens after CUDA-graph padding, and whether the step fits a captured graph."""
        capture = self.capture
        if capture.size == 0:
            return tokens, tokens < 0
        top = float(capture[-1])
        fits = tokens <= top
        padded = capture[np.searchsorted(capture, np.minimum(tokens, top), side="left")]
        return tokens + fits * (padded - tokens), fits

    def terms(self, **composition: Unpack[StepComposition]) -> StepTerms:
        """Every named term of one step or many (seconds, before the coefficients; arrays of
        the composition's broadcast shape)."""
        steps = self._steps(composition)
        target = self._target_terms(steps)
        draft = self._draft_terms(steps)
        host = self._host_terms(steps)
        return StepTerms(*target, *draft, *host)

    def _steps(self, composition: StepComposition) -> _Steps:
        """The composition as float64 arrays, and the counts every term reads."""
        n_running = composition.get("n_running")
        drafts, n_dec, ctx_dec, pre_tokens, pre_ctx, pre_pairs, running = (
            np.asarray(x, dtype=np.float64)
            for x in (
                composition["k"],
                composition["n_decode"],
                composition["ctx_decode"],
                composition.get("prefill_tokens", 0.0),
                composition.get("prefill_ctx", 0.0),
                composition.get("prefill_pairs", 0.0),
                composition["n_decode"] if n_running is None else n_running,
            )
        )
        queries = drafts + 1.0
        if self.verify_width is not None:
            queries = np.where(drafts > 0, float(self.verify_width), queries)
        tokens = n_dec * queries + pre_tokens
        padded, graph = self._pad(tokens)
        on = (drafts > 0) | np.asarray(composition.get("proposing", False), dtype=bool)
        return _Steps(
            k=drafts,
            n_decode=n_dec,
            ctx_decode=ctx_dec,
            prefill_tokens=pre_tokens,
            prefill_ctx=pre_ctx,
            prefill_pairs=pre_pairs,
            n_running=running,
            zero=np.zeros(
                np.broadcast(drafts, n_dec, ctx_dec, pre_tokens, pre_ctx, pre_pairs, running).shape
            ),
            queries=queries,
            tokens=tokens,
            padded=padded,
            graph=graph,
            pure_decode=pre_tokens == 0,
            # the drafter runs whenever the step schedules tokens (vLLM proposes after every
            # step: for the decoding sequences and for a prompt whose last chunk ran, about one
            # per step)
            spec=on & (tokens > 0),
            on=on,
            n_sampled=n_dec + (pre_tokens > 0),
        )

    def _target_terms(self, steps: _Steps) -> ForwardTerms[FloatArray]:
        """The verify (or decode) pass over every scheduled token, with the prefill chunk."""
        if self.target is None:
            return ForwardTerms(*(steps.zero,) * 5)
        return self.target.terms(
            tokens=steps.tokens,
            gemm_tokens=steps.padded,
            rows=steps.n_decode * steps.queries,
            ctx_read=steps.ctx_decode + steps.prefill_ctx,
            row_ctx=self.target.query_rows(steps.queries, steps.pure_decode) * steps.ctx_decode,
            prefill_pairs=steps.prefill_pairs,
            graph=steps.graph,
            first=False,
        )

    def _draft_terms(self, steps: _Steps) -> ForwardTerms[FloatArray]:
        """The drafter's first forward over every scheduled token, then K − 1 over the
        decoding sequences (zero in a step that does not speculate)."""
        drafter = self.draft
        if drafter is None or not steps.spec.any():
            return ForwardTerms(*(steps.zero,) * 5)
        first = drafter.terms(
            tokens=steps.tokens,
            gemm_tokens=steps.padded,
            rows=steps.n_sampled,
            ctx_read=steps.ctx_decode + steps.prefill_ctx,
            row_ctx=drafter.query_rows(steps.queries, steps.pure_decode) * steps.ctx_decode,
            prefill_pairs=steps.prefill_pairs,
            graph=steps.graph,
            first=True,
        )
        r = float(self.draft_rows)  # every kept node reads its sequence's whole context
        later_padded, later_graph = self._pad(steps.n_sampled * r)
        later = drafter.terms(
            tokens=steps.n_sampled * r,
            gemm_tokens=later_padded,
            rows=steps.n_sampled * r,
            ctx_read=steps.ctx_decode * r,
            row_ctx=drafter.decode_query_rows * steps.ctx_decode * r,
            prefill_pairs=0.0,
            graph=later_graph,
            first=False,
        )
        rest = np.maximum(steps.k - 1.0, 0.0)
        return ForwardTerms(
            *(steps.spec * (a + rest * b) for a, b in zip(first, later, strict=True))
        )

    def _host_terms(self, steps: _Steps) -> HostTerms[FloatArray]:
        zero, spec = steps.zero, steps.spec
        off_sync, on_sync = self.sync_arms
        return HostTerms(
            step=zero + 1.0,
            seq=zero + steps.n_running,
            token=zero + steps.tokens,
            spec=zero + spec,
            # the verify's and the rejection sampler's work per sequence (vllm/v1/sample/
            # rejection_sampler.py)
            spec_seq=zero + spec * steps.n_decode,
            draft=cast(FloatArray, spec * self._draft_host_units(steps.k, steps.n_decode)),
            # a drafter that runs forwards rebuilds each one's attention metadata over the
            # decoding sequences (vllm/v1/spec_decode/llm_base_proposer.py, propose's loop)
            draft_seq=(
                zero
                if self.draft_host_per_seq or self.draft_host_per_step
                else spec * steps.k * steps.n_decode
            ),
            sync=(
                zero + np.where(steps.on, float(on_sync), float(off_sync))
                if off_sync or on_sync
                else zero
            ),
        )

    def _draft_host_units(
        self, k: float | FloatArray, n_decode: float | FloatArray
    ) -> float | FloatArray:
        """What ``host_draft`` is paid per: each draft forward (K), each step (n-gram's batched
        lookup), or each decoding sequence (suffix decoding's tree walks, one request at a
        time in ``SuffixDecodingProposer.propose``)."""
        if self.draft_host_per_seq:
            return n_decode
        return 1.0 if self.draft_host_per_step else k

    def step_time(self, **composition: Unpack[StepComposition]) -> FloatArray:
        """Seconds of one step or many: the terms weighted by the coefficients (see
        :meth:`terms`; :meth:`step_seconds` prices one step in Python floats)."""
        terms = self.terms(**composition)
        total = sum((w * t for w, t in zip(self.weights, terms, strict=True) if w), start=0.0)
        return np.asarray(total, dtype=np.float64)

    def step_seconds(
        self,
        *,
        k: float,
        n_decode: float,
        ctx_decode: float,
        prefill_tokens: float = 0.0,
        prefill_ctx: float = 0.0,
        prefill_pairs: float = 0.0,
        n_running: float | None = None,
        proposing: bool = False,
    ) -> float:
        """Seconds of one step, the same as :meth:`step_time` to the bit, in Python floats: the
        step engine and the twin price one step at a time (see :class:`_OneStep`)."""
        return self._one_step(
            float(k), float(n_decode), float(ctx_decode), float(prefill_tokens),
            float(prefill_ctx), float(prefill_pairs),
            float(n_decode if n_running is None else n_running), proposing,
        )  # fmt: skip

    # ---- cost ratios at steady state (batch b, mean context s) --------------------------------
    def decode_time(self, batch: npt.ArrayLike, mean_context: npt.ArrayLike) -> FloatArray:
        b = np.asarray(batch, dtype=np.float64)
        return self.step_time(k=0, n_decode=b, ctx_decode=b * np.asarray(mean_context))

    def spec_step_time(
        self, batch: npt.ArrayLike, k: npt.ArrayLike, mean_context: npt.ArrayLike
    ) -> FloatArray:
        b = np.asarray(batch, dtype=np.float64)
        return self.step_time(k=k, n_decode=b, ctx_decode=b * np.asarray(mean_context))

    def step_parts(
        self, batch: npt.ArrayLike, k: npt.ArrayLike, mean_context: npt.ArrayLike
    ) -> tuple[FloatArray, FloatArray]:
        """(verify pass with host costs, drafting) seconds of a steady speculative step."""
        b = np.asarray(batch, dtype=np.float64)
        terms = self.terms(k=k, n_decode=b, ctx_decode=b * np.asarray(mean_context))
        weighted = [(name, w * t) for name, w, t in zip(TERMS, self.weights, terms, strict=True)]
        verify = sum((x for name, x in weighted if name not in _DRAFTING), start=0.0)
        draft = sum((x for name, x in weighted if name in _DRAFTING), start=0.0)
        return np.asarray(verify, dtype=np.float64), np.asarray(draft, dtype=np.float64)

    def verify_cost_ratio(
        self, batch: npt.ArrayLike, k: npt.ArrayLike, mean_context: npt.ArrayLike
    ) -> FloatArray:
        """v(B, K, S): target pass over B·(K+1) tokens with the step's host costs ÷ a plain
        decode step."""
        verify, _ = self.step_parts(batch, k, mean_context)
        return np.asarray(verify / self.decode_time(batch, mean_context))

    def draft_cost_ratio(
        self, batch: npt.ArrayLike, mean_context: npt.ArrayLike, k: npt.ArrayLike = 1
    ) -> FloatArray:
        """c(B, K): the drafting of a K-draft step ÷ K ÷ a plain decode step, so that one step
        costs K·c + v decode steps (Leviathan's Thm 3.8 with the emergent costs)."""
        _, draft = self.step_parts(batch, k, mean_context)
        drafts = np.maximum(np.asarray(k, dtype=np.float64), 1.0)
        return np.asarray(draft / drafts / self.decode_time(batch, mean_context))


_DRAFTING: Final = frozenset((*COEFFICIENTS["draft_time_scale"], "host_draft", "host_draft_seq"))


# ---------------------------------------------------------------- one step in Python floats
class _OneStep:
    """:meth:`StepCostModel.step_time` of one step, in Python floats.

    The step engine (:mod:`alphagate.sim.engine`), the twin and the reference simulator price
    one step at a time, where numpy's per-call overhead on 0-d arrays dominates: measured, one
    step cost 7–9× more through the array path, and the step engine on the 1,000-request
    subset of ``benchmarks/bench_simulate.py`` ran twice as long (2.0–2.1×) with it. Every
    expression below follows the array path's term by term in the same order, so the two agree
    to the bit (``tests/sim/test_cost.py`` checks it on every kind of deployment)."""

    def __init__(self, model: StepCostModel) -> None:
        self.model = model
        self.capture = [int(x) for x in model.capture]

    def _lookup(self, table: _Table, m: float) -> float:
        if table.empty:
            return 0.0
        if 0.0 <= m < table.top:
            seconds = table.values
            i = int(m)
            y0 = seconds[i]
            return y0 + (m - i) * (seconds[i + 1] - y0)
        return float(table(np.asarray(m)))

    def _pad(self, tokens: float) -> tuple[float, bool]:
        if not self.capture:
            return tokens, False
        if tokens > self.capture[-1]:
            return tokens, False
        return float(self.capture[bisect.bisect_left(self.capture, tokens)]), True

    @staticmethod
    def _query_rows(fwd: ForwardCost, queries: float, pure_decode: bool) -> float:
        tile, group = float(fwd.hw.attention_tile_m), float(fwd.group)
        packed = float(math.ceil(group * queries / tile)) * tile
        if fwd.hw.attention_packs_gqa:
            return packed
        apart = group * float(math.ceil(queries / tile)) * tile
        use_packed = (queries == 1) & pure_decode
        return apart + use_packed * (packed - apart)

    def _forward(
        self, fwd: ForwardCost, *, tokens: float, gemm_tokens: float, rows: float,
        ctx_read: float, row_ctx: float, prefill_pairs: float, graph: bool, first: bool,
    ) -> ForwardTerms[float]:  # fmt: skip
        hw = fwd.hw
        gemm = self._lookup(fwd.gemm_table, gemm_tokens) + self._lookup(fwd.head_table, rows)
        if first:
            gemm = gemm + self._lookup(fwd.first_table, gemm_tokens)
        attention = max(
            (ctx_read + tokens) * fwd.kv_s, (row_ctx + fwd.group * prefill_pairs) * fwd.row_s
        )
        sampler = rows * fwd.sampler_s
        busy = tokens > 0
        allreduce = (
            busy * (fwd.allreduce_fixed_s + fwd.allreduce_token_s * tokens) if fwd.tp > 1 else 0.0
        )
        gpu = gemm + attention + sampler + allreduce
        gaps = fwd.kernels * hw.kernel_gap_s
        eager = max(gaps, fwd.kernels * hw.kernel_launch_s - gpu)
        kernels = busy * (eager + graph * (gaps - eager))
        return ForwardTerms(gemm, attention, sampler, allreduce, kernels)

    def __call__(
        self, k: float, n_decode: float, ctx_decode: float, prefill_tokens: float,
        prefill_ctx: float, prefill_pairs: float, n_running: float, proposing: bool = False,
    ) -> float:  # fmt: skip
        model = self.model
        queries = k + 1.0
        if model.verify_width is not None and k > 0:
            queries = float(model.verify_width)
        tokens = n_decode * queries + prefill_tokens
        pure_decode = prefill_tokens == 0
        on = k > 0 or proposing
        spec = on & (tokens > 0)
        n_sampled = n_decode + (prefill_tokens > 0)
        padded, graph = self._pad(tokens)
        zero = ForwardTerms(0.0, 0.0, 0.0, 0.0, 0.0)
        target = zero
        if model.target is not None:
            target = self._forward(
                model.target, tokens=tokens, gemm_tokens=padded, rows=n_decode * queries,
                ctx_read=ctx_decode + prefill_ctx,
                row_ctx=self._query_rows(model.target, queries, pure_decode) * ctx_decode,
                prefill_pairs=prefill_pairs, graph=graph, first=False,
            )  # fmt: skip
        draft = zero
        if model.draft is not None and spec:
            drafter = model.draft
            first = self._forward(
                drafter, tokens=tokens, gemm_tokens=padded, rows=n_sampled,
                ctx_read=ctx_decode + prefill_ctx,
                row_ctx=self._query_rows(drafter, queries, pure_decode) * ctx_decode,
                prefill_pairs=prefill_pairs, graph=graph, first=True,
            )  # fmt: skip
            r = float(model.draft_rows)
            later_padded, later_graph = self._pad(n_sampled * r)
            later = self._forward(
                drafter, tokens=n_sampled * r, gemm_tokens=later_padded, rows=n_sampled * r,
                ctx_read=ctx_decode * r, row_ctx=drafter.decode_query_rows * ctx_decode * r,
                prefill_pairs=0.0, graph=later_graph, first=False,
            )  # fmt: skip
            rest = max(k - 1.0, 0.0)
            draft = ForwardTerms(
                *(spec * (a + rest * b) for a, b in zip(first, later, strict=True))
            )
        off_sync, on_sync = model.sync_arms
        host = HostTerms(
            step=1.0, seq=n_running, token=tokens, spec=float(spec),
            spec_seq=float(spec * n_decode),
            draft=float(spec * model._draft_host_units(k, n_decode)),
            draft_seq=(
                0.0
                if model.draft_host_per_seq or model.draft_host_per_step
                else float(spec * k * n_decode)
            ),
            sync=float(on_sync if on else off_sync),
        )  # fmt: skip
        total = 0.0
        for w, t in zip(model.weights, (*target, *draft, *host), strict=True):
            if w:
                total += w * t
        return total


# ---------------------------------------------------------------- building a model
def _layer_gemms(
    shape: TransformerShape, tp: int, attn_in: int | None = None
) -> list[tuple[float, float, float]]:
    """vLLM's per-layer GEMMs (N, K, layers): fused QKV and gate-up are column-parallel, O and
    down row-parallel (``vllm/model_executor/layers/linear.py``)."""
    h, d, i = shape.hidden_size, shape.head_dim, shape.intermediate_size
    hq, hkv, n = shape.num_attention_heads, shape.num_key_value_heads, shape.num_hidden_layers
    return [
        ((hq + 2 * hkv) * d / tp, attn_in or h, n),
        (h, hq * d / tp, n),
        (2 * i / tp, h, n),
        (h, i / tp, n),
    ]


def _forward(
    *,
    name: str,
    shape: TransformerShape,
    hw: Hardware,
    tp: int,
    bytes_per_weight: float,
    kv_bytes_per_token: float,
    layers: list[tuple[float, float, float]],
    n_layers: int,
    first: list[tuple[float, float, float]],
    vocab: int,
    sampler_passes: int,
    table_tokens: int,
) -> ForwardCost:
    return ForwardCost(
        name=name,
        hw=hw,
        tp=tp,
        layers=n_layers,
        gemms=Gemms.of(layers),
        first_gemms=Gemms.of(first),
        head=Gemms.of([(vocab / tp, shape.hidden_size, 1)]),
        bytes_per_weight=bytes_per_weight,
        vocab=vocab,
        sampler_passes=sampler_passes,
        kv_bytes_per_token=kv_bytes_per_token / tp,
        kv_heads=shape.num_key_value_heads / tp,
        group=shape.num_attention_heads // shape.num_key_value_heads,
        head_dim=shape.head_dim,
        hidden=shape.hidden_size,
        table_tokens=table_tokens,
    )


def _drafter(resolved: ResolvedDeployment, hw: Hardware, table: int) -> ForwardCost | None:
    """The drafter's forward: an EAGLE-3 / EAGLE / MTP head on the target's shape, or a draft
    model on its own; each on the drafter's own TP."""
    drafter, footprint = resolved.config.drafter, resolved.draft_footprint
    if isinstance(drafter, HOST_DRAFTERS) or footprint is None:
        return None
    tp = resolved.draft_tp
    forward = partial(
        _forward,
        name=footprint.name,
        hw=hw,
        tp=tp,
        bytes_per_weight=BYTES_PER_PARAM[resolved.config.weight_dtype],
        kv_bytes_per_token=footprint.kv_bytes_per_token,
        sampler_passes=DRAFT_SAMPLER_PASSES,
        table_tokens=table,
    )
    target = resolved.target
    hidden = target.hidden_size
    if isinstance(drafter, DraftModelDrafter):
        shape = resolved.draft_shape or target
        return forward(
            shape=shape, layers=_layer_gemms(shape, tp),
            n_layers=shape.num_hidden_layers, first=[], vocab=shape.vocab_size,
        )  # fmt: skip
    one_layer = target.model_copy(update={"num_hidden_layers": 1})
    first: list[tuple[float, float, float]] = []
    if isinstance(drafter, Eagle3Drafter):
        # fc fuses three target hidden states (3h → h) once per step; q/k/v read [embed ; hidden]
        layers = _layer_gemms(one_layer, tp, attn_in=2 * hidden)
        first = [(float(hidden), 3.0 * hidden, 1.0)]
        vocab = drafter.draft_vocab_size
    else:  # EAGLE-1 and MTP: fc (2h → h) every forward, the target's full LM head
        layers = [(hidden, 2 * hidden, 1), *_layer_gemms(one_layer, tp)]
        vocab = target.vocab_size
    return forward(shape=one_layer, layers=layers, n_layers=1, first=first, vocab=vocab)


def coefficients_of(resolved: ResolvedDeployment) -> Coefficients:
    """The coefficients a deployment config sets (its overheads and time scales)."""
    cfg = resolved.config
    drafter = cfg.drafter
    per_draft = (
        drafter.cpu_cost_ms if isinstance(drafter, HOST_DRAFTERS) else drafter.forward_overhead_ms
    )
    return Coefficients(
        target_time_scale=cfg.target_time_scale,
        draft_time_scale=cfg.draft_time_scale,
        step_overhead_s=cfg.step_overhead_ms * 1e-3,
        per_seq_overhead_s=cfg.per_seq_overhead_us * 1e-6,
        per_token_overhead_s=cfg.per_token_overhead_us * 1e-6,
        spec_step_overhead_s=cfg.spec_step_overhead_ms * 1e-3,
        spec_seq_overhead_s=cfg.spec_seq_overhead_us * 1e-6,
        draft_forward_overhead_s=per_draft * 1e-3,
        draft_seq_overhead_s=cfg.draft_seq_overhead_us * 1e-6,
        sync_step_overhead_s=cfg.sync_step_overhead_ms * 1e-3,
    )


def build_cost_model(resolved: ResolvedDeployment) -> StepCostModel:
    """Step-time model for a resolved deployment and its drafter."""
    cfg = resolved.config
    target = resolved.target
    hw = Hardware.of(resolved.gpu, cfg.weight_dtype)
    tp = resolved.tp
    # tokens one step can carry: the prefill budget plus every sequence's verify tokens at K = 8
    table = int(min(cfg.max_num_batched_tokens + 9 * cfg.max_num_seqs, 65_536))
    target_cost = _forward(
        name=target.name,
        shape=target,
        hw=hw,
        tp=tp,
        bytes_per_weight=BYTES_PER_PARAM[cfg.weight_dtype],
        kv_bytes_per_token=resolved.target_footprint.kv_bytes_per_token,
        layers=_layer_gemms(target, tp),
        n_layers=target.num_hidden_layers,
        first=[],
        vocab=target.vocab_size,
        sampler_passes=SAMPLER_PASSES,
        table_tokens=table,
    )
    base_async, spec_async = resolved.async_by_arm()
    return StepCostModel(
        target=target_cost,
        draft=_drafter(resolved, hw, table),
        coefficients=coefficients_of(resolved),
        draft_host_per_step=isinstance(cfg.drafter, NgramDrafter),
        draft_host_per_seq=isinstance(cfg.drafter, SuffixDrafter),
        max_num_batched_tokens=cfg.max_num_batched_tokens,
        cudagraph_max_tokens=resolved.cudagraph_max_tokens,
        description=resolved.describe(),
        draft_slots=1 if isinstance(cfg.drafter, DraftModelDrafter) else 0,
        sync_arms=(not base_async, not spec_async),
        batch_room=resolved.batch_room,
    )
