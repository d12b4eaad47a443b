"""Build a staged rollout plan: every number computed for the user's model, GPU, traffic and load.

The plan is a typed record (:class:`Plan`); :mod:`alphagate.report.plan` renders it to markdown.
Numbers come from the simulator (paired runs) and from the step-time model in closed form; the
stages carry the exact commands and exit criteria derived from them.
"""

from __future__ import annotations

import json
import math
from typing import Literal

import numpy as np
from pydantic import Field

from alphagate import theory
from alphagate.config import TrafficClass
from alphagate.plan.engine_config import (
    DEFAULT_DRAFTS,
    compress_schedule,
    sglang_flags,
    validate_schedule,
    vllm_speculative_config,
)
from alphagate.plan.priors import prior_for
from alphagate.quantities import Frozen
from alphagate.sim.cost import StepCostModel, build_cost_model
from alphagate.sim.engine import Scenario
from alphagate.sim.run import run_paired
from alphagate.sim.sweep import (
    breakeven_alpha_model,
    crossover_concurrency_model,
    default_num_requests,
    model_speedup,
    unconditional_table,
)
from alphagate.sim.workload import (
    ClosedLoop,
    LengthDist,
    LognormalLength,
    RequestSet,
    SimClass,
    WorkloadConfig,
    length_mean,
    sample_requests,
)
from alphagate.specs import (
    DeploymentConfig,
    DrafterConfig,
    DraftModelDrafter,
    Eagle3Drafter,
    EagleDrafter,
    MtpDrafter,
    NgramDrafter,
    ResolvedDeployment,
    resolve_deployment,
)

__all__ = ["Plan", "PlanRequest", "build_plan"]

Verdict = Literal["go", "go for some classes only", "measure first", "no-go"]
GATE_MARGIN = 0.05  # safety margin added to the computed break-even α
LESSON_GATE = 0.55  # the lesson's fixed gate, stated in ρ by vLLM users
MIN_GAIN = 1.02  # a blended gain below 2% is within the model's error: not worth a rollout
DYNAMIC_K_SINCE = (
    0,
    32,
)  # vLLM build where num_speculative_tokens_per_batch_size is seen (engines.md §1.5)


class PlanRequest(Frozen):
    model: str = "llama-3.3-70b"
    gpu: str = "h100"
    tp: int | None = None
    dtype: Literal["bf16", "fp8", "int4"] = "fp8"
    kv_dtype: Literal["bf16", "fp8"] = "bf16"
    method: Literal["eagle3", "eagle", "draft_model", "ngram", "mtp"] = "eagle3"
    draft: str | None = None
    classes: tuple[TrafficClass, ...]
    measured_source: dict[str, str] = Field(default_factory=dict)
    concurrency: int = 64
    peak_concurrency: int | None = None
    slo_p99_itl_ms: float | None = None
    engine: Literal["vllm", "sglang"] = "vllm"
    engine_version: str | None = None
    k: int | None = None
    k_max: int = 8
    prompt_len: LengthDist = LognormalLength(mean=512, sigma=0.6)
    output_len: LengthDist = LognormalLength(mean=256, sigma=0.6)
    max_num_seqs: int = 256
    seed: int = 0
    url: str = "http://127.0.0.1:8000"
    served_model: str | None = None


class ClassRow(Frozen):
    name: str
    share: float
    alpha: float
    alpha_low: float
    alpha_high: float
    measured: bool
    source: str
    alpha_breakeven_target: float | None
    alpha_breakeven_peak: float | None
    speedup_target: float
    speedup_peak: float
    speedup_target_low: float
    crossover_concurrency: float | None
    pays_at_target: bool
    pays_at_peak: bool


class LoadRow(Frozen):
    concurrency: int
    k: int
    throughput_speedup: float
    itl_p50_off_ms: float
    itl_p99_off_ms: float
    itl_p50_on_ms: float
    itl_p99_on_ms: float
    tpot_speedup: float | None
    alpha_breakeven: float | None
    recommended_k: int
    recommended_k_speedup: float


class Memory(Frozen):
    draft_name: str
    draft_params: int
    draft_weight_bytes: float
    draft_kv_bytes_per_token: float
    target_kv_bytes_per_token: float
    kv_tokens_without_draft: int
    kv_tokens_with_draft: int
    kv_tokens_lost: int
    sequences_lost: float
    mean_sequence_tokens: float


class Stage(Frozen):
    number: int
    title: str
    goal: str
    commands: list[str]
    exit_criteria: list[str]
    notes: list[str] = Field(default_factory=list)


