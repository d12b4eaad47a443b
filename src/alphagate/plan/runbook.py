"""The runbook of a plan: stages with their commands and exit criteria, alert rules, risks, and
the P99 playbook. Every number comes from the :class:`~alphagate.plan.records.Plan`; every
command it prints exists (``alphagate bench``, ``measure``, ``plan``, ``gate``, ``vllm``,
``sglang``); the gate commands read the plan as JSON (``plan.json``, written beside ``--out``).
"""

from __future__ import annotations

import json
import shlex

import numpy as np

from alphagate.plan.predictions import Predictor
from alphagate.plan.records import Plan, PlanRequest, Playbook, Stage
from alphagate.specs.workload import length_mean, sample_lengths

__all__ = ["alert_rules", "num_prompts", "playbook", "risks", "served_name", "stages"]

#: Hugging Face ids of the preset targets, for the commands a plan prints.
PRESET_REPOS = {
    "llama-3.1-8b": "meta-llama/Llama-3.1-8B-Instruct",
    "llama-3.3-70b": "meta-llama/Llama-3.3-70B-Instruct",
    "llama-3.2-1b": "meta-llama/Llama-3.2-1B-Instruct",
}

#: The plan as JSON, beside the markdown (``alphagate plan … --out plan.md``); ``gate --plan``.
PLAN_JSON = "plan.json"

PROMQL = [
    "ρ:  sum(rate(vllm:spec_decode_num_accepted_tokens_total[5m])) / "
    "sum(rate(vllm:spec_decode_num_draft_tokens_total[5m]))",
    "τ:  1 + sum(rate(vllm:spec_decode_num_accepted_tokens_total[5m])) / "
    "sum(rate(vllm:spec_decode_num_drafts_total[5m]))",
    "per position:  sum by (position) (rate(vllm:spec_decode_num_accepted_tokens_per_pos_total[5m])) "
    "/ scalar(sum(rate(vllm:spec_decode_num_drafts_total[5m])))",
]


def served_name(req: PlanRequest) -> str:
    model = req.deployment.model
    return req.served_model or PRESET_REPOS.get(model.lower(), model)


def num_prompts(p: Plan) -> int:
    """Requests per bench level: 400 clean requests put the 95% upper bound of the error rate
    under the gate's 1% (Wilson: 0 of 384 → 0.0099); more at a high peak."""
    return max(400, 8 * p.peak_concurrency)


def _levels(p: Plan) -> list[int]:
    return sorted({1, p.concurrency, p.peak_concurrency})


def _bench(req: PlanRequest, p: Plan, out: str) -> str:
    levels = ",".join(str(c) for c in _levels(p))
    n = num_prompts(p)
    return (
        f"alphagate bench --url {req.url} --endpoint chat --model {served_name(req)} "
        f"--dataset traffic.jsonl --concurrency {levels} --num-prompts {n} --seed 0 --out {out}"
    )


def _native_baseline(req: PlanRequest, p: Plan) -> list[str]:
    served = served_name(req)
    n = num_prompts(p)
    i, o = int(length_mean(req.workload.prompt_len)), int(length_mean(req.workload.output_len))
    if req.engine == "vllm":
        return [
            f"vllm bench serve --backend openai-chat --endpoint /v1/chat/completions "
            f"--base-url {req.url} --model {served} --dataset-name random --random-input-len {i} "
            f"--random-output-len {o} --num-prompts {n} --max-concurrency {c} --temperature 0 "
            "--percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,90,99 "
            f"--save-result --result-filename baseline-c{c}.json"
            for c in _levels(p)
        ]
    return [
        f"python -m sglang.bench_serving --backend sglang-oai-chat --base-url {req.url} "
        f"--dataset-name random --random-input-len {i} --random-output-len {o} --num-prompts {n} "
        f"--max-concurrency {c} --output-file baseline-c{c}.jsonl"
        for c in _levels(p)
    ]


