"""How each term of the step-time model moves the verify cost v(B, K) and the draft cost c(B, K).

One speculative step costs K·c + v plain decode steps (Leviathan et al. 2023, Thm 3.8, with the
emergent costs of :mod:`alphagate.sim.cost`). Both split exactly over the model's terms:

    v(B, K) = 1 + Σ_term (term(B, K) − term(B, 0)) / decode(B)       (target and host terms)
    c(B, K) =     Σ_term  term(B, K) / K / decode(B)                   (drafter terms)

so the table of contributions adds up to the figures ``alphagate simulate`` prints, and a term
that is the same in a verify pass and a decode step (the weight read below the ridge, the host
cost per step) contributes nothing to v.
"""

from __future__ import annotations

from typing import Final

import numpy as np
from pydantic import Field

from alphagate.core.records import Frozen
from alphagate.sim.cost import COEFFICIENTS, TERMS, StepCostModel
from alphagate.sim.kernel import decode_capacity
from alphagate.specs.deployment import BatchRoom
from alphagate.specs.uncertainty import ConstantRange, CostRanges

__all__ = [
    "TERM_LABELS",
    "CostExplanation",
    "EngineFact",
    "TermContribution",
    "engine_facts",
    "explain_cost",
    "powers_of_two",
]

#: What each term models, and its public source (the full citations are in :mod:`alphagate.sim.cost`).
TERM_LABELS: Final[dict[str, tuple[str, str]]] = {
    "target_gemm": (
        "weight GEMMs: roofline with the overlap loss measured on an H200 (BF16), "
        "tile/wave quantized, graph-padded",
        "NVIDIA matmul guide; PTX wgmma m64; vllm/config/vllm.py; benchmarks/gpu_kernels.py",
    ),
    "target_attention": (
        "attention: K+1 query rows per sequence in the kernel's tile",
        "flash-attention flash_api.cpp (FA2), hopper/ (FA3)",
    ),
    "target_sampler": (
        "sampler and rejection sampler over fp32 logits",
        "vllm/v1/sample/sampler.py, rejection_sampler.py",
    ),
    "target_allreduce": ("TP all-reduce, two per layer", "nccl-tests doc/PERFORMANCE.md"),
    "target_kernels": (
        "kernel gaps in a CUDA graph; eager past the largest capture",
        "NVIDIA CUDA Graphs blog; vllm/config/vllm.py",
    ),
    "draft_gemm": (
        "drafter GEMMs: fc (EAGLE-3: 3·hidden), layer, LM head",
        "vllm/v1/spec_decode/eagle.py, models/llama_eagle3.py",
    ),
    "draft_attention": ("drafter attention over the context", "as the target's"),
    "draft_sampler": ("draft tokens: greedy argmax", "vLLM draft_sample_method=greedy"),
    "draft_allreduce": ("drafter all-reduce (its own TP)", "vLLM draft_tensor_parallel_size"),
    "draft_kernels": ("drafter kernel gaps / eager launches", "as the target's"),
    "host_step": ("host: scheduler and input preparation per step", "calibrate fits it"),
    "host_seq": ("host: per running sequence", "calibrate fits it"),
    "host_token": ("host: per scheduled token", "calibrate fits it"),
    "host_spec": (
        "host: per speculative step, any K (rejection sampler, proposer set-up)",
        "vllm/v1/worker/gpu_model_runner.py; calibrate fits it",
    ),
    "host_spec_seq": (
        "host: per decoding sequence per speculative step (verify, rejection sampler)",
        "vllm/v1/sample/rejection_sampler.py; calibrate fits it",
    ),
    "host_draft": ("host: per draft forward (n-gram: per step)", "calibrate fits it"),
    "host_draft_seq": (
        "host: per decoding sequence per draft forward (attention metadata)",
        "vllm/v1/spec_decode/llm_base_proposer.py; calibrate fits it",
    ),
    "host_sync": (
        "host: the scheduling that async scheduling hides, per step of an arm without it",
        "vllm/config/vllm.py (which methods turn it off); vLLM PR #19970, #23569",
    ),
}
_DRAFTER_TERMS: Final = (*COEFFICIENTS["draft_time_scale"], "host_draft", "host_draft_seq")


def powers_of_two(top: int) -> list[int]:
    """1, 2, 4, … up to ``top`` (and ``top`` itself when it is not a power of two)."""
    out = [1 << i for i in range(max(top, 1).bit_length()) if (1 << i) <= top]
    return out if out[-1] == top else [*out, top]


class TermContribution(Frozen):
    """One term's share of v(B, K) (target and host terms) or of c(B, K) (drafter terms)."""

    term: str
    mechanism: str
    source: str
    moves: str = Field(description="v (verify cost) or c (draft cost)")
    by_batch: list[list[float]] = Field(description="[batch][K]: its contribution")


class EngineFact(Frozen):
    """A setting of the engine that moves a speculative step, per K: its value and its effect."""

    name: str = Field(description="what the row counts")
    by_k: list[int] = Field(description="[K]: the figure at each K of the explanation, K = 0 first")
    effect: str
    source: str


def _kv_fact(room: BatchRoom, grid: list[int], sequence_tokens: float) -> EngineFact:
    """The largest batch each arm's KV room holds, per K."""
    return EngineFact(
        name=f"largest batch in the KV cache ({room.kv_tokens_baseline:,} tokens; "
        f"{room.kv_tokens_speculative:,} beside the drafter's KV)",
        by_k=[room.largest_batch(sequence_tokens, k) for k in grid],
        effect=f"each running sequence holds its whole length ({sequence_tokens:,.0f} tokens "
        f"here), at most max_num_seqs ({room.max_num_seqs}) of them; while speculating also its "
        "K drafts and (EAGLE, MTP, draft model) K lookahead slots, so the speculative server "
        "holds fewer and the rest of its requests queue (simulator and closed form)",
        source="vllm/v1/core/sched/scheduler.py (allocate_slots, num_lookahead_tokens); "
        "vllm/config/vllm.py; vllm/v1/worker/gpu_model_runner.py (get_kv_cache_spec)",
    )


