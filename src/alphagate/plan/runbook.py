"""The runbook of a plan: stages with their commands and exit criteria, alert rules, risks, and
the P99 playbook. Every number comes from the :class:`~alphagate.plan.records.Plan`.

Every command a stage prints runs as printed (a test follows the stages against twins): the
engine commands are the modelled deployment (:mod:`alphagate.plan.engine_config`), the bench
commands alternate baseline and candidate runs so that the gate's intervals see the run-to-run
spread, acceptance is measured per class (from the server's per-request counts where the engine
returns them, else one bench run per class), and the gate commands name the plan file that
``--out`` wrote.
"""

from __future__ import annotations

import math
import shlex

import numpy as np

from alphagate.core.traffic import TrafficClass
from alphagate.plan.predictions import Predictor
from alphagate.plan.records import ClassRow, Plan, PlanRequest, Playbook, Stage
from alphagate.specs.deployment import DeploymentConfig
from alphagate.specs.workload import length_mean, length_spec, sample_lengths

__all__ = [
    "CALIBRATION",
    "HEAD_STAGE",
    "alert_rules",
    "alpha_text",
    "bench_requests",
    "calibrate_argv",
    "head_commands",
    "plan_argv",
    "playbook",
    "policy_text",
    "risks",
    "stages",
]

PROMQL = [
    "ρ:  sum(rate(vllm:spec_decode_num_accepted_tokens_total[5m])) / "
    "sum(rate(vllm:spec_decode_num_draft_tokens_total[5m]))",
    "τ:  1 + sum(rate(vllm:spec_decode_num_accepted_tokens_total[5m])) / "
    "sum(rate(vllm:spec_decode_num_drafts_total[5m]))",
    "per position:  sum by (position) (rate(vllm:spec_decode_num_accepted_tokens_per_pos_total[5m])) "
    "/ scalar(sum(rate(vllm:spec_decode_num_drafts_total[5m])))",
]
#: clean requests for the gate's error-rate rule (≤ 1%): Wilson's upper bound of 0 of 384 is
#: 0.0099
ERROR_RULE_REQUESTS = 384
#: results of the printed commands
BASELINE = "results/baseline"
AB = "results/ab"
ALPHA = "results/alpha.json"
GATE = "results/gate.json"
CALIBRATION = "results/calibration.json"
#: requests per user at each level of the calibration sweep a plan prints when a range holds 1×
CALIBRATE_REQUESTS_PER_USER = 4
#: requests per user at the peak in every printed bench run, at least: each user sends several,
#: so the batch fills and stays full past the first requests' ramp
BENCH_REQUESTS_PER_USER = 4
#: the stage that trains a head on the traffic of the classes below their gate (after 0–5)
HEAD_STAGE = 6
#: outputs shorter than this (tokens) are dominated by their prefill: speculation, which only
#: shortens decode, barely moves their latency (the risk the plan names)
SHORT_OUTPUT_TOKENS = 50


def policy_text(p: Plan) -> str:
    """The shipped policy in words, as the plan names it (Stage 1 turns it on)."""
    if all(r.k == 0 for r in p.rows):
        return "no speculation (K = 0 at every concurrency)"
    if p.verdict == "no-go":
        return f"no speculation at concurrency {p.concurrency}"
    if p.dynamic_k_supported:
        return "K by batch size: " + ", ".join(
            f"{k} at {lo}–{hi}" if lo != hi else f"{k} at {lo}" for lo, hi, k in p.batch_schedule
        )
    above = p.disable_above_concurrency
    return f"K = {p.fixed_k}" + (f", off above concurrency {above}" if above else "")


def _sh(argv: list[str]) -> str:
    return shlex.join(argv)


def bench_requests(req: PlanRequest, p: Plan) -> int:
    """Requests per level and run: the repeats together reach the error-rate rule's sample, and
    every run sends at least 4 requests per user at the peak (so the batch fills)."""
    if req.bench_requests is not None:
        return req.bench_requests
    return max(
        math.ceil(ERROR_RULE_REQUESTS / req.repeats), BENCH_REQUESTS_PER_USER * p.peak_concurrency
    )