def _serve(req: PlanRequest, p: Plan, static: bool = False) -> str:
    tp = p.deployment_detail.tp
    if req.engine == "sglang":
        return (
            f"python -m sglang.launch_server --model-path {served_name(req)} --tp {tp} "
            + " ".join(p.sglang_flags)
        )
    cfg = p.speculative_config_static if static else p.speculative_config
    return (
        f"vllm serve {served_name(req)} --tensor-parallel-size {tp} "
        f"--speculative-config {shlex.quote(json.dumps(cfg))}"
    )


def _measure_live(req: PlanRequest) -> str:
    return f"alphagate measure live --url {req.url} --min-drafts 2000 --out results/alpha-live.json"


def _gate_ab() -> str:
    return (
        f"alphagate gate --plan {PLAN_JSON} --measure results/alpha-live.json "
        "--baseline results/baseline/summary.json --candidate results/candidate/summary.json "
        "--out results/gate.json"
    )


def _gate_watch(req: PlanRequest, minutes: int) -> str:
    return (
        f"alphagate gate --plan {PLAN_JSON} --baseline results/baseline/summary.json "
        f"--candidate results/candidate/summary.json --url {req.url} --watch --interval 60 "
        f"--duration {minutes * 60}"
    )


def _replan(req: PlanRequest, p: Plan) -> str:
    d = req.deployment
    parts = [
        f"alphagate plan --model {d.model} --gpu {d.gpu} --dtype {d.weight_dtype} --method {d.method}",
        *(f"--class {c.name}:{c.share:g}" for c in req.workload.classes),
        f"--concurrency {req.concurrency}",
    ]
    if req.peak != req.concurrency:
        parts.append(f"--peak-concurrency {req.peak}")
    parts.append("--alpha-from results/alpha-live.json --alpha-overall --out plan-measured.md")
    return " ".join(parts)


def _baseline_stage(req: PlanRequest, p: Plan) -> Stage:
    n = num_prompts(p)
    return Stage(
        number=0,
        title="Baseline",
        goal="Measure the deployment without speculation at the concurrencies that matter.",
        commands=[_bench(req, p, "results/baseline"), *_native_baseline(req, p)],
        exit_criteria=[
            f"{n} requests completed per level with < 1% errors",
            "TTFT, TPOT, ITL per token (P50/P99) and output tokens/s recorded per level",
        ],
    )


def _no_go_stages(req: PlanRequest, p: Plan) -> list[Stage]:
    return [
        _baseline_stage(req, p),
        Stage(
            number=1,
            title="What would change the verdict",
            goal="Do not turn speculation on for this traffic at this concurrency. Re-plan when "
            "one of the conditions under the verdict holds.",
            commands=[],
            exit_criteria=["a re-run plan with measured α says GO"],
            notes=[
                "Acceptance can be measured on a staging replica that serves a copy of the "
                f"traffic with speculation on (`{_serve(req, p, static=True)}`), then "
                f"`{_bench(req, p, 'results/candidate')}`, `{_measure_live(req)}` and "
                f"`{_replan(req, p)}`."
            ],
        ),
    ]


def _gate_stage(req: PlanRequest, p: Plan) -> Stage:
    g = p.gate
    assert g is not None
    return Stage(
        number=3,
        title="Gate",
        goal=f"Ship only if the measured acceptance clears the gate decided at concurrency "
        f"{g.concurrency} (K={g.k}), the hardest place the policy speculates.",
        commands=[_gate_ab()],
        exit_criteria=[
            "alphagate gate exits 0 (1: a rule fails, do not ship; 3: not enough evidence "
            "yet, bench or measure longer)",
            f"ρ ≥ {g.draft_acceptance_rate_min:.3f} at K={g.k} (α ≥ {g.alpha_min:.2f} = break-even "
            f"{g.alpha_breakeven:.2f} at concurrency {g.concurrency} + 0.05 margin; τ ≥ "
            f"{g.mean_acceptance_length_min:.2f}) — the fixed rule α ≥ {g.fixed_rule_alpha} "
            f"would be ρ ≥ {g.fixed_rule_draft_acceptance_rate:.3f} at this K",
            f"P99 ITL per token at concurrency {p.concurrency} at most "
            f"{1 / g.min_itl_per_token_p99_speedup:.2f}× the baseline's (the prediction + 10%)",
            f"TPOT at least {g.min_tpot_speedup:.2f}× lower than the baseline at concurrency "
            f"{p.concurrency}",
        ],
        notes=[
            f"The gate uses {g.quantity_gated}: its lower 95% bound must clear the threshold.",
            "The same quantities in PromQL: " + "; ".join(PROMQL),
        ],
    )


