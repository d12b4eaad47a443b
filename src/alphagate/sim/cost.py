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
  per step).

``θ_target`` and ``θ_draft`` (``target_time_scale``, ``draft_time_scale``) and the five host
costs are the model's coefficients: defaults from the documented constants, or fitted to a real
server by ``alphagate calibrate``. Every method takes numpy arrays (one element per step or
scenario) or scalars.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any, Final, NamedTuple, TypeAlias

import numpy as np
import numpy.typing as npt

from alphagate.core.shapes import TransformerShape
from alphagate.specs.deployment import (
    DraftModelDrafter,
    Eagle3Drafter,
    NgramDrafter,
    ResolvedDeployment,
)
from alphagate.specs.gpus import GpuSpec
from alphagate.theory.memory import BYTES_PER_PARAM

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
#: A float64 array (many steps), or a Python float (one step priced alone, as the step engine and
#: the twin do: plain floats keep that call cheap; :func:`_max`, :func:`_ceil` serve both). Typed
#: ``Any`` because numpy's stubs cannot follow arithmetic across the two.
Num: TypeAlias = Any


def _max(a: Num, b: Num) -> Num:
    if isinstance(a, float) and isinstance(b, float):
        return a if a >= b else b
    return np.maximum(a, b)


def _ceil(a: Num) -> Num:
    return float(math.ceil(a)) if isinstance(a, float) else np.ceil(a)


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
    "StepCostModel",
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