class Gate(Frozen):
    alpha_min: float
    draft_acceptance_rate_min: float
    mean_acceptance_length_min: float
    lesson_alpha: float
    lesson_rule_draft_acceptance_rate: float
    quantity_gated: str
    max_p99_itl_per_token_regression: float
    min_tpot_speedup: float


class Playbook(Frozen):
    cause: str
    number: str
    mitigation: str


class Plan(Frozen):
    plan_schema: str = "alphagate.plan/v1"
    verdict: Verdict
    reason: str
    deployment: str
    tp: int
    method: str
    draft: str | None
    engine: str
    engine_version: str | None
    k: int
    concurrency: int
    peak_concurrency: int
    slo_p99_itl_ms: float | None
    classes: list[ClassRow]
    rows: list[LoadRow]
    blend_speedup_target: float
    blend_speedup_peak: float
    blend_speedup_target_closed_form: float
    naive_mean_alpha: float
    naive_alpha_speedup_target: float
    blend_crossover_concurrency: float | None
    crossover_search_max: int
    memory: Memory
    speculative_config: dict[str, object]
    speculative_config_static: dict[str, object]
    dynamic_k_supported: bool
    batch_schedule: list[list[int]]
    schedule_confidence: str
    schedule_agreement: float
    disable_above_concurrency: int | None
    sglang_flags: list[str]
    gate: Gate
    stages: list[Stage]
    risks: list[str]
    playbook: list[Playbook]
    uses_priors: bool


def _drafter(req: PlanRequest) -> DrafterConfig:
    if req.method == "eagle3":
        return Eagle3Drafter()
    if req.method == "eagle":
        return EagleDrafter()
    if req.method == "mtp":
        return MtpDrafter()
    if req.method == "ngram":
        return NgramDrafter()
    # a classic draft model: a preset or a local config.json; a hub id is modelled with Llama-3.2-1B's shape
    from pathlib import Path

    from alphagate.specs import MODEL_PRESETS

    d = req.draft
    local = d is not None and (d.lower() in MODEL_PRESETS or Path(d).exists())
    return DraftModelDrafter(model=d if local and d is not None else "llama-3.2-1b")


def _version_tuple(v: str | None) -> tuple[int, ...] | None:
    if v is None:
        return None
    try:
        return tuple(int(x) for x in v.split(".")[:2])
    except ValueError:
        return None