def engine_facts(
    cost: StepCostModel, ks: list[int], sequence_tokens: float | None = None
) -> list[EngineFact]:
    """The token budget's cap on the decoding batch, async scheduling, the largest batch a
    CUDA graph holds, and (given the mean tokens of a sequence) the largest batch each KV room
    holds, at each K (K = 0: without speculation, first)."""
    grid = [0, *ks]
    slots = cost.draft_slots
    off_sync, on_sync = cost.sync_arms
    facts = [
        EngineFact(
            name=f"sequences a step decodes (budget {cost.max_num_batched_tokens:,})",
            by_k=[decode_capacity(cost.max_num_batched_tokens, k, slots) for k in grid],
            effect="each decoding sequence takes K + 1 tokens of max_num_batched_tokens"
            + (" and one more input slot for the draft model" if slots else "")
            + "; beyond it the rest of the batch waits a step (simulator and closed form)",
            source="vllm/v1/core/sched/scheduler.py; "
            "SpeculativeConfig.max_num_new_slots_for_drafting",
        ),
        EngineFact(
            name="async scheduling (1 = on)",
            by_k=[int(not (on_sync if k else off_sync)) for k in grid],
            effect="a server without it pays the host time it hides, sync_step_overhead_s, every "
            "step (host_sync); vLLM turns it off for n-gram drafting on the CPU, or for both "
            "with --no-async-scheduling",
            source="vllm/config/vllm.py, VllmConfig's async_scheduling default",
        ),
    ]
    if cost.cudagraph_max_tokens > 0:
        facts.append(
            EngineFact(
                name=f"largest batch in a CUDA graph (≤ {cost.cudagraph_max_tokens} tokens)",
                by_k=[cost.cudagraph_max_tokens // (k + 1) for k in grid],
                effect="a step's B·(K + 1) tokens are padded to the next capture size; past the "
                "largest the step launches its kernels eagerly (the kernels term)",
                source="vllm/config/vllm.py, cudagraph_capture_sizes",
            )
        )
    if cost.batch_room is not None and sequence_tokens is not None:
        facts.append(_kv_fact(cost.batch_room, grid, sequence_tokens))
    return facts


class CostExplanation(Frozen):
    """v(B, K), c(B, K) and every term's contribution, at one mean context."""

    deployment: str
    mean_context: float
    batches: list[int]
    ks: list[int]
    decode_ms: list[float] = Field(description="a plain decode step at each batch (ms)")
    verify_cost: list[list[float]] = Field(description="[batch][K]: v(B, K)")
    draft_cost: list[list[float]] = Field(description="[batch][K]: c(B, K)")
    terms: list[TermContribution]
    ranges: list[ConstantRange] = Field(
        default_factory=list,
        description="the uncertain constants' ranges that plan and simulate intervals span",
    )
    ranges_origin: str = Field(default="prior", description="prior, or calibration")
    engine: list[EngineFact] = Field(
        default_factory=list,
        description="engine settings that move a speculative step, per K (K = 0 first)",
    )


def explain_cost(
    cost: StepCostModel,
    batches: list[int],
    ks: list[int],
    mean_context: float,
    ranges: CostRanges | None = None,
    sequence_tokens: float | None = None,
) -> CostExplanation:
    """v, c and each term's contribution on a grid of batch sizes and K (and the ranges of the
    uncertain constants, and each arm's largest batch at ``sequence_tokens`` per sequence, when
    given)."""
    b = np.asarray(batches, dtype=np.float64)[:, None]  # [B, 1]
    k = np.asarray(ks, dtype=np.float64)[None, :]  # [1, K]
    w = cost.coefficients.term_weights()
    spec = cost.terms(k=k, n_decode=b, ctx_decode=b * mean_context)._asdict()  # each [B, K]
    base = cost.terms(k=0.0, n_decode=b, ctx_decode=b * mean_context)._asdict()  # each [B, 1]
    decode = sum((w[t] * base[t] for t in TERMS), start=np.zeros_like(b))
    rows = []
    for t in TERMS:
        if t in _DRAFTER_TERMS:
            share = w[t] * spec[t] / k / decode
            moves = "c"
        else:
            share = w[t] * (spec[t] - base[t]) / decode
            moves = "v"
        share = np.broadcast_to(share, (b.shape[0], k.shape[1]))
        label, source = TERM_LABELS[t]
        rows.append(
            TermContribution(
                term=t, mechanism=label, source=source, moves=moves, by_batch=share.tolist()
            )
        )
    v = 1.0 + sum(np.asarray(r.by_batch) for r in rows if r.moves == "v")
    c = sum(np.asarray(r.by_batch) for r in rows if r.moves == "c")
    return CostExplanation(
        deployment=cost.description,
        mean_context=mean_context,
        batches=list(batches),
        ks=list(ks),
        decode_ms=(decode[:, 0] * 1e3).tolist(),
        verify_cost=np.asarray(v).tolist(),
        draft_cost=np.asarray(c).tolist(),
        terms=rows,
        ranges=[] if ranges is None else list(ranges.varying()),
        ranges_origin="prior" if ranges is None else ranges.origin,
        engine=engine_facts(cost, list(ks), sequence_tokens),
    )
