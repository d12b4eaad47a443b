"""Each term of the step-time model has the shape its mechanism gives it: monotone where it should
be, zero where it should vanish, and the sum of the terms is the step time either way it is
computed (one step as Python floats, many steps as arrays)."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from alphagate.core.traffic import TrafficClass
from alphagate.sim.cost import (
    COEFFICIENTS,
    GEMM_TILE_M,
    KERNELS_PER_FORWARD,
    KERNELS_PER_LAYER,
    TERMS,
    ForwardTerms,
    HostTerms,
    StepCostModel,
    StepTerms,
    build_cost_model,
    capture_sizes,
)
from alphagate.sim.explain import explain_cost, powers_of_two
from alphagate.sim.predict import model_speedup
from alphagate.specs import (
    DeploymentConfig,
    DraftModelDrafter,
    EagleDrafter,
    NgramDrafter,
    WorkloadConfig,
    resolve_deployment,
)
from alphagate.specs.calibration import COEFFICIENT_FIELDS
from alphagate.theory.memory import model_footprint

H100_8B = DeploymentConfig(model="llama-3.1-8b", weight_dtype="bf16", gpu="h100")


def _cost(**update: object) -> StepCostModel:
    return build_cost_model(resolve_deployment(H100_8B.model_copy(update=update)))


@pytest.fixture(scope="module")
def cost() -> StepCostModel:
    return _cost()


def test_gemm_list_reads_every_streamed_weight(cost: StepCostModel) -> None:
    """The GEMMs priced are the weights one forward reads (theory.memory's count, less norms)."""
    assert cost.target is not None
    fp = model_footprint(resolve_deployment(H100_8B).target, "bf16")
    priced = cost.target.gemms.params + cost.target.head.params
    assert priced == pytest.approx(fp.streamed_params, rel=1e-3)


def test_gemm_is_tile_and_wave_quantized(cost: StepCostModel) -> None:
    """With an unlimited bandwidth only compute counts: flat inside a 64-row tile, a step at each
    new tile, whole waves once the tiles outnumber the SMs; zero at M = 0; never decreasing."""
    assert cost.target is not None
    t = cost.target
    hw = replace(t.hw, bandwidth=1e30)
    m = np.arange(0, 1025, dtype=np.float64)
    g = t.gemms.seconds(m, t.bytes_per_weight, hw)
    assert g[0] == 0.0
    assert np.all(np.diff(g) >= 0)
    assert g[1] == g[GEMM_TILE_M] < g[GEMM_TILE_M + 1]
    # one GEMM with 2 tiles per row block: below one wave it grows with the tiles; past the SMs
    # it jumps to whole waves
    one = replace(t.gemms, n=np.asarray([2.0 * hw.tile_n]), k=np.asarray([4096.0]))
    one = replace(one, count=np.asarray([1.0]))
    tiles = lambda mm: 2 * np.ceil(mm / GEMM_TILE_M)  # noqa: E731
    per_tile = 2.0 * hw.tile_m * hw.tile_n * 4096 / hw.gemm_flops
    m_full = GEMM_TILE_M * hw.sm_count / 2  # exactly one wave
    assert float(one.seconds(m_full, 2.0, hw)) == pytest.approx(tiles(m_full) * per_tile)
    assert float(one.seconds(m_full + 1, 2.0, hw)) == pytest.approx(2 * hw.sm_count * per_tile)


def test_gemm_is_the_weight_read_below_the_ridge_on_a_pure_roofline(cost: StepCostModel) -> None:
    """With perfect overlap (no loss) a GEMM below the ridge costs exactly its weight read."""
    assert cost.target is not None
    t = cost.target
    hw = replace(t.hw, gemm_overlap_loss=0.0)
    read = (t.gemms.n * t.gemms.k * t.gemms.count).sum() * t.bytes_per_weight / hw.bandwidth
    assert float(t.gemms.seconds(1.0, t.bytes_per_weight, hw)) == pytest.approx(read)
    assert float(t.gemms.seconds(64.0, t.bytes_per_weight, hw)) == pytest.approx(read)


def test_gemm_overlap_loss_grows_with_m_below_the_ridge(cost: StepCostModel) -> None:
    """The loss is a share of the smaller of read and compute: it grows in proportion to M below
    the ridge (strictly, M by M), is a fixed share of the read above it, and vanishes at M = 0."""
    assert cost.target is not None
    t = cost.target
    hw, bpw = t.hw, t.bytes_per_weight
    assert hw.gemm_overlap_loss == 0.25
    m = np.arange(0.0, 129.0)
    g = t.gemms.seconds(m, bpw, hw)
    flat = t.gemms.seconds(m, bpw, replace(hw, gemm_overlap_loss=0.0))
    assert g[0] == flat[0] == 0.0
    assert np.all(np.diff(g[1:]) > 0)  # the overlap loss: rising below the ridge, not flat
    flops = 2.0 * (t.gemms.n * t.gemms.k * t.gemms.count).sum() / hw.gemm_flops  # per token
    assert g[1:] - flat[1:] == pytest.approx(0.25 * m[1:] * flops, rel=1e-9)
    big = 1e5  # far above the ridge: compute-bound, the loss is a quarter of the read
    read = (t.gemms.n * t.gemms.k * t.gemms.count).sum() * bpw / hw.bandwidth
    gap = float(t.gemms.seconds(big, bpw, hw)) - float(
        t.gemms.seconds(big, bpw, replace(hw, gemm_overlap_loss=0.0))
    )
    assert gap == pytest.approx(0.25 * read)


def test_gemm_growth_below_the_ridge_matches_the_h200_measurement() -> None:
    """``benchmarks/data/h200_kernels.json`` (``benchmarks/gpu_kernels.py measure`` on an H200):
    one Llama-3.1-8B layer's four GEMMs at M tokens ÷ at M = 1. The model's ratio follows it to
    within 3% from M = 2 to 128 (all below the ridge) — a pure roofline would stay at 1.00 while
    the measurement reaches 1.19 — and the time itself within 15% from 192 to 2,048 tokens
    (compute-bound, where tile waves step; below, the preset's bandwidth efficiency sets the
    level: 0.90× the measured time)."""
    from pathlib import Path

    data = json.loads(
        (Path(__file__).parents[2] / "benchmarks" / "data" / "h200_kernels.json").read_text()
    )
    target = _cost(gpu="h200").target
    assert target is not None and "H200" in data["device"]
    layer = replace(target.gemms, count=np.ones_like(target.gemms.count))
    m = np.asarray(data["gemm"]["m"], dtype=np.float64)
    measured = np.asarray(data["gemm"]["seconds"]["layer"])
    model = layer.seconds(m, 2.0, target.hw)
    rm, rd = measured / measured[0], model / model[0]
    below = (m >= 2) & (m <= 128)
    assert rm[m == 128][0] > 1.15  # the effect the term is for
    assert np.abs(rd[below] / rm[below] - 1).max() < 0.03
    above = m >= 192
    assert np.abs(model[above] / measured[above] - 1).max() < 0.15


@pytest.mark.parametrize("name", ["8b_bf16", "8b_fp8", "70b-tp2_bf16", "70b-tp2_fp8"])
def test_gemm_growth_in_bf16_and_fp8_matches_the_h200_sweeps(name: str) -> None:
    """``benchmarks/data/h200_gemms_*.json`` (``benchmarks/gpu_kernels.py gemms`` on an H200):
    the layer GEMMs of Llama-3.1-8B and of Llama-3.3-70B at TP = 2, in BF16 and in FP8 (cuBLASLt
    scaled GEMMs). FP8 grows below the ridge as BF16 does (1.11× and 1.15× at M = 128 where a pure
    roofline stays at 1.00×); with the same overlap loss the model's ratio to M = 1 follows every
    sweep within 8% up to M = 128 (a pure roofline misses by 10–14%), and its time is within 15%
    from M = 192 up."""
    from pathlib import Path

    from alphagate.sim.cost import Gemms, Hardware
    from alphagate.specs.gpus import resolve_gpu

    path = Path(__file__).parents[2] / "benchmarks" / "data" / f"h200_gemms_{name}.json"
    data = json.loads(path.read_text())
    assert "H200" in data["device"] and data["shape_divisor"] == 1
    dtype = data["gemm"]["dtype"]
    hw = Hardware.of(resolve_gpu("h200"), dtype)
    assert hw.gemm_overlap_loss == 0.25
    gemms = Gemms.of([(float(n), float(k), 1.0) for _, n, k in data["gemm"]["shapes"]])
    m = np.asarray(data["gemm"]["m"], dtype=np.float64)
    measured = np.asarray(data["gemm"]["seconds"]["layer"])
    bpw = 1.0 if dtype == "fp8" else 2.0
    model = gemms.seconds(m, bpw, hw)
    roofline = gemms.seconds(m, bpw, replace(hw, gemm_overlap_loss=0.0))
    rm, rd, rr = measured / measured[0], model / model[0], roofline / roofline[0]
    below = (m >= 2) & (m <= 128)
    assert rm[m == 128][0] > 1.1  # the effect, in FP8 too
    assert np.abs(rd[below] / rm[below] - 1).max() < 0.08
    assert np.abs(rr[below] / rm[below] - 1).max() > 0.09  # what the roofline alone misses
    above = m >= 192
    assert np.abs(model[above] / measured[above] - 1).max() < 0.15


def test_int4_gemms_stay_on_the_roofline() -> None:
    """INT4 (W4A16) GEMMs were not measured: no overlap loss is assumed for them."""
    from alphagate.sim.cost import Hardware
    from alphagate.specs.gpus import resolve_gpu

    assert Hardware.of(resolve_gpu("h200"), "int4").gemm_overlap_loss == 0.0
    assert Hardware.of(resolve_gpu("h200"), "fp8").gemm_overlap_loss == 0.25


def test_verify_attention_pads_query_rows_to_the_tile() -> None:
    """Decode packs the GQA group into one tile on both kernels; a verify pass with K+1 queries
    does only on a packing kernel (FlashAttention-3), else each head's rows are padded apart."""
    hopper = _cost().target
    ampere = _cost(gpu="a100-80gb").target
    assert hopper is not None and ampere is not None
    g = hopper.group
    assert g == 4
    assert hopper.query_rows(1.0, True) == hopper.query_rows(4.0, False) == 128.0  # one tile
    assert ampere.query_rows(1.0, True) == 64.0
    assert ampere.query_rows(4.0, False) == g * 64.0  # 4 heads × a 64-row tile each
    assert ampere.query_rows(1.0, False) == g * 64.0  # a mixed step does not pack either
    rows = ampere.query_rows(np.arange(1.0, 70.0), False)
    assert np.all(np.diff(rows) >= 0)


def test_verify_attention_moves_v_only_where_it_is_compute_bound() -> None:
    """On an H100 (packed, memory-bound) verifying K+1 tokens reads the same KV as decoding: no
    change in v from attention; on an A100 (FA2, 4× the rows) it grows with the batch."""

    def attn(cost: StepCostModel, b: float) -> float:
        e = explain_cost(cost, [int(b)], [3], 1024.0)
        return next(t.by_batch[0][0] for t in e.terms if t.term == "target_attention")

    h100, a100 = _cost(), _cost(gpu="a100-80gb")
    assert attn(h100, 16) < 1e-3
    assert attn(a100, 4) < attn(a100, 16) < attn(a100, 64)
    assert attn(a100, 16) > 0.02


def test_sampler_is_per_sampled_row(cost: StepCostModel) -> None:
    t0 = cost.terms(k=0, n_decode=1, ctx_decode=100.0).target_sampler
    assert (
        float(
            cost.terms(
                k=0,
                n_decode=0,
                ctx_decode=0.0,
                prefill_tokens=512,
                prefill_ctx=0.0,
                prefill_pairs=512 * 256.0,
            ).target_sampler
        )
        == 0.0
    )
    assert float(cost.terms(k=0, n_decode=8, ctx_decode=800.0).target_sampler) == pytest.approx(
        8 * float(t0)
    )
    # a verify pass samples K + 1 rows per sequence
    assert float(cost.terms(k=3, n_decode=8, ctx_decode=800.0).target_sampler) == pytest.approx(
        32 * float(t0)
    )


def test_drafter_terms() -> None:
    """Zero without speculation; an EAGLE-3 step's first forward carries the fc over 3·hidden
    and every scheduled token, the later ones the batch; growing with K and with the batch."""
    cost = _cost()
    assert cost.draft is not None
    no = cost.terms(k=0, n_decode=16, ctx_decode=16 * 500.0)
    assert all(float(getattr(no, t)) == 0.0 for t in COEFFICIENTS["draft_time_scale"])
    assert float(no.host_draft) == 0.0
    d = [
        float(cost.terms(k=k, n_decode=16, ctx_decode=16 * 500.0).draft_gemm) for k in (1, 2, 3, 4)
    ]
    assert np.all(np.diff(d) > 0)
    # the first forward costs more than a later one (fc 3h → h over all tokens)
    assert d[0] > d[1] - d[0] > 0
    by_b = [
        float(cost.terms(k=3, n_decode=b, ctx_decode=b * 500.0).draft_gemm) for b in (1, 8, 64, 128)
    ]
    assert np.all(np.diff(by_b) >= 0)
    assert (
        float(cost.terms(k=3, n_decode=16, ctx_decode=8000.0).host_draft) == 3.0
    )  # per draft forward


def test_draft_model_on_its_own_tensor_parallelism() -> None:
    """A draft model at TP 1 beside a TP-2 target reads all its weights on one GPU and needs no
    all-reduce; at the target's TP it reads half and all-reduces."""
    dep = H100_8B.model_copy(update={"tp": 2, "drafter": DraftModelDrafter(model="llama-3.2-1b")})
    own = build_cost_model(resolve_deployment(dep.model_copy(update={"draft_tp": 1})))
    same = build_cost_model(resolve_deployment(dep))
    a, b = (
        own.terms(k=3, n_decode=4, ctx_decode=2000.0),
        same.terms(k=3, n_decode=4, ctx_decode=2000.0),
    )
    assert float(a.draft_allreduce) == 0.0 < float(b.draft_allreduce)
    assert float(a.draft_gemm) > 1.8 * float(b.draft_gemm)
    assert float(a.target_gemm) == pytest.approx(float(b.target_gemm))


def test_draft_tp_follows_vllms_rule() -> None:
    from alphagate.core.errors import SpecError

    with pytest.raises(SpecError, match="draft_tensor_parallel_size"):
        resolve_deployment(H100_8B.model_copy(update={"tp": 4, "draft_tp": 2}))


def test_ngram_costs_host_time_per_step() -> None:
    cost = _cost(drafter=NgramDrafter(cpu_cost_ms=0.05))
    t = cost.terms(k=5, n_decode=32, ctx_decode=32 * 500.0)
    assert cost.draft is None and float(t.draft_gemm) == 0.0
    assert float(t.host_draft) == 1.0  # once per step, whatever K
    assert float(t.host_draft_seq) == 0.0  # no forwards, no attention metadata per sequence
    assert float(t.host_spec_seq) == 32.0  # but each sequence's drafts are verified


def test_host_cost_per_sequence_per_draft_forward(cost: StepCostModel) -> None:
    """A model drafter rebuilds its attention metadata over the decoding sequences for every
    draft forward: the term counts K × sequences, none without speculation; its coefficient
    (zero by default) adds exactly its value per unit, and to the drafting part of a step."""
    ks = np.asarray([0.0, 1.0, 3.0, 3.0])
    b = np.asarray([8.0, 8.0, 8.0, 2.0])
    t = cost.terms(k=ks, n_decode=b, ctx_decode=b * 500.0)
    assert t.host_draft_seq.tolist() == [0.0, 8.0, 24.0, 6.0]
    assert cost.coefficients.draft_seq_overhead_s == 0.0
    more = cost.with_coefficients(replace(cost.coefficients, draft_seq_overhead_s=2e-6))
    gap = more.step_time(k=ks, n_decode=b, ctx_decode=b * 500.0) - cost.step_time(
        k=ks, n_decode=b, ctx_decode=b * 500.0
    )
    assert gap == pytest.approx([0.0, 16e-6, 48e-6, 12e-6], abs=1e-12)
    _, draft = cost.step_parts(8.0, 3, 500.0)
    _, draft_more = more.step_parts(8.0, 3, 500.0)
    assert float(draft_more - draft) == pytest.approx(48e-6)


def test_host_cost_per_sequence_per_speculative_step(cost: StepCostModel) -> None:
    """The verify's and the rejection sampler's work per sequence: one per decoding sequence of
    a speculative step whatever K is, none without speculation; part of the verify pass."""
    ks = np.asarray([0.0, 1.0, 3.0, 3.0])
    b = np.asarray([8.0, 8.0, 8.0, 2.0])
    t = cost.terms(k=ks, n_decode=b, ctx_decode=b * 500.0)
    assert t.host_spec_seq.tolist() == [0.0, 8.0, 8.0, 2.0]
    more = cost.with_coefficients(replace(cost.coefficients, spec_seq_overhead_s=5e-6))
    verify, _ = cost.step_parts(8.0, 3, 500.0)
    verify_more, _ = more.step_parts(8.0, 3, 500.0)
    assert float(verify_more - verify) == pytest.approx(40e-6)


def test_host_terms(cost: StepCostModel) -> None:
    t = cost.terms(
        k=3,
        n_decode=10,
        ctx_decode=1000.0,
        prefill_tokens=200.0,
        prefill_ctx=0.0,
        prefill_pairs=200 * 100.0,
        n_running=12,
    )
    assert float(t.host_step) == 1.0
    assert float(t.host_seq) == 12.0  # running sequences, prefilling ones included
    assert float(t.host_token) == 10 * 4 + 200  # scheduled tokens
    assert float(cost.terms(k=0, n_decode=0, ctx_decode=0.0).host_token) == 0.0


def test_host_cost_per_speculative_step_is_one_per_step_whatever_k(cost: StepCostModel) -> None:
    """The per-speculative-step host term counts steps, not drafts: 1 at every K ≥ 1, 0 without
    speculation and in a step that schedules nothing; its coefficient adds exactly its value."""
    ks = np.asarray([0.0, 1.0, 2.0, 3.0, 5.0])
    t = cost.terms(k=ks, n_decode=np.full(5, 8.0), ctx_decode=np.full(5, 8000.0))
    assert t.host_spec.tolist() == [0.0, 1.0, 1.0, 1.0, 1.0]
    assert t.host_draft.tolist() == [0.0, 1.0, 2.0, 3.0, 5.0]  # per draft forward, by contrast
    assert float(cost.terms(k=3, n_decode=0, ctx_decode=0.0).host_spec) == 0.0
    more = cost.with_coefficients(replace(cost.coefficients, spec_step_overhead_s=1e-3))
    gap = more.step_time(
        k=ks, n_decode=np.full(5, 8.0), ctx_decode=np.full(5, 8000.0)
    ) - cost.step_time(k=ks, n_decode=np.full(5, 8.0), ctx_decode=np.full(5, 8000.0))
    assert gap == pytest.approx([0.0, 1e-3, 1e-3, 1e-3, 1e-3])


def test_an_arm_without_async_scheduling_pays_the_host_time_it_hides() -> None:
    """vLLM keeps async scheduling on by default and turns it off for n-gram drafting (on the
    CPU): then only the speculative arm pays ``host_sync`` (1 per step, any K); with it off for
    the server (``async_scheduling=False``) both arms pay it; EAGLE-3 pays it in neither."""
    ks = np.asarray([0.0, 1.0, 3.0])
    b, ctx = np.full(3, 8.0), np.full(3, 8000.0)
    eagle = _cost()
    ngram = _cost(drafter=NgramDrafter())
    sync_all = _cost(async_scheduling=False)
    assert eagle.terms(k=ks, n_decode=b, ctx_decode=ctx).host_sync.tolist() == [0.0, 0.0, 0.0]
    assert ngram.terms(k=ks, n_decode=b, ctx_decode=ctx).host_sync.tolist() == [0.0, 1.0, 1.0]
    assert sync_all.terms(k=ks, n_decode=b, ctx_decode=ctx).host_sync.tolist() == [1.0, 1.0, 1.0]
    gap = ngram.step_time(k=ks, n_decode=b, ctx_decode=ctx) - _cost(
        drafter=NgramDrafter(), sync_step_overhead_ms=0.0
    ).step_time(k=ks, n_decode=b, ctx_decode=ctx)
    assert gap == pytest.approx([0.0, 1e-3, 1e-3])  # the 1 ms default, speculative steps only
    # and so it lowers n-gram's predicted speedup
    wl = WorkloadConfig()
    cls = (TrafficClass(name="a", share=1.0, alpha=0.6),)
    kept = _cost(drafter=NgramDrafter(), async_scheduling=None, sync_step_overhead_ms=0.0)
    assert model_speedup(ngram, cls, 3, 8.0, wl) < model_speedup(kept, cls, 3, 8.0, wl)


def test_tensor_parallel_allreduce() -> None:
    one, two = _cost(), _cost(tp=2)
    assert float(one.terms(k=0, n_decode=8, ctx_decode=800.0).target_allreduce) == 0.0
    ar = [
        float(two.terms(k=0, n_decode=b, ctx_decode=b * 800.0).target_allreduce)
        for b in (1, 8, 64, 256)
    ]
    assert ar[0] > 0 and np.all(np.diff(ar) > 0)
    assert float(two.terms(k=0, n_decode=0, ctx_decode=0.0).target_allreduce) == 0.0


def test_cuda_graph_capture_sizes_padding_and_eager() -> None:
    """vLLM's default capture sizes; a step is padded up to the next one; past the largest it
    runs eager, where the host issuing one kernel at a time sets a floor."""
    sizes = capture_sizes(512)
    assert list(sizes[:6]) == [1, 2, 4, 8, 16, 24]
    assert sizes[-1] == 512 and 272 in sizes and 264 not in sizes
    cost = _cost()
    assert cost.target is not None
    # 9 tokens run as 16: the GEMMs and the kernel gaps of a captured graph (the LM head only
    # over the 9 sampled rows)
    t9, t16 = (
        cost.terms(k=0, n_decode=9, ctx_decode=900.0),
        cost.terms(k=0, n_decode=16, ctx_decode=1600.0),
    )
    head = cost.target.head
    head_s = lambda m: float(head.seconds(m, 2.0, cost.target.hw))  # noqa: E731
    assert float(t9.target_gemm) - head_s(9) == pytest.approx(float(t16.target_gemm) - head_s(16))
    assert float(cost.terms(k=0, n_decode=9, ctx_decode=900.0).target_kernels) == pytest.approx(
        cost.target.kernels * cost.target.hw.kernel_gap_s
    )
    assert cost.target.kernels == 32 * KERNELS_PER_LAYER + KERNELS_PER_FORWARD
    eager = _cost(cudagraph_max_tokens=0)
    assert eager.target is not None
    small = eager.terms(k=0, n_decode=1, ctx_decode=100.0)
    gpu = sum(
        float(getattr(small, t)) for t in ("target_gemm", "target_attention", "target_sampler")
    )
    floor = eager.target.kernels * eager.target.hw.kernel_launch_s
    assert float(small.target_kernels) == pytest.approx(
        max(eager.target.kernels * eager.target.hw.kernel_gap_s, floor - gpu)
    )
    assert float(cost.terms(k=0, n_decode=0, ctx_decode=0.0).target_kernels) == 0.0


def _compositions(n: int, seed: int = 0) -> dict[str, np.ndarray]:
    """``n`` random step compositions: plain decode and K up to 5, some with a prefill chunk,
    some past the largest CUDA graph."""
    rng = np.random.default_rng(seed)
    return {
        "k": rng.integers(0, 6, n).astype(np.float64),
        "n_decode": rng.integers(0, 300, n).astype(np.float64),
        "ctx_decode": rng.uniform(0, 5e5, n),
        "prefill_tokens": rng.integers(0, 3000, n).astype(np.float64) * (rng.random(n) < 0.3),
        "prefill_ctx": rng.uniform(0, 1e4, n),
        "prefill_pairs": rng.uniform(0, 1e6, n),
        "n_running": rng.integers(1, 300, n).astype(np.float64),
    }


def _one_by_one(cost: StepCostModel, steps: dict[str, np.ndarray]) -> list[float]:
    n = steps["k"].size
    return [
        cost.step_seconds(
            k=float(steps["k"][i]),
            n_decode=float(steps["n_decode"][i]),
            ctx_decode=float(steps["ctx_decode"][i]),
            prefill_tokens=float(steps["prefill_tokens"][i]),
            prefill_ctx=float(steps["prefill_ctx"][i]),
            prefill_pairs=float(steps["prefill_pairs"][i]),
            n_running=float(steps["n_running"][i]),
        )
        for i in range(n)
    ]


def test_one_step_as_floats_equals_many_steps_as_arrays(cost: StepCostModel) -> None:
    steps = _compositions(200)
    many = cost.step_time(**steps)
    np.testing.assert_allclose(many, _one_by_one(cost, steps), rtol=1e-12)


@pytest.mark.parametrize(
    "update",
    [
        {},  # EAGLE-3 on an H100 (FA3 packs the GQA group)
        {"gpu": "a100-80gb", "drafter": EagleDrafter()},  # FA2: query rows padded apart
        {"tp": 2, "drafter": NgramDrafter()},  # all-reduce; n-gram: host per step, sync arm
        {"drafter": DraftModelDrafter(model="llama-3.2-1b"), "cudagraph_max_tokens": 0},
        {"weight_dtype": "fp8", "max_num_batched_tokens": 512, "spec_step_overhead_ms": 0.3},
    ],
    ids=["eagle3-h100", "eagle-a100", "ngram-tp2", "draft-model-eager", "fp8-small-budget"],
)
def test_the_float_path_is_the_array_path_to_the_bit(update: dict[str, object]) -> None:
    """:meth:`StepCostModel.step_seconds` (the step engine's and the twin's path) repeats the
    array path in Python floats: every deployment kind gives the same bits."""
    cost = _cost(**update)
    steps = _compositions(300, seed=1)
    steps["n_decode"][:20] = 600.0  # past the largest CUDA graph and the token budget
    assert np.array_equal(cost.step_time(**steps), np.asarray(_one_by_one(cost, steps)))


def test_step_terms_are_the_forward_and_host_terms_by_name() -> None:
    """:class:`StepTerms` is the target's forward terms, the drafter's and the host's, in
    that order (``StepCostModel.terms`` assembles it by position)."""
    expected = (
        *(f"target_{f}" for f in ForwardTerms._fields),
        *(f"draft_{f}" for f in ForwardTerms._fields),
        *(f"host_{f}" for f in HostTerms._fields),
    )
    assert StepTerms._fields == expected == TERMS


def test_coefficients_scale_their_terms_and_match_the_profile_fields(cost: StepCostModel) -> None:
    assert set(COEFFICIENTS) == set(COEFFICIENT_FIELDS)
    assert sorted(t for ts in COEFFICIENTS.values() for t in ts) == sorted(TERMS)
    step = {
        "k": 3, "n_decode": 16, "ctx_decode": 8000.0, "prefill_tokens": 100.0,
        "prefill_ctx": 0.0, "prefill_pairs": 5000.0, "n_running": 17,
    }  # fmt: skip
    t = cost.terms(**step)
    w = cost.coefficients.term_weights()
    assert float(cost.step_time(**step)) == pytest.approx(
        sum(w[k] * float(v) for k, v in t._asdict().items())
    )
    doubled = _cost(target_time_scale=2.0)
    t2 = doubled.terms(k=3, n_decode=16, ctx_decode=8000.0)
    base = cost.terms(k=3, n_decode=16, ctx_decode=8000.0)
    extra = float(doubled.step_time(k=3, n_decode=16, ctx_decode=8000.0)) - float(
        cost.step_time(k=3, n_decode=16, ctx_decode=8000.0)
    )
    assert extra == pytest.approx(
        sum(float(getattr(base, k)) for k in COEFFICIENTS["target_time_scale"])
    )
    assert float(t2.target_gemm) == float(base.target_gemm)  # terms are unscaled


def test_explanation_adds_up_to_v_and_c(cost: StepCostModel) -> None:
    batches, ks = powers_of_two(64), [1, 2, 3, 4, 5]
    assert batches == [1, 2, 4, 8, 16, 32, 64]
    e = explain_cost(cost, batches, ks, 700.0)
    for i, b in enumerate(batches):
        for j, k in enumerate(ks):
            assert e.verify_cost[i][j] == pytest.approx(float(cost.verify_cost_ratio(b, k, 700.0)))
            assert e.draft_cost[i][j] == pytest.approx(float(cost.draft_cost_ratio(b, 700.0, k)))
    host_step = next(t for t in e.terms if t.term == "host_step")
    assert all(x == 0.0 for row in host_step.by_batch for x in row)  # same in verify and decode


def test_batch_1_decode_rate_stays_at_the_measured_one(cost: StepCostModel) -> None:
    """Llama-3.1-8B on one H100: 158.34 tok/s measured at batch 1 (SGLang docs, baseline)."""
    assert 1.0 / float(cost.decode_time(1, 700.0)) == pytest.approx(158.34, rel=0.01)


@pytest.mark.parametrize("gpu", ["h100", "a100-80gb"])
@pytest.mark.parametrize("k", [2, 3])
def test_speedup_declines_gradually_from_small_batch(gpu: str, k: int) -> None:
    """Llama-3.1-8B with an EAGLE-3 head: the speedup falls from batch 1 on, not flat up to the
    ridge and then off a cliff (prefill contention, the sampler, tile waves, the drafter)."""
    wl = WorkloadConfig()
    cost = build_cost_model(resolve_deployment(H100_8B.model_copy(update={"gpu": gpu}), wl, 64))
    cls = (TrafficClass(name="a", share=1.0, alpha_by_pos=(0.8, 0.7, 0.6)),)
    s = np.asarray([model_speedup(cost, cls, k, float(b), wl) for b in (1, 2, 4, 8, 16, 32)])
    assert np.all(np.diff(s) < 0)
    assert s[3] < 0.97 * s[0]  # already ≥ 3% lower at batch 8
    steps = -np.diff(s) / s[:-1]
    assert steps.max() < 0.25  # no cliff between neighbouring batch sizes up to 32