def _enable_stage(req: PlanRequest, p: Plan) -> Stage:
    routed = (
        f" Route {', '.join(p.routed_away)} to a pool without speculation." if p.routed_away else ""
    )
    if p.dynamic_k_supported:
        note = (
            "The batch-size schedule comes from the step-time model's best K per batch size, "
            "checked by simulation at every concurrency of the table (confidence "
            f"{p.schedule_confidence}: the shipped K is the simulator's best within 2% at "
            f"{p.schedule_agreement:.0%} of them). It is derived from a roofline model, not swept "
            "on your GPU — Stage 2 confirms it."
        )
    else:
        above = p.disable_above_concurrency
        note = f"This engine build has no per-batch-size schedule: run K={p.fixed_k}" + (
            f" and send traffic above concurrency {above} to a pool without speculation."
            if above
            else "."
        )
    why = (
        "to measure α (not for traffic yet)"
        if p.verdict == "measure first"
        else "on a staging replica"
    )
    return Stage(
        number=1,
        title="Enable speculative decoding",
        goal=f"Turn on {p.method} with {p.policy} {why}.{routed}",
        commands=[_serve(req, p, static=not p.dynamic_k_supported)],
        exit_criteria=[
            "the server starts and exports vllm:spec_decode_* counters"
            if req.engine == "vllm"
            else "the server starts and logs accept len"
        ],
        notes=[note],
    )


def _measure_stage(req: PlanRequest, p: Plan) -> Stage:
    return Stage(
        number=2,
        title="Measure α on real traffic",
        goal="Replace every prior with a measurement: replay production-like prompts and read "
        "the engine's counters.",
        commands=[_bench(req, p, "results/candidate"), _measure_live(req), _replan(req, p)],
        exit_criteria=[
            "≥ 2,000 drafts (measure live exits 0; 3 means keep the traffic flowing); ρ known "
            "to ±0.02 (95% CI from the counts)",
            "conditional α per position computed (per-position rate ÷ previous position)",
            "the re-run plan (plan-measured.md) keeps its verdict",
        ],
        notes=[
            "bench reads the server's counters, so one run measures the traffic it sends: "
            "bench each class's prompts in its own run for per-class α. measure live reads the "
            "same counters while real traffic flows (repeat --url for every replica).",
        ],
    )


def _canary_stages(req: PlanRequest, p: Plan) -> list[Stage]:
    g = p.gate
    assert g is not None
    rho = f"{g.draft_acceptance_rate_min:.3f}"
    return [
        Stage(
            number=4,
            title="Canary",
            goal="Shift real traffic in steps and watch acceptance and the tail.",
            commands=[_gate_watch(req, 30), alert_rules(p)],
            exit_criteria=[
                f"ρ stays ≥ {rho} over every 10-minute window",
                "P99 ITL per token within 10% of the baseline pool; no rise in error rate",
            ],
            notes=[
                "5% of traffic for 30 min → 25% for 2 h → 50% for 24 h. The gate command above "
                "watches the canary: it exits 1 at the first failing evaluation (roll back). "
                "Through Prometheus instead of /metrics: "
                f"`alphagate gate --plan {PLAN_JSON} --baseline results/baseline/summary.json "
                "--candidate results/candidate/summary.json --prometheus PROMETHEUS_URL --selector "
                f"'{{model_name=\"{served_name(req)}\"}}' --window 10m --watch --interval 60 "
                "--duration 1800`.",
                f"Roll back when ρ < {rho} for 10 min, or P99 ITL per token exceeds the "
                "baseline by 10% for 10 min.",
            ],
        ),
        Stage(
            number=5,
            title="Full rollout and steady state",
            goal="All traffic; keep measuring, because α drifts with traffic.",
            commands=[
                "keep the Stage 4 alert rules; re-run Stage 2 weekly and after every model or "
                "head update"
            ],
            exit_criteria=["a week at 100% with no alert", "per-class ρ tracked on a dashboard"],
        ),
    ]