def _bench_common(req: PlanRequest, p: Plan) -> list[str]:
    return ["--endpoint", "chat", "--model", p.served_model, "--dataset", "traffic.jsonl"]


def _levels(*cs: int) -> str:
    return ",".join(str(c) for c in sorted(set(cs)))


def _bench_baseline(req: PlanRequest, p: Plan) -> str:
    """The baseline at the concurrencies the rollout is decided at (the engine's own client lines
    add concurrency 1, the latency floor)."""
    return _sh(
        ["alphagate", "bench", "--url", req.url, *_bench_common(req, p),
         "--concurrency", _levels(p.concurrency, p.peak_concurrency),
         "--num-prompts", str(bench_requests(req, p)), "--seed", "0", "--out", BASELINE]
    )  # fmt: skip


def _bench_ab(req: PlanRequest, p: Plan) -> str:
    return _sh(
        ["alphagate", "bench", "--baseline-url", req.url, "--candidate-url", req.staging_url,
         *_bench_common(req, p), "--concurrency", _levels(p.concurrency, p.peak_concurrency),
         "--num-prompts", str(bench_requests(req, p)), "--repeats", str(req.repeats),
         "--seed", "0", "--out", AB]
    )  # fmt: skip


def _class_out(name: str) -> str:
    safe = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in name)
    return f"results/alpha-{safe}"


def _bench_class(req: PlanRequest, p: Plan, name: str) -> str:
    """One class alone against the candidate: the counters then measure that class (engines that
    return no per-request counts)."""
    return _sh(
        ["alphagate", "bench", "--url", req.staging_url, *_bench_common(req, p),
         "--only-class", name, "--concurrency", str(p.peak_concurrency),
         "--num-prompts", str(bench_requests(req, p)), "--seed", "0", "--out", _class_out(name)]
    )  # fmt: skip


def _measure_cmds(req: PlanRequest, p: Plan) -> tuple[list[str], list[str]]:
    """The acceptance measurement (commands) and the files the re-plan reads."""
    if req.per_request_counts or len(p.classes) == 1:
        return [_sh(["alphagate", "measure", "bench", f"{AB}/summary.json", "--out", ALPHA])], [
            ALPHA
        ]
    cmds, files = [], []
    for c in p.classes:
        out = _class_out(c.name)
        cmds += [
            _bench_class(req, p, c.name),
            _sh(["alphagate", "measure", "bench", f"{out}/summary.json", "--out", f"{out}.json"]),
        ]
        files.append(f"{out}.json")
    return cmds, files


def _native_baseline(req: PlanRequest, p: Plan) -> list[str]:
    """The engine's own benchmark client against the baseline at concurrency 1 (the latency
    floor), the target and the peak, on random prompts of the workload's mean lengths."""
    bench = _vllm_bench_serve if req.engine == "vllm" else _sglang_bench_serving
    levels = sorted({1, p.concurrency, p.peak_concurrency})
    return [_sh(bench(req, p, _random_prompts(req, p, c), c)) for c in levels]


def _random_prompts(req: PlanRequest, p: Plan, concurrency: int) -> list[str]:
    """The dataset and load flags both engines' clients share (``--dataset-name random``)."""
    return [
        "--dataset-name", "random",
        "--random-input-len", str(int(length_mean(req.workload.prompt_len))),
        "--random-output-len", str(int(length_mean(req.workload.output_len))),
        "--num-prompts", str(bench_requests(req, p)),
        "--max-concurrency", str(concurrency),
    ]  # fmt: skip


def _vllm_bench_serve(req: PlanRequest, p: Plan, load: list[str], c: int) -> list[str]:
    return [
        "vllm", "bench", "serve", "--backend", "openai-chat",
        "--endpoint", "/v1/chat/completions", "--base-url", req.url, "--model", p.served_model,
        *load, "--temperature", "0",
        "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,90,99",
        "--save-result", "--result-filename", f"baseline-c{c}.json",
    ]  # fmt: skip


def _sglang_bench_serving(req: PlanRequest, p: Plan, load: list[str], c: int) -> list[str]:
    return [
        "python", "-m", "sglang.bench_serving", "--backend", "sglang-oai-chat",
        "--base-url", req.url, *load, "--output-file", f"baseline-c{c}.jsonl",
    ]  # fmt: skip