class _Ctx:
    """Everything the section builders share."""

    def __init__(self, req: PlanRequest) -> None:
        self.req = req
        self.peak = max(req.peak_concurrency or req.concurrency, req.concurrency)
        self.workload = WorkloadConfig(prompt_len=req.prompt_len, output_len=req.output_len)
        self.mean_seq = length_mean(req.prompt_len) + length_mean(req.output_len)
        dep = DeploymentConfig(
            model=req.model,
            gpu=req.gpu,
            tp=req.tp,
            weight_dtype=req.dtype,
            kv_dtype=req.kv_dtype,
            max_num_seqs=req.max_num_seqs,
            drafter=_drafter(req),
        )
        self.resolved: ResolvedDeployment = resolve_deployment(
            dep, need_kv_tokens=int(min(self.peak, req.max_num_seqs) * self.mean_seq)
        )
        self.cost: StepCostModel = build_cost_model(self.resolved)
        self.b_max = max(
            1, min(req.max_num_seqs, int(self.resolved.kv_capacity_tokens // self.mean_seq))
        )
        self._requests: dict[int, RequestSet] = {}

    def requests(self, users: int) -> RequestSet:
        if users not in self._requests:
            wl = self.workload.model_copy(update={"num_requests": default_num_requests(users)})
            self._requests[users] = sample_requests(
                wl, ClosedLoop(users=users), np.random.default_rng([self.req.seed, users])
            )
        return self._requests[users]

    def paired(self, users: int, classes: tuple[SimClass, ...], k: int):  # type: ignore[no-untyped-def]
        base = self.requests(users)
        shares = np.asarray([c.share for c in classes])
        cls = np.random.default_rng([self.req.seed, users, 7]).choice(
            shares.size, size=base.n, p=shares / shares.sum()
        )
        reqs = RequestSet(base.prompt_len, base.output_len, cls.astype(np.int64), base.arrival_s)
        sc = Scenario(
            k, ClosedLoop(users=users), reqs, unconditional_table(classes, k), self.req.max_num_seqs
        )
        return run_paired(self.cost, sc, np.random.default_rng([self.req.seed, users, k]))


def _sim_classes(classes: list[ClassRow], low: bool = False) -> tuple[SimClass, ...]:
    return tuple(
        SimClass(name=c.name, share=c.share, alpha=c.alpha_low if low else c.alpha) for c in classes
    )


def _class_rows(ctx: _Ctx, k: int) -> list[ClassRow]:
    req = ctx.req
    rows = []
    for c in req.classes:
        if c.alpha is not None:
            a = lo = hi = c.alpha
            measured = True
            source = req.measured_source.get(c.name, "given on the command line")
        else:
            p = prior_for(req.method, c.name)
            a, lo, hi, measured = p.mid, p.low, p.high, False
            source = f"prior {p.low:.2f}–{p.high:.2f} ({p.note}); Stage 2 must replace it with a measurement"
        one = (SimClass(name=c.name, share=1.0, alpha=a),)
        s_t = (
            model_speedup(ctx.cost, one, k, float(min(req.concurrency, ctx.b_max)), ctx.workload)
            if k
            else 1.0
        )
        s_p = (
            model_speedup(ctx.cost, one, k, float(min(ctx.peak, ctx.b_max)), ctx.workload)
            if k
            else 1.0
        )
        s_low = (
            model_speedup(
                ctx.cost,
                (SimClass(name=c.name, share=1.0, alpha=lo),),
                k,
                float(min(req.concurrency, ctx.b_max)),
                ctx.workload,
            )
            if k
            else 1.0
        )
        rows.append(
            ClassRow(
                name=c.name,
                share=c.share,
                alpha=a,
                alpha_low=lo,
                alpha_high=hi,
                measured=measured,
                source=source,
                alpha_breakeven_target=breakeven_alpha_model(
                    ctx.cost, k, float(req.concurrency), ctx.workload
                )
                if k
                else None,
                alpha_breakeven_peak=breakeven_alpha_model(
                    ctx.cost, k, float(ctx.peak), ctx.workload
                )
                if k
                else None,
                speedup_target=s_t,
                speedup_peak=s_p,
                speedup_target_low=s_low,
                crossover_concurrency=crossover_concurrency_model(
                    ctx.cost, one, k, ctx.workload, b_max=ctx.b_max
                )
                if k
                else 1.0,
                pays_at_target=s_t > 1.0,
                pays_at_peak=s_p > 1.0,
            )
        )
    return rows


def _concurrency_levels(target: int, peak: int) -> list[int]:
    levels = {1, target, peak}
    levels.update(c for c in (4, 16, 64, 128, 256) if c < peak)
    return sorted(levels)


def _best_k_sim(
    ctx: _Ctx, users: int, classes: tuple[SimClass, ...]
) -> tuple[int, float, dict[int, float]]:
    speeds = {
        k: ctx.paired(users, classes, k).speedup.throughput for k in range(1, ctx.req.k_max + 1)
    }
    k_best = max(speeds, key=lambda k: speeds[k])
    return (k_best, speeds[k_best], speeds) if speeds[k_best] > 1.0 else (0, 1.0, speeds)


def _schedule(ctx: _Ctx, classes: tuple[SimClass, ...], k_cap: int) -> list[int]:
    """Optimal K per batch size from the step-time model, non-increasing in the batch size."""
    ks: list[int] = []
    for b in range(1, ctx.req.max_num_seqs + 1):
        speeds = [
            model_speedup(ctx.cost, classes, k, float(b), ctx.workload) for k in range(1, k_cap + 1)
        ]
        best = int(np.argmax(speeds))
        ks.append(best + 1 if speeds[best] > 1.0 else 0)
    return [int(x) for x in np.minimum.accumulate(ks)]


def build_plan(req: PlanRequest) -> Plan:
    """Compute the plan for ``req`` (raises SpecError / ValueError on impossible input)."""
    ctx = _Ctx(req)
    levels = _concurrency_levels(req.concurrency, ctx.peak)

    # 1. K: given, or the simulator's best at the target concurrency for the prior/measured blend
    provisional = _class_rows(ctx, req.k or 3)
    blend_mid = _sim_classes(provisional)
    best_at = {c: _best_k_sim(ctx, c, blend_mid) for c in levels}
    k_cfg = req.k if req.k is not None else (best_at[req.concurrency][0] or best_at[1][0] or 1)
    classes = _class_rows(ctx, k_cfg)
    blend_mid = _sim_classes(classes)
    blend_low = _sim_classes(classes, low=True)

    # 2. the predicted table
    rows: list[LoadRow] = []
    for c in levels:
        p = ctx.paired(c, blend_mid, k_cfg)
        b, s = p.baseline.itl_per_token_ms, p.spec.itl_per_token_ms
        rec_k, rec_s, _ = best_at[c]
        rows.append(
            LoadRow(
                concurrency=c,
                k=k_cfg,
                throughput_speedup=p.speedup.throughput,
                itl_p50_off_ms=b.p50 or 0.0,
                itl_p99_off_ms=b.p99 or 0.0,
                itl_p50_on_ms=s.p50 or 0.0,
                itl_p99_on_ms=s.p99 or 0.0,
                tpot_speedup=p.speedup.tpot_mean,
                alpha_breakeven=breakeven_alpha_model(
                    ctx.cost, k_cfg, float(min(c, ctx.b_max)), ctx.workload
                ),
                recommended_k=rec_k,
                recommended_k_speedup=rec_s,
            )
        )
    by_c = {r.concurrency: r for r in rows}
    blend_target = by_c[req.concurrency].throughput_speedup
    blend_peak = by_c[ctx.peak].throughput_speedup
    low_target = ctx.paired(req.concurrency, blend_low, k_cfg).speedup.throughput

    # 3. the blend in closed form (time per token: harmonic in E) vs the naive averaged α
    b_t = float(min(req.concurrency, ctx.b_max))
    blend_closed = model_speedup(ctx.cost, blend_mid, k_cfg, b_t, ctx.workload)
    naive_alpha = float(sum(c.share * c.alpha for c in classes))
    naive_speedup = model_speedup(
        ctx.cost, (SimClass(name="naive", share=1.0, alpha=naive_alpha),), k_cfg, b_t, ctx.workload
    )
    blend_cross = crossover_concurrency_model(
        ctx.cost, blend_mid, k_cfg, ctx.workload, b_max=ctx.b_max
    )

    # 4. engine configuration
    draft = req.draft or DEFAULT_DRAFTS.get((req.method, req.model.lower()))
    schedule_ks = _schedule(ctx, blend_mid, k_cfg)
    schedule = compress_schedule(schedule_ks)
    k_top = max(1, max(schedule_ks))
    validate_schedule(schedule, k_top)
    check_points = [b for b in (1, 4, 16, 64, 128, 256) if b <= req.max_num_seqs]
    agree = 0
    for b in check_points:
        k_s = schedule_ks[b - 1]
        sim_best, sim_speed, speeds = (
            _best_k_sim(ctx, b, blend_mid) if b not in best_at else best_at[b]
        )
        got = speeds.get(k_s, 1.0) if k_s else 1.0
        agree += int(sim_best == k_s or got >= 0.98 * sim_speed)
    agreement = agree / len(check_points)
    confidence = "high" if agreement >= 0.8 else ("medium" if agreement >= 0.5 else "low")
    version = _version_tuple(req.engine_version)
    dynamic = req.engine == "vllm" and (version is None or version >= DYNAMIC_K_SINCE)
    disable_above = None if blend_cross is None else max(1, math.floor(blend_cross))
    spec_cfg = vllm_speculative_config(
        req.method, draft, k_top, ctx.resolved.tp, schedule if dynamic else None
    )
    static_cfg = vllm_speculative_config(req.method, draft, k_cfg, ctx.resolved.tp)

    # 5. gate, memory, verdict, stages
    be_target = by_c[req.concurrency].alpha_breakeven
    alpha_gate = min(1.0, (be_target if be_target is not None else 1.0) + GATE_MARGIN)
    gate = Gate(
        alpha_min=alpha_gate,
        draft_acceptance_rate_min=float(theory.draft_acceptance_rate(alpha_gate, k_cfg)),
        mean_acceptance_length_min=float(theory.mean_acceptance_length(alpha_gate, k_cfg)),
        lesson_alpha=LESSON_GATE,
        lesson_rule_draft_acceptance_rate=LESSON_GATE,
        quantity_gated="draft_acceptance_rate (ρ = accepted ÷ drafted, what vLLM reports), with the α it implies",
        max_p99_itl_per_token_regression=0.0,
        min_tpot_speedup=1.05,
    )
    memory = _memory(ctx)
    verdict, reason = _verdict(ctx, classes, blend_target, blend_peak, low_target, k_cfg, be_target)
    rec_k, rec_s, speeds_t = best_at[req.concurrency]
    if verdict == "no-go" and rec_k == 0:
        k_near = max(speeds_t, key=lambda k: speeds_t[k])
        reason = (
            f"no K in 1..{req.k_max} pays at concurrency {req.concurrency} (best: K={k_near} at {speeds_t[k_near]:.3f}×); "
            + reason
        )
    plan = Plan(
        verdict=verdict,
        reason=reason,
        deployment=ctx.resolved.describe(),
        tp=ctx.resolved.tp,
        method=req.method,
        draft=draft,
        engine=req.engine,
        engine_version=req.engine_version,
        k=k_cfg,
        concurrency=req.concurrency,
        peak_concurrency=ctx.peak,
        slo_p99_itl_ms=req.slo_p99_itl_ms,
        classes=classes,
        rows=rows,
        blend_speedup_target=blend_target,
        blend_speedup_peak=blend_peak,
        blend_speedup_target_closed_form=blend_closed,
        naive_mean_alpha=naive_alpha,
        naive_alpha_speedup_target=naive_speedup,
        blend_crossover_concurrency=blend_cross,
        crossover_search_max=ctx.b_max,
        memory=memory,
        speculative_config=spec_cfg,
        speculative_config_static=static_cfg,
        dynamic_k_supported=dynamic,
        batch_schedule=schedule,
        schedule_confidence=confidence,
        schedule_agreement=agreement,
        disable_above_concurrency=disable_above,
        sglang_flags=sglang_flags(req.method, draft, k_cfg),
        gate=gate,
        stages=[],
        risks=[],
        playbook=[],
        uses_priors=any(not c.measured for c in classes),
    )
    return plan.model_copy(
        update={
            "stages": _stages(ctx, plan),
            "risks": _risks(ctx, plan),
            "playbook": _playbook(ctx, plan),
        }
    )


def _memory(ctx: _Ctx) -> Memory:
    r = ctx.resolved
    d = r.draft_footprint
    usable = (
        r.gpu.memory_bytes * r.config.gpu_memory_utilization * r.tp
        - 0.04 * r.gpu.memory_bytes * r.tp
    )
    t_kv = r.target_footprint.kv_bytes_per_token
    without = int((usable - r.target_footprint.weight_bytes) // t_kv)
    with_draft = r.kv_capacity_tokens
    lost = max(0, without - with_draft)
    return Memory(
        draft_name=d.name if d else "n-gram lookup (no weights)",
        draft_params=d.params if d else 0,
        draft_weight_bytes=d.weight_bytes if d else 0.0,
        draft_kv_bytes_per_token=d.kv_bytes_per_token if d else 0.0,
        target_kv_bytes_per_token=t_kv,
        kv_tokens_without_draft=without,
        kv_tokens_with_draft=with_draft,
        kv_tokens_lost=lost,
        sequences_lost=lost / ctx.mean_seq,
        mean_sequence_tokens=ctx.mean_seq,
    )


def _verdict(
    ctx: _Ctx,
    classes: list[ClassRow],
    blend_t: float,
    blend_p: float,
    low_t: float,
    k: int,
    be: float | None,
) -> tuple[Verdict, str]:
    req = ctx.req
    be_txt = "no α pays" if be is None else f"the break-even α is {be:.2f}"
    losers = [c for c in classes if not c.pays_at_target]
    peak_losers = [c for c in classes if not c.pays_at_peak]
    if blend_t <= MIN_GAIN or not any(c.pays_at_target for c in classes):
        worst = min(classes, key=lambda c: c.speedup_target)
        return "no-go", (
            f"at concurrency {req.concurrency} (K={k}) {be_txt}; the blend runs at {blend_t:.2f}× — "
            f"{worst.name} traffic at α {worst.alpha:.2f} gives {worst.speedup_target:.2f}×"
        )
    if any(not c.measured for c in classes) and low_t <= MIN_GAIN:
        return "measure first", (
            f"with the prior α the blend gains {blend_t:.2f}× at concurrency {req.concurrency}, but at the low end of "
            f"the priors it is {low_t:.2f}× ({be_txt}): measure α before turning it on"
        )
    if losers or peak_losers:
        bad = losers or peak_losers
        where = req.concurrency if losers else ctx.peak
        names = ", ".join(f"{c.name} at α {c.alpha:.2f}" for c in bad)
        be_w = bad[0].alpha_breakeven_target if losers else bad[0].alpha_breakeven_peak
        return "go for some classes only", (
            f"the blend gains {blend_t:.2f}× at concurrency {req.concurrency}, but at concurrency {where} the "
            f"break-even α is {be_w if be_w is None else round(be_w, 2)}: {names} is a net loss — route it without speculation"
        )
    if blend_p <= 1.0:
        return "go", (
            f"{blend_t:.2f}× at concurrency {req.concurrency}; at the peak {ctx.peak} it falls to {blend_p:.2f}×, "
            "so use the batch-size schedule (K = 0 at high batch)"
        )
    return (
        "go",
        f"{blend_t:.2f}× at concurrency {req.concurrency} and {blend_p:.2f}× at the peak {ctx.peak} ({be_txt})",
    )


def _stages(ctx: _Ctx, p: Plan) -> list[Stage]:
    req = ctx.req
    served = req.served_model or req.model
    levels = ",".join(str(c) for c in sorted({1, req.concurrency, ctx.peak}))
    n = max(200, 8 * ctx.peak)
    out_mean = int(length_mean(req.output_len))
    in_mean = int(length_mean(req.prompt_len))
    bench = (
        f"alphagate bench --url {req.url} --endpoint chat --model {served} --dataset traffic.jsonl "
        f"--concurrency {levels} --num-prompts {n} --seed 0 --out results/baseline"
    )
    if req.engine == "vllm":
        native = [
            f"vllm bench serve --backend openai-chat --endpoint /v1/chat/completions --base-url {req.url} --model {served} "
            f"--dataset-name random --random-input-len {in_mean} --random-output-len {out_mean} --num-prompts {n} "
            f"--max-concurrency {c} --temperature 0 --percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,90,99 "
            f"--save-result --result-filename baseline-c{c}.json"
            for c in sorted({1, req.concurrency, ctx.peak})
        ]
        serve = f"vllm serve {served} --tensor-parallel-size {p.tp} --speculative-config '{json.dumps(p.speculative_config)}'"
        serve_static = f"vllm serve {served} --tensor-parallel-size {p.tp} --speculative-config '{json.dumps(p.speculative_config_static)}'"
    else:
        native = [
            f"python -m sglang.bench_serving --backend sglang-oai-chat --base-url {req.url} --dataset-name random "
            f"--random-input-len {in_mean} --random-output-len {out_mean} --num-prompts {n} --max-concurrency {c} "
            f"--output-file baseline-c{c}.jsonl"
            for c in sorted({1, req.concurrency, ctx.peak})
        ]
        serve = f"python -m sglang.launch_server --model-path {served} --tp {p.tp} " + " ".join(
            p.sglang_flags
        )
        serve_static = serve
    g = p.gate
    promql = [
        "ρ:  sum(rate(vllm:spec_decode_num_accepted_tokens_total[5m])) / sum(rate(vllm:spec_decode_num_draft_tokens_total[5m]))",
        "τ:  1 + sum(rate(vllm:spec_decode_num_accepted_tokens_total[5m])) / sum(rate(vllm:spec_decode_num_drafts_total[5m]))",
        "per position:  sum by (position) (rate(vllm:spec_decode_num_accepted_tokens_per_pos_total[5m])) "
        "/ scalar(sum(rate(vllm:spec_decode_num_drafts_total[5m])))",
    ]
    stage1_notes = []
    if p.dynamic_k_supported:
        stage1_notes.append(
            f"The batch-size schedule comes from the simulator's optimal K per batch size (confidence {p.schedule_confidence}: "
            f"the step-by-step simulator agrees with the model's choice at {p.schedule_agreement:.0%} of the checked batch sizes). "
            "It is derived from a roofline model, not swept on your GPU — Stage 2 confirms it."
        )
    else:
        stage1_notes.append(
            f"This engine build has no per-batch-size schedule: run K={p.k} and send traffic above concurrency "
            f"{p.disable_above_concurrency or 'the peak'} to a pool without speculation (`{serve_static}`)."
        )
    return [
        Stage(
            number=0,
            title="Baseline",
            goal="Measure the deployment without speculation at the concurrencies that matter.",
            commands=[bench, *native],
            exit_criteria=[
                f"{n} requests completed per level with < 1% errors",
                "baseline TTFT, TPOT, ITL per token (P50/P99) and output tokens/s recorded per level",
            ],
        ),
        Stage(
            number=1,
            title="Enable speculative decoding",
            goal=f"Turn on {p.method} with K={p.k} on a staging replica.",
            commands=[serve if p.dynamic_k_supported else serve_static],
            exit_criteria=[
                "the server starts and exports vllm:spec_decode_* counters"
                if req.engine == "vllm"
                else "the server starts and logs accept len"
            ],
            notes=stage1_notes,
        ),
        Stage(
            number=2,
            title="Measure α on real traffic",
            goal="Replace every prior with a measurement: replay production-like prompts and read the engine's counters.",
            commands=[bench.replace("--out results/baseline", "--out results/candidate"), *promql],
            exit_criteria=[
                "≥ 2,000 drafts per class; ρ per class known to ±0.02 (95% CI from the counts)",
                "implied conditional α per position computed (per-position rate ÷ previous position)",
                "re-run `alphagate plan --alpha-from results/candidate/summary.json` and keep the verdict",
            ],
            notes=[f"The gate uses {g.quantity_gated}."],
        ),
        Stage(
            number=3,
            title="Gate",
            goal="A CI/CD gate on the measured numbers, at the target concurrency.",
            commands=[
                f"alphagate gate --baseline results/baseline/summary.json --candidate results/candidate/summary.json "
                f"--min-draft-acceptance-rate {g.draft_acceptance_rate_min:.3f} --max-p99-itl-per-token-regression 0 "
                f"--min-tpot-speedup {g.min_tpot_speedup:.2f} --concurrency {req.concurrency}"
            ],
            exit_criteria=[
                f"ρ ≥ {g.draft_acceptance_rate_min:.3f} (α ≥ {g.alpha_min:.2f} = break-even {_be(p)} + {GATE_MARGIN} margin; "
                f"τ ≥ {g.mean_acceptance_length_min:.2f}) — the lesson's fixed rule would gate at {LESSON_GATE}",
                "P99 ITL per token not worse than the baseline at the same concurrency",
                f"TPOT at least {g.min_tpot_speedup:.2f}× better than the baseline",
            ],
        ),
        Stage(
            number=4,
            title="Canary",
            goal="Shift real traffic in steps and watch acceptance and the tail.",
            commands=["5% of traffic for 30 min → 25% for 2 h → 50% for 24 h", _alert_rules(p)],
            exit_criteria=[
                f"ρ stays ≥ {g.draft_acceptance_rate_min:.3f} over every 10-minute window",
                "P99 ITL per token within 10% of the baseline pool; no rise in error rate",
            ],
            notes=[
                f"Roll back when ρ < {g.draft_acceptance_rate_min:.3f} for 10 min, or P99 ITL per token exceeds the baseline by 10% for 10 min.",
            ],
        ),
        Stage(
            number=5,
            title="Full rollout and steady state",
            goal="All traffic; keep measuring, because α drifts with traffic.",
            commands=[
                "keep the Stage 4 alert rules; re-run Stage 2 weekly and after every model or head update"
            ],
            exit_criteria=["a week at 100% with no alert", "per-class ρ tracked on a dashboard"],
        ),
    ]


def _be(p: Plan) -> str:
    for r in p.rows:
        if r.concurrency == p.concurrency:
            return "none" if r.alpha_breakeven is None else f"{r.alpha_breakeven:.2f}"
    return "—"


def _alert_rules(p: Plan) -> str:
    g = p.gate
    return (
        "groups:\n"
        "- name: alphagate-speculative-decoding\n"
        "  rules:\n"
        "  - alert: SpecDecodeAcceptanceCollapse\n"
        "    expr: sum(rate(vllm:spec_decode_num_accepted_tokens_total[10m])) / "
        f"sum(rate(vllm:spec_decode_num_draft_tokens_total[10m])) < {g.draft_acceptance_rate_min:.3f}\n"
        "    for: 10m\n"
        "    labels: {severity: page}\n"
        f'    annotations: {{summary: "draft acceptance rate below the gate ({g.draft_acceptance_rate_min:.3f}); speculation may be a net loss"}}\n'
        "  - alert: SpecDecodeP99ItlRegression\n"
        "    expr: histogram_quantile(0.99, sum by (le) (rate(vllm:inter_token_latency_seconds_bucket[10m]))) > "
        "1.1 * histogram_quantile(0.99, sum by (le) (rate(vllm:inter_token_latency_seconds_bucket[10m] offset 1w)))\n"
        "    for: 10m\n"
        "    labels: {severity: ticket}\n"
        '    annotations: {summary: "P99 inter-token latency 10% above last week\'s"}'
    )


def _risks(ctx: _Ctx, p: Plan) -> list[str]:
    req = ctx.req
    out: list[str] = []
    rng = np.random.default_rng(0)
    from alphagate.sim.workload import sample_lengths

    short = float((sample_lengths(req.output_len, 20_000, rng) < 50).mean())
    out.append(
        f"Short outputs: {short:.0%} of requests produce fewer than 50 tokens; their prefill dominates and "
        "speculation barely moves their latency."
    )
    r1 = p.rows[0]
    out.append(
        f"Batch-1 offline work: at concurrency 1 speculation gives {r1.throughput_speedup:.2f}× latency, but if latency "
        "does not matter run the target alone at the highest batch it fits."
    )
    if p.blend_crossover_concurrency is not None:
        out.append(
            f"High concurrency: the blend stops paying above ≈{p.blend_crossover_concurrency:.0f} concurrent sequences "
            f"(K={p.k}); the peak here is {p.peak_concurrency}."
        )
    for c in p.classes:
        if not c.pays_at_target or not c.pays_at_peak:
            out.append(
                f"{c.name} at α {c.alpha:.2f} is below break-even "
                f"({'at the target' if not c.pays_at_target else 'at the peak'}): route it to a pool without speculation, "
                "or train a domain EAGLE-3 head on its traffic (SpecForge, vLLM speculators)."
            )
    out += [
        "Chunked prefill: compatible with speculative decoding in vLLM V1; prefill chunks share the verify step and lengthen it.",
        "Prefix caching: EAGLE-family methods drop the last matched prefix-cache block, lowering the hit rate (engines.md §6).",
        "Pipeline parallelism: not composable with speculative decoding up to vLLM 0.15; check your build.",
        "Structured output: supported in V1 (drafts validated against the grammar); grammar-invalid drafts lower ρ.",
        "Sampling at temperature > 0: vLLM drafts greedily by default, which can understate acceptance against theory.",
    ]
    if req.slo_p99_itl_ms is not None:
        r = next(x for x in p.rows if x.concurrency == p.concurrency)
        ok = "meets" if r.itl_p99_on_ms <= req.slo_p99_itl_ms else "misses"
        out.append(
            f"SLO: predicted P99 ITL per token at concurrency {p.concurrency} is {r.itl_p99_on_ms:.1f} ms with speculation "
            f"({r.itl_p99_off_ms:.1f} ms without): it {ok} the {req.slo_p99_itl_ms:g} ms SLO."
        )
    return out


def _playbook(ctx: _Ctx, p: Plan) -> list[Playbook]:
    req = ctx.req
    b = float(min(req.concurrency, ctx.b_max))
    s = ctx.workload.mean_context()
    t_dec = float(ctx.cost.decode_time(b, s)) * 1e3
    t_spec = float(ctx.cost.spec_step_time(b, p.k, s)) * 1e3
    k_small = max(1, p.k - 2)
    v_k = float(ctx.cost.verify_cost_ratio(b, p.k, s))
    v_small = float(ctx.cost.verify_cost_ratio(b, k_small, s))
    blend_alpha = sum(c.share * c.alpha for c in p.classes)
    r = next(x for x in p.rows if x.concurrency == p.concurrency)
    return [
        Playbook(
            cause="Rejections serialise with verify at full batch",
            number=(
                f"≈{1 - blend_alpha:.0%} of steps reject the first draft and deliver one token after a full {t_spec:.1f} ms "
                f"speculative step instead of a {t_dec:.1f} ms decode step (concurrency {req.concurrency})"
            ),
            mitigation="Smaller K at high batch (the batch-size schedule), or per-class routing of low-α traffic.",
        ),
        Playbook(
            cause="K too large for the batch",
            number=f"verify cost v = {v_k:.2f} at K={p.k} vs {v_small:.2f} at K={k_small} (batch {int(b)})",
            mitigation="Use the schedule's K per batch size, or turn speculation off above the crossover concurrency.",
        ),
        Playbook(
            cause="Chunked prefill sharing the step",
            number=f"P99 ITL per token {r.itl_p99_off_ms:.1f} ms vs P50 {r.itl_p50_off_ms:.1f} ms even without speculation",
            mitigation="Lower max_num_batched_tokens or separate prefill (disaggregation) so prefills do not land on long verify steps.",
        ),
        Playbook(
            cause="Low acceptance on one class",
            number=", ".join(
                f"{c.name}: α {c.alpha:.2f} → {c.speedup_target:.2f}×" for c in p.classes
            ),
            mitigation="Route that class without speculation, or train a domain EAGLE-3 head (SpecForge, speculators).",
        ),
    ]