def stages(req: PlanRequest, p: Plan) -> list[Stage]:
    """Stage 0 (baseline) to 5 (steady state); a no-go plan stops at what would change it."""
    if p.verdict == "no-go":
        return _no_go_stages(req, p)
    return [
        _baseline_stage(req, p),
        _enable_stage(req, p),
        _measure_stage(req, p),
        _gate_stage(req, p),
        *_canary_stages(req, p),
    ]


def alert_rules(p: Plan) -> str:
    """Prometheus alert rules for the canary (acceptance collapse, P99 regression)."""
    g = p.gate
    assert g is not None
    rho = f"{g.draft_acceptance_rate_min:.3f}"
    return (
        "groups:\n"
        "- name: alphagate-speculative-decoding\n"
        "  rules:\n"
        "  - alert: SpecDecodeAcceptanceCollapse\n"
        "    expr: sum(rate(vllm:spec_decode_num_accepted_tokens_total[10m])) / "
        f"sum(rate(vllm:spec_decode_num_draft_tokens_total[10m])) < {rho}\n"
        "    for: 10m\n"
        "    labels: {severity: page}\n"
        f'    annotations: {{summary: "draft acceptance rate below the gate ({rho}); '
        'speculation may be a net loss"}\n'
        "  - alert: SpecDecodeP99ItlRegression\n"
        "    expr: histogram_quantile(0.99, sum by (le) (rate(vllm:inter_token_latency_seconds_bucket[10m]))) > "
        "1.1 * histogram_quantile(0.99, sum by (le) (rate(vllm:inter_token_latency_seconds_bucket[10m] offset 1w)))\n"
        "    for: 10m\n"
        "    labels: {severity: ticket}\n"
        '    annotations: {summary: "P99 inter-token latency 10% above last week\'s"}'
    )


