"""GPU presets: HBM bandwidth, dense BF16/FP8 peaks, memory, interconnect, achievable efficiency.

Vendor figures from the NVIDIA H100, H200, A100 and HGX B200 and the AMD MI300X data sheets
(dense = sparse / 2: the sheets quote FP8 and BF16 "with sparsity"). Achievable numbers are lower — roughly 80–90% of HBM bandwidth and 60–80% of dense peak on real kernels — so
each preset carries efficiency factors ``bw_efficiency`` and ``compute_efficiency`` that a user
can override (or calibrate against measured step times). Interconnect figures are per-direction
NVLink / Infinity Fabric bandwidth per GPU, used for the tensor-parallel all-reduce term.

The kernel-level figures the step-time model's terms need (:mod:`alphagate.sim.cost`):

- ``sm_count``: streaming multiprocessors (compute units on AMD), from the NVIDIA H100 and A100
  architecture whitepapers (132 SMs on the H100 SXM5, 108 on the A100), the Blackwell datasheet
  (148) and the AMD CDNA 3 whitepaper (304 CUs on the MI300X) — GEMM tiles run in waves of one
  tile per SM; ``gemm_tile_m`` × ``gemm_tile_n``: the tile, 64 × 128 (64 = the M of Hopper's
  ``wgmma`` instruction, PTX ISA; NVIDIA's matrix-multiplication guide); a CPU has neither (1 × 1);
- ``attention_tile_m`` and ``attention_packs_gqa``: the query tile of the attention kernel vLLM
  runs and whether the query heads sharing a KV head are packed into it for multi-token queries.
  FlashAttention-3 (Hopper; ``hopper/tile_size.h``: 128-row tiles for head dim 128;
  ``hopper/flash_api.cpp`` packs GQA heads for paged KV) packs; FlashAttention-2 (Ampere;
  ``csrc/flash_attn/flash_api.cpp``) packs the group only when every query has one token
  (``seqlenq_ngroups_swapped``) and its paged split-KV kernel uses 64-row tiles;
- ``gemm_overlap_loss``: a weight GEMM streams its weights and runs its MMAs at once, but not
  perfectly overlapped: measured on an H200 (``benchmarks/gpu_kernels.py``, cuBLAS through
  PyTorch 2.11, CUDA graphs; the figures are in ``benchmarks/data/h200_kernels.json`` and
  ``h200_gemms_*.json``), one Llama-3.1-8B decoder layer's four BF16 GEMMs take 1.02×, 1.04×,
  1.06× and 1.19× their M = 1 time at M = 16, 32, 64 and 128 tokens — all far below the ridge,
  where a pure roofline stays at 1.00× — and, well above the ridge (M ≥ 512), 1.03–1.04× the
  roofline plus a quarter of the weight read. FP8 (e4m3 weights and activations through
  ``torch._scaled_mm``, cuBLASLt) grows alike: 1.11× (8B) and 1.15× (Llama-3.3-70B's layer at
  TP = 2) at M = 128. A quarter of the smaller of the two times reproduces both (0.25 for BF16
  and FP8 weights, assumed for the other GPUs). INT4 GEMMs (W4A16, Marlin kernels) were not
  measured: ``gemm_overlap_loss_int4`` is 0 — the pure roofline — until they are;
- ``kernel_gap_s`` and ``kernel_launch_s``: the cost per kernel inside a CUDA graph and when
  launched one by one from the host — NVIDIA's "Getting Started with CUDA Graphs" (2019) measures
  a 2.9 µs kernel at 3.8 µs per kernel issued back to back from a stream and 3.4 µs per kernel
  replayed from a graph.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Final

from pydantic import Field, ValidationError

from alphagate.core.errors import SpecError, validation_problem
from alphagate.core.records import Frozen
from alphagate.theory.roofline import ridge_point

__all__ = ["GPU_PRESETS", "GpuSpec", "gpu_preset_names", "load_gpu_spec", "resolve_gpu"]


class GpuSpec(Frozen):
    """One accelerator. Rates in SI units: bytes/s and FLOP/s."""

    name: str
    memory_bytes: float = Field(gt=0)
    hbm_bandwidth: float = Field(gt=0, description="HBM bytes/s")
    bf16_flops: float = Field(gt=0, description="dense BF16 FLOP/s")
    fp8_flops: float | None = Field(
        default=None, gt=0, description="dense FP8 FLOP/s; None = no FP8 units"
    )
    interconnect_bandwidth: float = Field(gt=0, description="per-direction GPU-to-GPU bytes/s")
    allreduce_latency_s: float = Field(
        default=8e-6, ge=0, description="fixed cost of one all-reduce"
    )
    bw_efficiency: float = Field(default=0.85, gt=0, le=1)
    compute_efficiency: float = Field(default=0.70, gt=0, le=1)
    sm_count: int = Field(default=132, ge=1, le=4096, description="SMs (CUs): one GEMM tile each")
    gemm_tile_m: int = Field(
        default=64, ge=1, le=1024, description="GEMM tile rows (tokens): M is padded to it"
    )
    gemm_tile_n: int = Field(default=128, ge=1, le=1024, description="GEMM tile columns")
    attention_tile_m: int = Field(
        default=128, ge=1, le=1024, description="query rows per attention kernel tile"
    )
    attention_packs_gqa: bool = Field(
        default=True,
        description="multi-token queries (verify) pack the query heads of a KV head into a tile",
    )
    gemm_overlap_loss: float = Field(
        default=0.25,
        ge=0,
        le=1,
        description="BF16 and FP8 weight GEMMs: share of the smaller of the weight-read and "
        "compute times that does not hide behind the larger",
    )
    gemm_overlap_loss_int4: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="the same for INT4 weights (not measured: 0, the pure roofline)",
    )
    kernel_gap_s: float = Field(
        default=0.5e-6, ge=0, description="cost per kernel replayed from a CUDA graph"
    )
    kernel_launch_s: float = Field(
        default=3.8e-6, ge=0, description="host time per kernel launched one by one (eager)"
    )

    def peak_flops(self, dtype: str) -> float:
        """Dense peak for GEMMs with ``dtype`` weights (FP8 falls back to BF16 without FP8 units)."""
        if dtype == "fp8" and self.fp8_flops is not None:
            return self.fp8_flops
        return self.bf16_flops

    def ridge_point(self, dtype: str = "bf16", effective: bool = False) -> float:
        """FLOP per byte at which a kernel turns compute-bound (peak, or effective)."""
        if effective:
            return ridge_point(
                self.peak_flops(dtype) * self.compute_efficiency,
                self.hbm_bandwidth * self.bw_efficiency,
            )
        return ridge_point(self.peak_flops(dtype), self.hbm_bandwidth)


GB = 1e9
T = 1e12

GPU_PRESETS: Final[dict[str, GpuSpec]] = {
    "h100": GpuSpec(
        name="H100 SXM 80GB",
        memory_bytes=80 * GB,
        hbm_bandwidth=3.35 * T,
        bf16_flops=989 * T,
        fp8_flops=1979 * T,
        interconnect_bandwidth=450 * GB,
        sm_count=132,
    ),
    "h200": GpuSpec(
        name="H200 SXM 141GB",
        memory_bytes=141 * GB,
        hbm_bandwidth=4.8 * T,
        bf16_flops=989 * T,
        fp8_flops=1979 * T,
        interconnect_bandwidth=450 * GB,
        sm_count=132,
    ),
    "a100-80gb": GpuSpec(
        name="A100 SXM 80GB",
        memory_bytes=80 * GB,
        hbm_bandwidth=2.039 * T,
        bf16_flops=312 * T,
        fp8_flops=None,
        interconnect_bandwidth=300 * GB,
        sm_count=108,
        attention_tile_m=64,
        attention_packs_gqa=False,
    ),
    "b200": GpuSpec(
        name="B200 (HGX) 180GB",
        memory_bytes=180 * GB,
        hbm_bandwidth=7.7 * T,
        bf16_flops=2250 * T,
        fp8_flops=4500 * T,
        interconnect_bandwidth=900 * GB,
        sm_count=148,
    ),
    "mi300x": GpuSpec(
        name="MI300X 192GB",
        memory_bytes=192 * GB,
        hbm_bandwidth=5.3 * T,
        bf16_flops=1307.4 * T,
        fp8_flops=2614.9 * T,
        interconnect_bandwidth=448 * GB,
        sm_count=304,
        attention_tile_m=64,
        attention_packs_gqa=False,
    ),
}


def gpu_preset_names() -> list[str]:
    return sorted(GPU_PRESETS)


def load_gpu_spec(path: str | Path) -> GpuSpec:
    """Read a :class:`GpuSpec` from a JSON file (same field names; unknown fields rejected)."""
    p = Path(path)
    if not p.is_file():
        raise SpecError(f"GPU spec file not found: {p}")
    try:
        return GpuSpec.model_validate(json.loads(p.read_text(encoding="utf-8")))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SpecError(f"{p}: not a readable JSON file ({exc})") from None
    except ValidationError as exc:
        raise SpecError(f"{p}: {validation_problem(exc)}") from None


def resolve_gpu(name: str) -> GpuSpec:
    """A preset slug (case-insensitive) or a path to a GPU spec JSON file."""
    slug = name.strip().lower()
    if slug in GPU_PRESETS:
        return GPU_PRESETS[slug]
    if slug.endswith(".json") or Path(name).exists():
        return load_gpu_spec(name)
    raise SpecError(
        f"unknown GPU {name!r}: use a preset ({', '.join(gpu_preset_names())}) or a JSON spec file"
    )