def _defaults() -> DeploymentConfig:
    return DeploymentConfig()


def alpha_text(c: TrafficClass) -> str:
    """A class's α as ``--class NAME:SHARE:ALPHA`` takes it."""
    if c.alpha_by_pos is not None:
        return ",".join(f"{a:g}" for a in c.alpha_by_pos)
    return f"{c.alpha:g}"


def _deployment_flags(d: DeploymentConfig) -> list[str]:
    """The flags that name a deployment: model, GPU, dtypes, method, TP and drafter."""
    argv = ["--model", d.model, "--gpu", d.gpu, "--dtype", d.weight_dtype,
            "--kv-dtype", d.kv_dtype, "--method", d.method]  # fmt: skip
    if d.tp is not None:
        argv += ["--tp", str(d.tp)]
    if d.drafter.checkpoint:
        argv += ["--draft", d.drafter.checkpoint]
    return argv


def _changed_flags(d: DeploymentConfig, *fields: tuple[str, str]) -> list[str]:
    """``flag value`` for each (field, flag) whose value differs from the default deployment's."""
    base, argv = _defaults(), []
    for field, flag in fields:
        value = getattr(d, field)
        if value != getattr(base, field):
            argv += [flag, f"{value:g}" if isinstance(value, float) else str(value)]
    return argv


def plan_argv(
    req: PlanRequest,
    *,
    alpha_from: list[str],
    out: str,
    calibration: str | None = None,
    typed: dict[str, str] | None = None,
    overall: bool = False,
) -> list[str]:
    """``alphagate plan …`` for the same deployment, traffic and load, with the classes' α read
    from ``alpha_from`` (the measurement) — but typed for the classes ``typed`` names — and the
    step-time coefficients from ``calibration`` (default: the plan's own), written to ``out``."""
    d = req.deployment
    argv = ["alphagate", "plan", *_deployment_flags(d)]
    if calibration or req.calibration_file is not None:
        argv += ["--calibration", calibration or str(req.calibration_file)]
    else:
        argv += _changed_flags(
            d,
            ("step_overhead_ms", "--step-overhead-ms"),
            ("per_seq_overhead_us", "--per-seq-overhead-us"),
            ("per_token_overhead_us", "--per-token-overhead-us"),
            ("spec_step_overhead_ms", "--spec-overhead-ms"),
            ("draft_seq_overhead_us", "--draft-seq-overhead-us"),
            ("spec_seq_overhead_us", "--spec-seq-overhead-us"),
            ("target_time_scale", "--target-time-scale"),
            ("draft_time_scale", "--draft-time-scale"),
            ("draft_tp", "--draft-tp"),
            ("cudagraph_max_tokens", "--cudagraph-max-tokens"),
        )
    argv += _changed_flags(
        d,
        ("max_num_seqs", "--max-num-seqs"),
        ("max_num_batched_tokens", "--max-num-batched-tokens"),
    )
    for c in req.workload.classes:
        # a measurement replaces every α; without one, the α typed stays
        given = not alpha_from and c.source == "given" and c.has_alpha
        alpha = (typed or {}).get(c.name) or (alpha_text(c) if given else None)
        argv += ["--class", f"{c.name}:{c.share:g}" + (f":{alpha}" if alpha else "")]
    argv += ["--concurrency", str(req.concurrency)]
    if req.peak != req.concurrency:
        argv += ["--peak-concurrency", str(req.peak)]
    for spec, flag in (
        (req.workload.prompt_len, "--prompt-len"),
        (req.workload.output_len, "--output-len"),
    ):
        text = length_spec(spec)
        if text is not None:
            argv += [flag, text]
    if req.engine != "vllm":
        argv += ["--engine", req.engine]
    if req.engine_version:
        argv += ["--engine-version", req.engine_version]
    if req.k is not None:
        argv += ["--k", str(req.k)]
    if req.slo_p99_itl_ms is not None:
        argv += ["--slo-p99-itl-ms", f"{req.slo_p99_itl_ms:g}"]
    if req.p99_budget is not None:
        argv += ["--p99-budget", f"{req.p99_budget:g}"]
    argv += ["--url", req.url, "--candidate-url", req.staging_url]
    if req.served_model:
        argv += ["--served-model", req.served_model]
    if req.repeats != 5:
        argv += ["--repeats", str(req.repeats)]
    if req.bench_requests is not None:
        argv += ["--bench-requests", str(req.bench_requests)]
    if req.seed:
        argv += ["--seed", str(req.seed)]
    for f in alpha_from:
        argv += ["--alpha-from", f]
    if overall and alpha_from:
        argv.append("--alpha-overall")
    return [*argv, "--out", out]