#: The named terms of one step (seconds, before the coefficients), in the order they are printed.
TERMS: Final = (
    "target_gemm",
    "target_attention",
    "target_sampler",
    "target_allreduce",
    "target_kernels",
    "draft_gemm",
    "draft_attention",
    "draft_sampler",
    "draft_allreduce",
    "draft_kernels",
    "host_step",
    "host_seq",
    "host_token",
    "host_spec",
    "host_draft",
    "host_sync",
)
#: The coefficients and the terms each multiplies (what ``alphagate calibrate`` fits).
COEFFICIENTS: Final[dict[str, tuple[str, ...]]] = {
    "target_time_scale": tuple(t for t in TERMS if t.startswith("target_")),
    "draft_time_scale": tuple(t for t in TERMS if t.startswith("draft_")),
    "step_overhead_s": ("host_step",),
    "per_seq_overhead_s": ("host_seq",),
    "per_token_overhead_s": ("host_token",),
    "spec_step_overhead_s": ("host_spec",),
    "draft_forward_overhead_s": ("host_draft",),
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
        a = np.asarray(rows, dtype=np.float64).reshape(-1, 3)
        return cls(a[:, 0], a[:, 1], a[:, 2])

    @property
    def params(self) -> float:
        return float((self.n * self.k * self.count).sum())

    def seconds(self, m: npt.ArrayLike, bytes_per_weight: float, hw: Hardware) -> FloatArray:
        """Time of every GEMM at M tokens, summed: ``max(weight read, quantized compute)`` plus
        the overlap loss times the smaller of the read and the unpadded compute."""
        mm = np.asarray(m, dtype=np.float64)[..., None]  # [..., 1]
        read = self.n * self.k * bytes_per_weight / hw.bandwidth  # [G]
        tiles = np.ceil(mm / hw.tile_m) * np.ceil(self.n / hw.tile_n)  # [..., G]
        # whole waves once a GEMM has more tiles than SMs; below one wave, split-K fills the GPU
        waves = np.where(tiles > hw.sm_count, np.ceil(tiles / hw.sm_count) * hw.sm_count, tiles)
        compute = waves * (2.0 * hw.tile_m * hw.tile_n) * self.k / hw.gemm_flops
        # streaming and MMAs do not overlap perfectly: below the ridge the time grows with M
        # (measured on an H200, see :mod:`alphagate.specs.gpus`)
        loss = hw.gemm_overlap_loss * np.minimum(read, 2.0 * mm * self.n * self.k / hw.gemm_flops)
        t = np.where(mm > 0, np.maximum(read, compute) + loss, 0.0)
        return np.asarray((t * self.count).sum(-1))


class _Table:
    """A GEMM set's time at M = 0..n tokens, precomputed; interpolated, formula beyond."""

    def __init__(self, gemms: Gemms, bytes_per_weight: float, hw: Hardware, n: int) -> None:
        self.gemms, self.bpw, self.hw = gemms, bytes_per_weight, hw
        self.x = np.arange(n + 1, dtype=np.float64)
        self.y = gemms.seconds(self.x, bytes_per_weight, hw)
        self.top = float(n)
        self.empty = gemms.n.size == 0

    def __call__(self, m: Num) -> Num:
        if self.empty:
            return 0.0
        if isinstance(m, float) and 0.0 <= m < self.top:  # one step: no array machinery
            x = m
            i = int(x)
            y0 = float(self.y[i])
            return y0 + (x - i) * (float(self.y[i + 1]) - y0)
        mm = np.asarray(m, dtype=np.float64)
        if mm.size == 0 or float(mm.max()) <= self.top:
            return np.asarray(np.interp(mm, self.x, self.y))
        return np.where(
            mm <= self.top,
            np.interp(np.minimum(mm, self.top), self.x, self.y),
            self.gemms.seconds(mm, self.bpw, self.hw),
        )


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
    def _gemm(self) -> _Table:
        return _Table(self.gemms, self.bytes_per_weight, self.hw, self.table_tokens)

    @cached_property
    def _first(self) -> _Table:
        return _Table(self.first_gemms, self.bytes_per_weight, self.hw, self.table_tokens)

    @cached_property
    def _head(self) -> _Table:
        return _Table(self.head, self.bytes_per_weight, self.hw, self.table_tokens)

    @cached_property
    def kernels(self) -> int:
        """Kernels one forward launches."""
        per_layer = KERNELS_PER_LAYER + (2 if self.tp > 1 else 0)
        return per_layer * self.layers + KERNELS_PER_FORWARD + self.first_gemms.n.size

    @cached_property
    def _kv_s(self) -> float:
        """Seconds to read one token's KV cache (all layers)."""
        return self.kv_bytes_per_token / self.hw.bandwidth

    @cached_property
    def _row_s(self) -> float:
        """Seconds of attention compute per query row and context token (all layers)."""
        return 4.0 * self.layers * self.kv_heads * self.head_dim / self.hw.attn_flops

    @cached_property
    def _sampler_s(self) -> float:
        """Seconds of sampling per sampled row."""
        return self.vocab * LOGIT_BYTES * self.sampler_passes / self.hw.bandwidth

    @cached_property
    def _allreduce_fixed_s(self) -> float:
        return 2.0 * self.layers * self.hw.allreduce_latency_s

    @cached_property
    def _allreduce_token_s(self) -> float:
        ring = 2.0 * (self.tp - 1) / self.tp
        return 2.0 * self.layers * ring * self.hidden * 2.0 / self.hw.link_bandwidth

    @property
    def weight_bytes(self) -> float:
        return (self.gemms.params + self.head.params) * self.bytes_per_weight

    def query_rows(self, q: Num, pure_decode: Any) -> Num:
        """Query rows per KV head that the attention kernel computes for one sequence with ``q``
        query tokens: the GQA group packed into the tile, or each head's q rows padded apart."""
        tile, g = float(self.hw.attention_tile_m), float(self.group)
        packed = _ceil(g * q / tile) * tile
        if self.hw.attention_packs_gqa:
            return packed
        apart = g * _ceil(q / tile) * tile
        use_packed = (q == 1) & pure_decode
        return apart + use_packed * (packed - apart)

    def terms(
        self,
        *,
        tokens: Num,
        gemm_tokens: Num,
        rows: Num,
        ctx_read: Num,
        row_ctx: Num,
        prefill_pairs: Num,
        graph: Any,
        first: bool,
    ) -> ForwardTerms:
        """Seconds of one forward over ``tokens`` new tokens (``gemm_tokens`` after CUDA-graph
        padding) that samples ``rows`` of them: it reads ``ctx_read`` cached KV tokens, and its
        attention computes ``row_ctx`` query-row × context products plus ``prefill_pairs`` of
        chunked prefill; ``graph``: the step runs in a captured CUDA graph; ``first``: the
        drafter's first forward (EAGLE-3's ``fc``). Inputs are float64 arrays or Python floats
        (:meth:`StepCostModel.terms` converts them)."""
        hw = self.hw
        gemm = self._gemm(gemm_tokens) + self._head(rows)
        if first:
            gemm = gemm + self._first(gemm_tokens)
        attention = _max(
            (ctx_read + tokens) * self._kv_s,
            (row_ctx + self.group * prefill_pairs) * self._row_s,
        )
        sampler = rows * self._sampler_s
        busy = tokens > 0  # a forward over no tokens costs nothing (no kernels launched)
        allreduce = (
            busy * (self._allreduce_fixed_s + self._allreduce_token_s * tokens)
            if self.tp > 1
            else 0.0
        )
        gpu = gemm + attention + sampler + allreduce
        gaps = self.kernels * hw.kernel_gap_s
        eager = _max(gaps, self.kernels * hw.kernel_launch_s - gpu)
        kernels = busy * (eager + graph * (gaps - eager))
        zero = tokens * 0.0  # broadcast every term to the step's shape
        return ForwardTerms(
            gemm=zero + gemm,
            attention=zero + attention,
            sampler=zero + sampler,
            allreduce=zero + allreduce,
            kernels=zero + kernels,
        )


class ForwardTerms(NamedTuple):
    """Seconds of one forward, by mechanism (floats, or arrays of one element per step)."""

    gemm: Num
    attention: Num
    sampler: Num
    allreduce: Num
    kernels: Num


@dataclass(frozen=True)
class Coefficients:
    """The step-time model's coefficients (seconds, or factors on modelled GPU time)."""

    target_time_scale: float = 1.0
    draft_time_scale: float = 1.0
    step_overhead_s: float = 0.0
    per_seq_overhead_s: float = 0.0
    per_token_overhead_s: float = 0.0
    spec_step_overhead_s: float = 0.0
    draft_forward_overhead_s: float = 0.0
    sync_step_overhead_s: float = 0.0

    def as_dict(self) -> dict[str, float]:
        return {name: float(getattr(self, name)) for name in COEFFICIENTS}

    def term_weights(self) -> dict[str, float]:
        """The coefficient multiplying each term."""
        return {t: getattr(self, c) for c, ts in COEFFICIENTS.items() for t in ts}


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

    @cached_property
    def _capture(self) -> IntArray:
        return capture_sizes(self.cudagraph_max_tokens)

    @cached_property
    def _capture_list(self) -> list[int]:
        return [int(x) for x in self._capture]

    @cached_property
    def _weights(self) -> dict[str, float]:
        return self.coefficients.term_weights()

    @cached_property
    def memo(self) -> dict[tuple[object, ...], float]:
        """Figures derived from this model that callers compute again and again (the closed
        form's decode rate at a batch and workload): this model's, so never stale."""
        return {}

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

    def _pad(self, tokens: Num) -> tuple[Num, Any]:
        """Tokens after CUDA-graph padding, and whether the step fits a captured graph."""
        cap = self._capture
        if cap.size == 0:
            return tokens, tokens < 0
        top = float(cap[-1])
        if isinstance(tokens, float):
            if tokens > top:
                return tokens, False
            return float(self._capture_list[bisect.bisect_left(self._capture_list, tokens)]), True
        fits = tokens <= top
        padded = cap[np.searchsorted(cap, np.minimum(tokens, top), side="left")]
        return tokens + fits * (padded - tokens), fits

    def terms(
        self,
        k: npt.ArrayLike,
        n_decode: npt.ArrayLike,
        ctx_decode: npt.ArrayLike,
        prefill_tokens: npt.ArrayLike = 0.0,
        prefill_ctx: npt.ArrayLike = 0.0,
        prefill_pairs: npt.ArrayLike = 0.0,
        n_running: npt.ArrayLike | None = None,
    ) -> dict[str, Num]:
        """Every named term of one step (seconds, before the coefficients): ``n_decode``
        sequences (Σ context ``ctx_decode``) each verifying ``k`` drafts (k = 0: plain decode),
        plus ``prefill_tokens`` of chunked prefill (Σ cached context ``prefill_ctx``, Σ query ×
        context pairs ``prefill_pairs``)."""
        running = n_decode if n_running is None else n_running
        args = (k, n_decode, ctx_decode, prefill_tokens, prefill_ctx, prefill_pairs, running)
        values: tuple[Num, ...]
        if not any(isinstance(x, np.ndarray) for x in args):  # one step: Python floats
            values = tuple(float(x) for x in args)  # type: ignore[arg-type]
            zero: Num = 0.0
        else:  # many steps: float64 arrays
            values = tuple(np.asarray(x, dtype=np.float64) for x in args)
            zero = np.zeros(np.broadcast(*values).shape)
        k_, n_dec, ctx_dec, pre_tok, pre_ctx, pre_pairs, n_run = values
        queries = k_ + 1.0  # query tokens per decoding sequence: the last token and K drafts
        tokens = n_dec * queries + pre_tok
        pure_decode = pre_tok == 0
        # the drafter runs whenever the step schedules tokens (vLLM proposes after every step:
        # for the decoding sequences and for a prompt whose last chunk ran, about one per step)
        spec = (k_ > 0) & (tokens > 0)
        n_sampled = n_dec + (pre_tok > 0)
        out = dict.fromkeys(TERMS, zero)
        padded, graph = self._pad(tokens)
        ctx_read = ctx_dec + pre_ctx
        if self.target is not None:
            t = self.target
            verify = t.terms(
                tokens=tokens,
                gemm_tokens=padded,
                rows=n_dec * queries,
                ctx_read=ctx_read,
                row_ctx=t.query_rows(queries, pure_decode) * ctx_dec,
                prefill_pairs=pre_pairs,
                graph=graph,
                first=False,
            )
            out.update(zip(_TARGET_TERMS, verify, strict=True))
        if self.draft is not None and (spec if isinstance(spec, bool) else spec.any()):
            d = self.draft
            # the first forward over every scheduled token, then K − 1 over the decoding sequences
            first = d.terms(
                tokens=tokens,
                gemm_tokens=padded,
                rows=n_sampled,
                ctx_read=ctx_read,
                row_ctx=d.query_rows(queries, pure_decode) * ctx_dec,
                prefill_pairs=pre_pairs,
                graph=graph,
                first=True,
            )
            later_padded, later_graph = self._pad(n_sampled)
            later = d.terms(
                tokens=n_sampled,
                gemm_tokens=later_padded,
                rows=n_sampled,
                ctx_read=ctx_dec,
                row_ctx=d.query_rows(1.0, True) * ctx_dec,
                prefill_pairs=0.0,
                graph=later_graph,
                first=False,
            )
            rest = np.maximum(k_ - 1.0, 0.0)
            for name, a, b in zip(_DRAFT_TERMS, first, later, strict=True):
                out[name] = spec * (a + rest * b)
        out["host_step"] = zero + 1.0
        out["host_seq"] = zero + n_run
        out["host_token"] = zero + tokens
        out["host_spec"] = zero + spec
        out["host_draft"] = spec * (1.0 if self.draft_host_per_step else k_)
        off_sync, on_sync = self.sync_arms
        if off_sync or on_sync:
            out["host_sync"] = zero + np.where(k_ > 0, float(on_sync), float(off_sync))
        return out

    def step_time(
        self,
        k: npt.ArrayLike,
        n_decode: npt.ArrayLike,
        ctx_decode: npt.ArrayLike,
        prefill_tokens: npt.ArrayLike = 0.0,
        prefill_ctx: npt.ArrayLike = 0.0,
        prefill_pairs: npt.ArrayLike = 0.0,
        n_running: npt.ArrayLike | None = None,
    ) -> FloatArray:
        """Seconds for one step: the terms weighted by the coefficients (see :meth:`terms`)."""
        terms = self.terms(
            k, n_decode, ctx_decode, prefill_tokens, prefill_ctx, prefill_pairs, n_running
        )
        w = self._weights
        total = sum((w[name] * value for name, value in terms.items() if w[name]), start=0.0)
        return np.asarray(total, dtype=np.float64)

    # ---- cost ratios at steady state (batch b, mean context s) --------------------------------
    def decode_time(self, batch: npt.ArrayLike, mean_context: npt.ArrayLike) -> FloatArray:
        b = np.asarray(batch, dtype=np.float64)
        return self.step_time(0, b, b * np.asarray(mean_context))

    def spec_step_time(
        self, batch: npt.ArrayLike, k: npt.ArrayLike, mean_context: npt.ArrayLike
    ) -> FloatArray:
        b = np.asarray(batch, dtype=np.float64)
        return self.step_time(k, b, b * np.asarray(mean_context))

    def step_parts(
        self, batch: npt.ArrayLike, k: npt.ArrayLike, mean_context: npt.ArrayLike
    ) -> tuple[FloatArray, FloatArray]:
        """(verify pass with host costs, drafting) seconds of a steady speculative step."""
        b = np.asarray(batch, dtype=np.float64)
        terms = self.terms(k, b, b * np.asarray(mean_context))
        w = self._weights
        verify = sum((w[n] * v for n, v in terms.items() if n not in _DRAFTING), start=0.0)
        draft = sum((w[n] * terms[n] for n in _DRAFTING), start=0.0)
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
        kk = np.maximum(np.asarray(k, dtype=np.float64), 1.0)
        return np.asarray(draft / kk / self.decode_time(batch, mean_context))


_DRAFTING: Final = (*COEFFICIENTS["draft_time_scale"], "host_draft")
_TARGET_TERMS: Final = COEFFICIENTS["target_time_scale"]
_DRAFT_TERMS: Final = COEFFICIENTS["draft_time_scale"]


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
    name: str,
    shape: TransformerShape,
    hw: Hardware,
    tp: int,
    bytes_per_weight: float,
    kv_bytes_per_token: float,
    *,
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
    d, fp = resolved.config.drafter, resolved.draft_footprint
    if isinstance(d, NgramDrafter) or fp is None:
        return None
    tp = resolved.draft_tp
    bpw = BYTES_PER_PARAM[resolved.config.weight_dtype]
    target = resolved.target
    h = target.hidden_size
    if isinstance(d, DraftModelDrafter):
        shape = resolved.draft_shape or target
        layers = _layer_gemms(shape, tp)
        return _forward(
            fp.name, shape, hw, tp, bpw, fp.kv_bytes_per_token, layers=layers,
            n_layers=shape.num_hidden_layers, first=[], vocab=shape.vocab_size,
            sampler_passes=DRAFT_SAMPLER_PASSES, table_tokens=table,
        )  # fmt: skip
    one = target.model_copy(update={"num_hidden_layers": 1})
    first: list[tuple[float, float, float]] = []
    if isinstance(d, Eagle3Drafter):
        # fc fuses three target hidden states (3h → h) once per step; q/k/v read [embed ; hidden]
        layers = _layer_gemms(one, tp, attn_in=2 * h)
        first = [(float(h), 3.0 * h, 1.0)]
        vocab = d.draft_vocab_size
    else:  # EAGLE-1 and MTP: fc (2h → h) every forward, the target's full LM head
        layers = [(h, 2 * h, 1), *_layer_gemms(one, tp)]
        vocab = target.vocab_size
    return _forward(
        fp.name, one, hw, tp, bpw, fp.kv_bytes_per_token, layers=layers, n_layers=1,
        first=first, vocab=vocab, sampler_passes=DRAFT_SAMPLER_PASSES, table_tokens=table,
    )  # fmt: skip


def coefficients_of(resolved: ResolvedDeployment) -> Coefficients:
    """The coefficients a deployment config sets (its overheads and time scales)."""
    cfg = resolved.config
    d = cfg.drafter
    per_draft = d.cpu_cost_ms if isinstance(d, NgramDrafter) else d.forward_overhead_ms
    return Coefficients(
        target_time_scale=cfg.target_time_scale,
        draft_time_scale=cfg.draft_time_scale,
        step_overhead_s=cfg.step_overhead_ms * 1e-3,
        per_seq_overhead_s=cfg.per_seq_overhead_us * 1e-6,
        per_token_overhead_s=cfg.per_token_overhead_us * 1e-6,
        spec_step_overhead_s=cfg.spec_step_overhead_ms * 1e-3,
        draft_forward_overhead_s=per_draft * 1e-3,
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
        target.name,
        target,
        hw,
        tp,
        BYTES_PER_PARAM[cfg.weight_dtype],
        resolved.target_footprint.kv_bytes_per_token,
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
        max_num_batched_tokens=cfg.max_num_batched_tokens,
        cudagraph_max_tokens=resolved.cudagraph_max_tokens,
        description=resolved.describe(),
        draft_slots=1 if isinstance(cfg.drafter, DraftModelDrafter) else 0,
        sync_arms=(not base_async, not spec_async),
    )