def risks(req: PlanRequest, pred: Predictor, p: Plan) -> list[str]:
    """Where speculation does not help, or costs more than it saves, for this deployment."""
    out: list[str] = [
        f"Calibration: {n[0].upper()}{n[1:]}; measure there (alphagate calibrate) before relying "
        "on these figures."
        for n in p.calibration[1:]
    ]
    short = float(
        (sample_lengths(req.workload.output_len, 20_000, np.random.default_rng(0)) < 50).mean()
    )
    out.append(
        f"Short outputs: {short:.0%} of requests produce fewer than 50 tokens; their prefill "
        "dominates and speculation barely moves their latency."
    )
    r1 = p.rows[0]
    if r1.k:
        out.append(
            f"Batch-1 offline work: at concurrency {r1.concurrency} speculation gives "
            f"{r1.throughput_speedup:.2f}× higher throughput (K={r1.k}), but if latency does not "
            "matter, run the target alone at the highest batch it fits."
        )
    if p.blend_crossover_concurrency is not None:
        out.append(
            f"High concurrency: with K={p.fixed_k} the blend stops paying above ≈"
            f"{p.blend_crossover_concurrency:.0f} concurrent sequences; the peak here is "
            f"{p.peak_concurrency}."
        )
    for c in p.classes:
        if c.alpha_gate is not None and not c.clears_gate:
            out.append(
                f"{c.name} at α {c.alpha_label} is below the gate α {c.alpha_gate:.2f} at "
                f"concurrency {c.fails_at_concurrency}: route it to a pool without speculation, "
                "or train a domain EAGLE-3 head on its traffic (SpecForge, vLLM speculators)."
            )
    out += [
        "Chunked prefill: compatible with speculative decoding in vLLM V1; prefill chunks share "
        "the verify step and lengthen it.",
        "Prefix caching: EAGLE-family drafters drop the last matched prefix-cache block "
        "(vLLM PR #17137), lowering the hit rate.",
        "Pipeline parallelism: not composable with speculative decoding up to vLLM 0.15; check "
        "your build.",
        "Structured output: supported in vLLM V1 (drafts validated against the grammar, PR "
        "#14702); grammar-invalid drafts lower ρ.",
        "Sampling at temperature > 0: vLLM drafts greedily by default (draft_sample_method), "
        "which can understate acceptance against theory.",
    ]
    if req.slo_p99_itl_ms is not None:
        r = next(x for x in p.rows if x.concurrency == p.concurrency)
        ok = "meets" if r.itl_p99_on_ms <= req.slo_p99_itl_ms else "misses"
        out.append(
            f"SLO: predicted P99 ITL per token at concurrency {p.concurrency} is "
            f"{r.itl_p99_on_ms:.1f} ms with the policy's K={r.k} ({r.itl_p99_off_ms:.1f} ms "
            f"without): it {ok} the {req.slo_p99_itl_ms:g} ms SLO."
        )
    return out


def playbook(req: PlanRequest, pred: Predictor, p: Plan) -> list[Playbook]:
    """Why P99 ITL per token can rise while the mean falls, with this deployment's numbers."""
    c = p.concurrency
    b = pred.batch(c)
    s = pred.workload.mean_context()
    k = next(r.k for r in p.rows if r.concurrency == c) or p.fixed_k
    t_dec = float(pred.cost.decode_time(b, s)) * 1e3
    t_spec = float(pred.cost.spec_step_time(b, k, s)) * 1e3
    k_small = max(1, k - 2)
    v_k = float(pred.cost.verify_cost_ratio(b, k, s))
    v_small = float(pred.cost.verify_cost_ratio(b, k_small, s))
    blend_alpha = sum(x.share * x.alpha for x in p.classes)
    r = next(x for x in p.rows if x.concurrency == c)
    return [
        Playbook(
            cause="Rejections serialise with verify at full batch",
            number=(
                f"≈{1 - blend_alpha:.0%} of steps reject the first draft and deliver one token "
                f"after a full {t_spec:.1f} ms speculative step (K={k}) instead of a {t_dec:.1f} ms "
                f"decode step (concurrency {c})"
            ),
            mitigation="Smaller K at high batch (the batch-size schedule), or per-class routing of low-α traffic.",
        ),
        Playbook(
            cause="K too large for the batch",
            number=f"verify cost v = {v_k:.2f} at K={k} vs {v_small:.2f} at K={k_small} (concurrency {c})",
            mitigation="Use the schedule's K per batch size, or turn speculation off above the crossover concurrency.",
        ),
        Playbook(
            cause="Chunked prefill sharing the step",
            number=(
                f"P99 ITL per token {r.itl_p99_off_ms:.1f} ms vs P50 {r.itl_p50_off_ms:.1f} ms even "
                f"without speculation (concurrency {c})"
            ),
            mitigation="Lower max_num_batched_tokens or separate prefill (disaggregation) so prefills do not land on long verify steps.",
        ),
        Playbook(
            cause="Low acceptance on one class",
            number=", ".join(
                f"{x.name}: α {x.alpha_label} → {x.speedup_target:.2f}× throughput at concurrency {c}"
                for x in p.classes
            ),
            mitigation="Route that class without speculation, or train a domain EAGLE-3 head (SpecForge, speculators).",
        ),
    ]