def calibrate_argv(req: PlanRequest, concurrencies: list[int]) -> list[str]:
    """``alphagate calibrate`` against the baseline and the staging replica for this deployment."""
    d = req.deployment
    argv = ["alphagate", "calibrate", "--url", req.url, "--url", req.staging_url,
            *_deployment_flags(d)]  # fmt: skip
    argv += _changed_flags(
        d,
        ("draft_tp", "--draft-tp"),
        ("max_num_seqs", "--max-num-seqs"),
        ("max_num_batched_tokens", "--max-num-batched-tokens"),
        ("cudagraph_max_tokens", "--cudagraph-max-tokens"),
    )
    if req.served_model:
        argv += ["--served-model", req.served_model]
    levels = ",".join(str(c) for c in sorted({1, *concurrencies}))
    return [*argv, "--concurrency", levels, "--requests-per-user", str(CALIBRATE_REQUESTS_PER_USER),
            "--out", CALIBRATION]  # fmt: skip


def _stage0(req: PlanRequest, p: Plan) -> Stage:
    n = bench_requests(req, p)
    names = ", ".join(c.name for c in p.classes)
    return Stage(
        number=0,
        title="Baseline",
        goal="Measure the deployment as it runs today, without speculation, at the concurrencies "
        "that matter. traffic.jsonl holds production-like requests, one JSON object per line: "
        f"prompt (or messages), max_tokens, and class (one of {names}).",
        commands=[_sh(p.serve_baseline), _bench_baseline(req, p), *_native_baseline(req, p)],
        exit_criteria=[
            f"{n} requests completed per level with < 1% errors",
            "TTFT, TPOT, ITL per token (P50/P99) and output tokens/s recorded per level",
        ],
        notes=[
            f"The first command is the deployment the plan modelled ({p.deployment_detail.model} "
            f"{p.deployment_detail.weight_dtype}, TP={p.deployment_detail.tp}, its batch and "
            "token limits); skip it if that server is already running at "
            f"{req.url}. The vLLM bench lines are the same baseline through the engine's own "
            "client."
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
    counts = (
        " --per-request-spec-decode-metrics summary makes every reply carry its own "
        "acceptance counts, which bench records per class."
        if req.per_request_counts
        else ""
    )
    return Stage(
        number=1,
        title="Enable speculative decoding",
        goal=f"Turn on {p.method} with {p.policy} {why}, at {req.staging_url}.{routed}",
        commands=[_sh(p.serve_candidate)],
        exit_criteria=[
            "the server starts and exports vllm:spec_decode_* counters"
            if req.engine == "vllm"
            else "the server starts and logs accept len"
        ],
        notes=[note + counts],
    )


def _measure_stage(req: PlanRequest, p: Plan) -> Stage:
    cmds, files = _measure_cmds(req, p)
    stem = f"{req.out_stem}-measured.md"
    how = (
        "the server's per-request counts, per class"
        if req.per_request_counts or len(p.classes) == 1
        else "one run per class against the candidate (this engine returns no per-request "
        "counts: its counters measure the class a run sends)"
    )
    return Stage(
        number=2,
        title="Measure α and the A/B",
        goal=f"Replace every prior with a measurement: baseline and candidate alternated "
        f"{req.repeats} times per level (the gate's intervals come from the spread between runs), "
        f"and α from {how}.",
        commands=[_bench_ab(req, p), *cmds, _sh(plan_argv(req, alpha_from=files, out=stem))],
        exit_criteria=[
            "≥ 2,000 drafts per class (measure bench exits 0; 3 means send more requests)",
            f"no run marked distorted in {AB}/summary.json (a client or server that fell behind "
            "measures itself, not the deployment)",
            f"the re-run plan ({stem}) keeps its verdict",
        ],
    )


def _gate_cmd(req: PlanRequest, p: Plan) -> list[str]:
    argv = ["alphagate", "gate", "--plan", req.plan_file, "--bench", f"{AB}/summary.json"]
    if not (req.per_request_counts or len(p.classes) == 1):
        for c in p.classes:
            argv += ["--bench", f"{_class_out(c.name)}/summary.json"]
    return argv


def _gate_stage(req: PlanRequest, p: Plan) -> Stage:
    g = p.gate
    assert g is not None
    p99 = (
        f"P99 ITL per token at concurrency {p.concurrency} at most {g.p99_budget:g}× the "
        f"baseline's ({g.p99_budget_source})"
    )
    if g.max_itl_per_token_p99_ms is not None:
        p99 += f" and at most {g.max_itl_per_token_p99_ms:g} ms"
    return Stage(
        number=3,
        title="Gate",
        goal=f"Ship only if the measured acceptance clears the gate decided at concurrency "
        f"{g.concurrency} (K={g.k}), the hardest place the policy speculates, and the A/B at "
        f"concurrency {p.concurrency} holds.",
        commands=[_sh([*_gate_cmd(req, p), "--out", GATE])],
        exit_criteria=[
            "alphagate gate exits 0 (1: a rule fails, do not ship; 3: not enough evidence "
            "yet, bench or measure longer)",
            f"α ≥ {g.alpha_min:.2f} (the break-even α at concurrency {g.concurrency} at the "
            f"pessimistic end of the step-time constants' ranges, {g.alpha_breakeven:.2f}, and "
            f"at least the modelled break-even + 0.05; ρ ≥ {g.draft_acceptance_rate_min:.3f} and τ ≥ "
            f"{g.mean_acceptance_length_min:.2f} at K={g.k}), per class where classes differ — "
            f"the fixed rule α ≥ {g.fixed_rule_alpha} would be ρ ≥ "
            f"{g.fixed_rule_draft_acceptance_rate:.3f} at this K",
            p99,
            f"TPOT at concurrency {p.concurrency} at least {g.min_tpot_speedup:.2f}× faster than "
            "the baseline's (baseline TPOT ÷ candidate TPOT)",
            f"candidate errors ≤ 1% at concurrency {p.concurrency}",
        ],
        notes=[
            f"The gate judges {g.quantity_gated}: its lower 95% bound must clear the threshold.",
            "The same quantities in PromQL: " + "; ".join(PROMQL),
        ],
    )


def _canary_stages(req: PlanRequest, p: Plan) -> list[Stage]:
    g = p.gate
    assert g is not None
    rho = f"{g.draft_acceptance_rate_min:.3f}"
    watch = [*_gate_cmd(req, p), "--url", req.staging_url, "--watch", "--interval", "60",
             "--duration", "1800"]  # fmt: skip
    return [
        Stage(
            number=4,
            title="Canary",
            goal="Shift real traffic in steps and watch acceptance and the tail.",
            commands=[_sh(watch)],
            exit_criteria=[
                f"ρ stays ≥ {rho} over every 10-minute window",
                f"P99 ITL per token within {g.p99_budget:g}× of the baseline pool; no rise in "
                "error rate",
            ],
            config=alert_rules(p),
            notes=[
                "5% of traffic for 30 min → 25% for 2 h → 50% for 24 h. The gate command above "
                "watches the canary: it exits 1 at the first failing evaluation (roll back). "
                "Through Prometheus instead of /metrics: replace `--url "
                f"{req.staging_url}` with `--prometheus PROMETHEUS_URL --selector "
                f"'{{model_name=\"{p.served_model}\"}}' --window 10m`. The alert rules below go "
                "into Prometheus's rule files.",
                f"Roll back when ρ < {rho} for 10 min, or P99 ITL per token exceeds the "
                f"baseline's by {g.p99_budget - 1:.0%} for 10 min.",
            ],
        ),
        Stage(
            number=5,
            title="Full rollout and steady state",
            goal="All traffic; keep measuring, because α drifts with traffic: keep the Stage 4 "
            "alert rules, and re-run Stages 2 and 3 weekly and after every model or head update.",
            commands=[],
            exit_criteria=["a week at 100% with no alert", "per-class ρ tracked on a dashboard"],
        ),
    ]


def _no_go_stages(req: PlanRequest, p: Plan) -> list[Stage]:
    cmds, files = _measure_cmds(req, p)
    stem = f"{req.out_stem}-measured.md"
    alt = []
    if p.p99 is not None and not p.p99.ok:
        need = math.ceil(p.p99.ratio * 100) / 100
        budget = req.model_copy(update={"p99_budget": need})
        alt.append(_sh(plan_argv(budget, alpha_from=[], out=f"{req.out_stem}-p99-budget.md")))
    return [
        _stage0(req, p),
        Stage(
            number=1,
            title="What would change the verdict",
            goal="Do not turn speculation on for this traffic at this concurrency. Re-plan when "
            "one of the conditions under the verdict holds.",
            commands=alt,
            exit_criteria=["a re-run plan with measured α says GO"],
            notes=[
                "To measure α without shipping: start a staging replica with speculation (`"
                + _sh(_staging(req, p))
                + "`), then run "
                + ", ".join(f"`{c}`" for c in [_bench_ab(req, p), *cmds])
                + f" and re-plan with `{_sh(plan_argv(req, alpha_from=files, out=stem))}`."
            ],
        ),
    ]


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in name)


def _target_checkpoint(p: Plan) -> str:
    """The target as the baseline's serve command names it (what train-head loads)."""
    argv = p.serve_baseline
    return argv[argv.index("--model-path") + 1] if "--model-path" in argv else argv[2]


def head_commands(req: PlanRequest, p: Plan, name: str) -> list[str]:
    """A head for class ``name``: its traffic logged from the baseline (on-policy completions of
    the current target), a head trained on it from the deployment's drafter and measured on the
    held-out requests, re-measured at the gate's K, the plan re-run with that α (the other
    classes' α typed as this plan has them), and the class's α gated (its lower 95% bound
    against the α it needs here)."""
    safe, k = _safe(name), (p.gate.k if p.gate is not None else p.fixed_k) or 3
    need = next(c.alpha_gate for c in p.classes if c.name == name)
    log, head, alpha = f"results/log-{safe}", f"heads/{safe}", f"results/alpha-{safe}-head.json"
    target, init = _target_checkpoint(p), p.speculative_config_static.get("model")
    stem = f"{req.out_stem}-{safe}-head"
    typed = {c.name: _alpha_typed(c) for c in p.classes if c.name != name}
    return [
        _sh(["alphagate", "bench", "--url", req.url, *_bench_common(req, p), "--only-class", name,
             "--save-text", "--concurrency", str(p.peak_concurrency),
             "--num-prompts", str(bench_requests(req, p)), "--seed", "0", "--out", log]),
        _sh(["alphagate", "train-head", "--target", target, "--log", f"{log}/requests.jsonl",
             "--class", name, *(["--init", str(init)] if init else []), "--k", str(k),
             "--out", head]),
        _sh(["alphagate", "measure", "offline", "--log", f"{head}/held-out.jsonl", "--target",
             target, "--drafter", f"eagle3:{head}", "--k", str(k), "--out", alpha]),
        _sh(plan_argv(req, alpha_from=[alpha], out=f"{stem}.md", typed=typed)),
        _sh(["alphagate", "gate", "--min-alpha", f"{need:.4g}", "--class", name,
             "--measure", alpha, "--out", f"results/gate-{safe}-head.json"]),
    ]  # fmt: skip


def _alpha_typed(c: ClassRow) -> str:
    """A class's α as this plan used it, for ``--class NAME:SHARE:ALPHA``."""
    if c.alpha_by_pos is not None:
        return ",".join(f"{a:.4g}" for a in c.alpha_by_pos)
    return f"{c.alpha:.4g}"


def below_gate(c: ClassRow) -> bool:
    """A class whose α, given or measured, does not clear its gate (a prior is measured
    first): a head trained on its traffic is its other way out."""
    return (
        c.alpha_gate is not None
        and c.alpha_gate < 1.0
        and not c.clears_gate
        and c.alpha_source != "prior"
    )


def _head_stage(req: PlanRequest, p: Plan, names: list[str]) -> Stage:
    g = p.gate
    assert g is not None
    title = (
        f"A head trained on {names[0]}'s traffic"
        if len(names) == 1
        else f"Heads trained on their own traffic: {', '.join(names)}"
    )
    return Stage(
        number=HEAD_STAGE,
        title=title,
        goal=f"Below its gate, {', '.join(names)} stays off speculation. A domain EAGLE-3 head "
        "trained on a class's own traffic may clear the gate: log its requests from the "
        "baseline, train a head on most of them and measure it on the rest, then re-plan and "
        "gate.",
        commands=[c for name in names for c in head_commands(req, p, name)],
        exit_criteria=[
            f"the gate exits 0: the held-out α clears the gate α {g.alpha_min:.2f} (3: hold "
            "out more requests), and the re-plan speculates for " + ", ".join(names),
            "then serve the head on the staging replica and repeat Stages 2 and 3 (the A/B and "
            "the plan's whole gate) before it carries production traffic",
        ],
        notes=[
            "train-head splits the log by request (seeded), trains on the target's hidden "
            "states over one part and measures α on the other part, which it never saw; the "
            "training loss and agreement it prints are not α."
        ],
    )


def _staging(req: PlanRequest, p: Plan) -> list[str]:
    """The speculative replica of a no-go plan, for measuring only (the static K)."""
    from alphagate.plan.engine_config import (
        EngineCommand,
        sglang_launch_argv,
        url_port,
        vllm_serve_argv,
    )
    from alphagate.specs.deployment import resolve_deployment

    cmd = EngineCommand(
        resolve_deployment(req.deployment, req.workload, req.peak), req.served_model
    )
    port = url_port(req.staging_url, url_port(req.url, 8000) + 1)
    if req.engine == "sglang":
        return sglang_launch_argv(cmd, port, p.sglang_flags)
    return vllm_serve_argv(
        cmd, port, dict(p.speculative_config_static), per_request_metrics=req.per_request_counts
    )


def stages(req: PlanRequest, p: Plan) -> list[Stage]:
    """Stage 0 (baseline) to 5 (steady state), and 6 for a head trained on the traffic of the
    classes below their gate; a no-go plan stops at what would change it."""
    if p.verdict == "no-go":
        return _no_go_stages(req, p)
    below = [c.name for c in p.classes if below_gate(c)] if p.method == "eagle3" else []
    return [
        _stage0(req, p),
        _enable_stage(req, p),
        _measure_stage(req, p),
        _gate_stage(req, p),
        *_canary_stages(req, p),
        *([_head_stage(req, p, below)] if below and p.gate is not None else []),
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
        f"{g.p99_budget:g} * histogram_quantile(0.99, sum by (le) (rate(vllm:inter_token_latency_seconds_bucket[10m] offset 1w)))\n"
        "    for: 10m\n"
        "    labels: {severity: ticket}\n"
        f'    annotations: {{summary: "P99 inter-token latency {g.p99_budget - 1:.0%} above last week\'s"}}'
    )


def risks(req: PlanRequest, pred: Predictor, p: Plan) -> list[str]:
    """Where speculation does not help, or costs more than it saves, for this deployment."""
    out: list[str] = [
        f"Calibration: {n[0].upper()}{n[1:]}; measure there (alphagate calibrate) before relying "
        "on these figures."
        for n in p.calibration[1:]
    ]
    lengths = sample_lengths(req.workload.output_len, 20_000, np.random.default_rng(0))
    short = float((lengths < SHORT_OUTPUT_TOKENS).mean())
    out.append(
        f"Short outputs: {short:.0%} of requests produce fewer than {SHORT_OUTPUT_TOKENS} tokens; "
        "their prefill dominates and speculation barely moves their latency."
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
    v_k = float(pred.cost.verify_cost_ratio(b, k, s))
    verify = f"verify cost v = {v_k:.2f} at K={k} (concurrency {c})"
    if k > 1:
        k_small = max(1, k - 2)
        v_small = float(pred.cost.verify_cost_ratio(b, k_small, s))
        verify += f" vs {v_small:.2f} at K={k_small}"
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
            number=verify,
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
