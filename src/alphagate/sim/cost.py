"""Roofline step-time model for one engine step of a continuous-batching server.

Per forward pass over ``T`` new tokens of a batch whose sequences have contexts ``S_i`` (the
roofline of Williams et al. 2009; LLM-Viewer, arXiv 2402.16363, sums per-operator times the same
way; parameter and KV byte counts come from :mod:`alphagate.theory.memory`):

    linear  = max(weight_bytes / BW_eff,  2·N_matmul·T / F_eff(weight dtype))
    attn    = max((Σ S_i + T)·kv_bytes / BW_eff,  4·L·n_heads·head_dim·Σ t_i·S_i / F_eff(bf16))
    comm    = 2·L·(2(TP−1)/TP · T·h·2 bytes / link_bw + all-reduce latency)      (TP > 1)
    forward = linear + attn + comm + fixed launch cost

All byte and FLOP terms are per GPU (divided by TP). One engine step with K drafts is

    step = K · draft_forward(B decode tokens) + [draft pass over prefill tokens]
         + target_forward(B·(K+1) + prefill tokens) + step overhead + per-sequence overhead

so the verify-cost ratio v(B, K, S) = verify / decode and the draft-cost ratio c(B) = draft /
decode *emerge* from the hardware: v ≈ 1 and c small while the weight read dominates, and v grows
towards K + 1 once B·(K+1) passes the ridge point (≈ 295 tokens for BF16 on an H100 at peak).
Every method takes numpy arrays (one element per scenario) or scalars.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from alphagate.core.shapes import TransformerShape
from alphagate.specs.deployment import NgramDrafter, ResolvedDeployment
from alphagate.theory.memory import BYTES_PER_PARAM, Footprint

FloatArray = npt.NDArray[np.float64]

__all__ = ["ForwardCost", "StepCostModel", "build_cost_model"]


@dataclass(frozen=True)
class ForwardCost:
    """Roofline constants of one forward pass of one model on one GPU (after the TP split)."""

    weight_bytes: float
    gemm_flops_per_token: float
    kv_bytes_per_token: float
    attn_flops_per_pair: float  # per (query token × context token) pair
    bandwidth: float  # effective bytes/s
    gemm_flops: float  # effective FLOP/s for the weight GEMMs
    attn_flops: float  # effective FLOP/s for attention
    comm_s_per_token: float
    comm_s_fixed: float
    fixed_s: float

    def time(
        self, tokens: npt.ArrayLike, ctx_read: npt.ArrayLike, attn_pairs: npt.ArrayLike
    ) -> FloatArray:
        """Seconds for a forward over ``tokens`` new tokens reading ``ctx_read`` cached tokens."""
        t = np.asarray(tokens, dtype=np.float64)
        linear = np.maximum(
            self.weight_bytes / self.bandwidth, self.gemm_flops_per_token * t / self.gemm_flops
        )
        kv = (np.asarray(ctx_read, dtype=np.float64) + t) * (
            self.kv_bytes_per_token / self.bandwidth
        )
        attn = np.maximum(
            kv,
            np.asarray(attn_pairs, dtype=np.float64) * (self.attn_flops_per_pair / self.attn_flops),
        )
        comm = self.comm_s_fixed + self.comm_s_per_token * t
        return np.asarray(linear + attn + comm + self.fixed_s)


@dataclass(frozen=True)
class StepCostModel:
    """Time of one engine step (target verify or decode, plus drafting) for a deployment."""

    target: ForwardCost
    draft: ForwardCost | None  # None: drafting costs no GPU time (n-gram) or no drafter
    draft_host_s: float  # host-side drafting cost per step (n-gram lookup)
    step_overhead_s: float
    per_seq_s: float
    max_num_batched_tokens: int
    description: str

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
        """Seconds for one step: ``n_decode`` sequences (Σ context ``ctx_decode``) each verifying
        ``k`` drafts (k = 0: plain decode), plus ``prefill_tokens`` of chunked prefill."""
        kk = np.asarray(k, dtype=np.float64)
        nd = np.asarray(n_decode, dtype=np.float64)
        cd = np.asarray(ctx_decode, dtype=np.float64)
        pt = np.asarray(prefill_tokens, dtype=np.float64)
        q = kk + 1.0
        target = self.target.time(
            nd * q + pt, cd + np.asarray(prefill_ctx), q * cd + np.asarray(prefill_pairs)
        )
        spec = kk > 0
        draft: FloatArray | float = 0.0
        if self.draft is not None:
            per_forward = self.draft.time(nd, cd, cd)
            prefill_pass = np.where(pt > 0, self.draft.time(pt, prefill_ctx, prefill_pairs), 0.0)
            draft = np.where(spec & (nd > 0), kk * per_forward + prefill_pass, 0.0)
        host = np.where(spec, self.draft_host_s, 0.0)
        running = nd if n_running is None else np.asarray(n_running, dtype=np.float64)
        return np.asarray(target + draft + host + self.step_overhead_s + self.per_seq_s * running)

    # ---- cost ratios at steady state (batch b, mean context s) --------------------------------
    def decode_time(self, batch: npt.ArrayLike, mean_context: npt.ArrayLike) -> FloatArray:
        b = np.asarray(batch, dtype=np.float64)
        return self.step_time(0, b, b * np.asarray(mean_context))

    def spec_step_time(
        self, batch: npt.ArrayLike, k: npt.ArrayLike, mean_context: npt.ArrayLike
    ) -> FloatArray:
        b = np.asarray(batch, dtype=np.float64)
        return self.step_time(k, b, b * np.asarray(mean_context))

    def verify_cost_ratio(
        self, batch: npt.ArrayLike, k: npt.ArrayLike, mean_context: npt.ArrayLike
    ) -> FloatArray:
        """v(B, K, S): target pass over B·(K+1) tokens ÷ a plain decode step (overheads included)."""
        b = np.asarray(batch, dtype=np.float64)
        cd = b * np.asarray(mean_context)
        q = np.asarray(k, dtype=np.float64) + 1.0
        verify = self.target.time(b * q, cd, q * cd) + self.step_overhead_s + self.per_seq_s * b
        return np.asarray(verify / self.decode_time(b, mean_context))

    def draft_cost_ratio(self, batch: npt.ArrayLike, mean_context: npt.ArrayLike) -> FloatArray:
        """c(B): one draft forward (plus its share of host cost) ÷ a plain decode step."""
        b = np.asarray(batch, dtype=np.float64)
        cd = b * np.asarray(mean_context)
        fwd = self.draft.time(b, cd, cd) if self.draft is not None else np.zeros_like(b)
        return np.asarray((fwd + self.draft_host_s) / self.decode_time(b, mean_context))


def _forward(
    footprint: Footprint,
    shape: TransformerShape,
    resolved: ResolvedDeployment,
    fixed_s: float,
) -> ForwardCost:
    """Roofline constants of one model's forward from its footprint (theory.memory's counts)."""
    cfg, gpu, tp = resolved.config, resolved.gpu, resolved.tp
    layers = footprint.layers_with_kv
    ring = 2.0 * (tp - 1) / tp
    return ForwardCost(
        weight_bytes=footprint.streamed_params * BYTES_PER_PARAM[cfg.weight_dtype] / tp,
        gemm_flops_per_token=2.0 * footprint.streamed_params / tp,
        kv_bytes_per_token=footprint.kv_bytes_per_token / tp,
        attn_flops_per_pair=4.0 * layers * shape.num_attention_heads * shape.head_dim / tp,
        bandwidth=gpu.hbm_bandwidth * gpu.bw_efficiency,
        gemm_flops=gpu.peak_flops(cfg.weight_dtype) * gpu.compute_efficiency,
        attn_flops=gpu.bf16_flops * gpu.compute_efficiency,
        comm_s_per_token=(
            2.0 * layers * ring * shape.hidden_size * 2.0 / gpu.interconnect_bandwidth
        )
        if tp > 1
        else 0.0,
        comm_s_fixed=(2.0 * layers * gpu.allreduce_latency_s) if tp > 1 else 0.0,
        fixed_s=fixed_s,
    )


def build_cost_model(resolved: ResolvedDeployment) -> StepCostModel:
    """Step-time model for a resolved deployment and its drafter."""
    cfg = resolved.config
    target_cost = _forward(resolved.target_footprint, resolved.target, resolved, 0.0)
    d = cfg.drafter
    draft: ForwardCost | None = None
    host = 0.0
    if isinstance(d, NgramDrafter):
        host = d.cpu_cost_ms * 1e-3
    elif resolved.draft_footprint is not None:
        # a draft model has its own shape; EAGLE heads and MTP modules have the target's width
        shape = resolved.draft_shape or resolved.target
        draft = _forward(resolved.draft_footprint, shape, resolved, d.forward_overhead_ms * 1e-3)
    return StepCostModel(
        target=target_cost,
        draft=draft,
        draft_host_s=host,
        step_overhead_s=cfg.step_overhead_ms * 1e-3,
        per_seq_s=cfg.per_seq_overhead_us * 1e-6,
        max_num_batched_tokens=cfg.max_num_batched_tokens,
        description=resolved.describe(),
    )
