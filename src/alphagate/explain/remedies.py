"""Remedies for a tail that got worse, each replayed on the same requests and ranked.

The changes tried: K by batch size (vLLM ``num_speculative_tokens_per_batch_size``, the K the
step-time model finds best at each batch, as ``plan`` chooses it), speculation off above a
concurrency (the same schedule with K = 0 past it), a smaller K, a larger
``max_num_batched_tokens``, more KV room (when the candidate held fewer requests), a class routed
to servers without speculation, and a better drafter for the class it accepts least (what a head
trained on that class's traffic, ``alphagate train-head``, would have to reach). Each prediction
is the simulated figure after the change, scaled by the step-time model's error on the same
requests before it — the measured candidate's mean above its 95th percentile ÷ the simulated
one (a constant error cancels; a tail mean, unlike the P99 itself, does not jump where the
distribution of step times does) — with its 95% interval over resamples of the requests, widened
to the prediction scaled by the P99's own error and, for ITL per token, to the predictions with
no client lateness and with either run's alone (:mod:`alphagate.explain.lateness`): it varies
from run to run.

Ranked: the remedies that bring P99 ITL per token and P99 TTFT back within the budget of the
baseline's (``--p99-budget`` ×), most throughput first; then the others, nearest first. The engine flags are vLLM's (the twin takes
the same ones); the serving command is ``plan``'s writer (:func:`~alphagate.plan.engine_config.vllm_serve_argv`).
"""

from __future__ import annotations

import json
import math
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from alphagate.core.traffic import TrafficClass
from alphagate.explain.attribution import interval
from alphagate.explain.lateness import mixed_lateness
from alphagate.explain.lattice import Figures, Lattice, figures
from alphagate.explain.records import Metric, Remedy, RemedyKind
from alphagate.explain.replay import DEFAULT_CLASS
from alphagate.explain.samples import Samples, Variant, replay
from alphagate.measure.estimate import Interval
from alphagate.plan.engine_config import (
    EngineCommand,
    compress_schedule,
    default_draft,
    vllm_serve_argv,
    vllm_speculative_config,
)
from alphagate.sim.cost import build_cost_model
from alphagate.sim.predict import best_k_model, crossover_batch_model
from alphagate.sim.workload import unconditional_table
from alphagate.specs.deployment import (
    ResolvedDeployment,
    resolve_deployment,
    speculative_kv_slots,
)

__all__ = ["Context", "rank", "remedies"]

FloatArray = npt.NDArray[np.float64]
#: the largest ``max_num_batched_tokens`` tried
MAX_BUDGET = 1_048_576
#: the least rise of α at some position that makes a better head worth predicting
HEAD_GAIN = 0.05
#: the smallest prefill chunk a smaller budget must still leave beside the decodes
MIN_CHUNK = 64


@dataclass(frozen=True)
class Context:
    """What the remedies of one level are judged against."""

    lattice: Lattice
    resolved: ResolvedDeployment
    measured_candidate: Figures
    measured_baseline: Figures
    measured_candidate_tail: Figures  # the means above the 95th percentile (tail_figures)
    served: str | None
    load: int  # the level's concurrency, or the most requests seen at once (open loop)
    p99_budget: float = 1.0  # fixed: P99 ITL per token at most this × the baseline's


@dataclass(frozen=True)
class _Option:
    kind: RemedyKind
    title: str
    after: Samples
    flags: list[str]
    command: str | None = None
    action: str | None = None
    assumption: str | None = None
    classes: dict[str, list[float]] | None = None


def _spec(ctx: Context, k: int, schedule: list[list[int]] | None = None) -> dict[str, Any]:
    dep = ctx.resolved.config
    draft = dep.drafter.checkpoint or default_draft(dep.drafter.method, dep.model)
    return vllm_speculative_config(dep.drafter, draft, k, ctx.resolved.tp, schedule, dep.draft_tp)


def _spec_flags(spec: dict[str, Any]) -> list[str]:
    return ["--speculative-config", json.dumps(spec, separators=(",", ":"))]


def _serve(ctx: Context, spec: dict[str, Any], resolved: ResolvedDeployment | None = None) -> str:
    cmd = EngineCommand(resolved or ctx.resolved, ctx.served)
    return shlex.join(vllm_serve_argv(cmd, 8000, spec))


def _variant(ctx: Context, **change: Any) -> Variant:
    return replace(ctx.lattice.candidate_variant(), **change)


def _run(ctx: Context, variant: Variant, key: tuple[object, ...]) -> Samples:
    return ctx.lattice.run(variant, ("remedy", *key))


def _schedule_options(ctx: Context) -> Iterator[_Option]:
    """K by batch size, and speculation off above a concurrency."""
    plan, k = ctx.lattice.plan, ctx.lattice.plan.k
    top = max(ctx.load, 1)
    ks = [best_k_model(ctx.lattice.cost, plan.classes, float(b), plan.workload, k)[0]
          for b in range(1, top + 1)]  # fmt: skip
    schedule = compress_schedule([int(x) for x in np.minimum.accumulate(ks)])
    if any(entry[2] != k for entry in schedule):
        spec = _spec(ctx, k, schedule)
        yield _Option(
            "k_by_batch",
            "K by batch size: " + ", ".join(f"{kk} at {lo}–{hi}" for lo, hi, kk in schedule),
            _run(ctx, _variant(ctx, k_by_batch=schedule), ("schedule",)),
            _spec_flags(spec),
            _serve(ctx, spec),
        )
    cross = crossover_batch_model(ctx.lattice.cost, plan.classes, k, plan.workload, top)
    offs = {top // 2, math.floor(cross) if cross is not None else top // 4}
    for off in sorted(x for x in offs if 1 <= x < top):
        last = max(off + 1, ctx.resolved.config.max_num_seqs)
        schedule = [[1, off, k], [off + 1, last, 0]]
        spec = _spec(ctx, k, schedule)
        yield _Option(
            "off_above",
            f"speculation off above {off} running requests",
            _run(ctx, _variant(ctx, k_by_batch=schedule), ("off", off)),
            _spec_flags(spec),
            _serve(ctx, spec),
        )


def _smaller_k(ctx: Context) -> Iterator[_Option]:
    k = ctx.lattice.plan.k
    for kk in sorted({1, k // 2, k - 1} - {0, k}):
        table = unconditional_table(ctx.lattice.plan.classes, kk)
        spec = _spec(ctx, kk)
        yield _Option(
            "smaller_k",
            f"K = {kk}",
            _run(ctx, _variant(ctx, k=kk, table=table), ("k", kk)),
            _spec_flags(spec),
            _serve(ctx, spec),
        )


def _budgets(ctx: Context) -> Iterator[_Option]:
    """Larger budgets where prompts took several steps; smaller ones (more, smaller prefill
    chunks: each stalls the decodes less) where the decodes leave room for them."""
    dep = ctx.resolved.config
    decodes = ctx.load * (ctx.lattice.plan.k + 1)
    longest = max(int(r.prompt_tokens or 0) for r in ctx.lattice.plan.records)
    now = dep.max_num_batched_tokens
    tried = {now // 2, *((now * 2, now * 4) if longest + decodes > now else ())}
    for budget in sorted(b for b in tried if decodes + MIN_CHUNK <= b <= MAX_BUDGET):
        resolved = resolve_deployment(dep.model_copy(update={"max_num_batched_tokens": budget}))
        cost = build_cost_model(resolved)
        spec = _spec(ctx, ctx.lattice.plan.k)
        yield _Option(
            "max_batched_tokens",
            f"max_num_batched_tokens {budget:,}",
            _run(ctx, _variant(ctx, cost=cost), ("budget", budget)),
            ["--max-num-batched-tokens", str(budget)],
            _serve(ctx, spec, resolved),
        )


def _kv_room(ctx: Context) -> Iterator[_Option]:
    base_cap, cand_cap = ctx.lattice.caps
    if cand_cap >= base_cap:
        return
    r = ctx.resolved
    per_token = r.target_footprint.kv_bytes_per_token + (
        r.draft_footprint.kv_bytes_per_token if r.draft_footprint is not None else 0.0
    )
    longest = speculative_kv_slots(r.config.drafter, ctx.lattice.plan.k) + max(
        (x.prompt_tokens or 0) + (x.output_tokens or 0) for x in ctx.lattice.plan.records
    )
    held = min(base_cap, ctx.load)
    room = math.ceil(held * longest * per_token / r.tp)
    flags = ["--kv-cache-memory-bytes", str(room)]
    yield _Option(
        "kv_room",
        f"KV room for {held} requests ({room / 2**30:.2f} GiB per GPU)",
        _run(ctx, _variant(ctx, cap=base_cap), ("cap", base_cap)),
        flags,
        _serve(ctx, _spec(ctx, ctx.lattice.plan.k)) + " " + shlex.join(flags),
        assumption=f"room for {held} requests of the longest here ({longest:,} tokens with "
        "the lookahead slots), as the baseline held",
    )


def _merged(a: Samples, b: Samples) -> Samples:
    """Two pools serving at once: their samples together, throughput the sum of theirs."""
    tokens = a.output_tokens + b.output_tokens
    rate = a.throughput + b.throughput
    return Samples(
        request=np.concatenate([a.request, b.request]),
        gap_s=np.concatenate([a.gap_s, b.gap_s]),
        tokens=np.concatenate([a.tokens, b.tokens]),
        mean_tokens=np.concatenate([a.mean_tokens, b.mean_tokens]),
        ttft_s=np.concatenate([a.ttft_s, b.ttft_s]),
        ttft_request=np.concatenate([a.ttft_request, b.ttft_request]),
        output_tokens=tokens,
        span_s=tokens / rate if rate > 0 else 0.0,
    )


def _routes(ctx: Context) -> Iterator[_Option]:
    plan = ctx.lattice.plan
    if len(plan.classes) < 2:
        return
    names = [c.name for c in plan.classes]
    cls = np.asarray([names.index(r.cls or DEFAULT_CLASS) for r in plan.records])
    for i, name in enumerate(names):
        away = cls == i
        users = max(1, round(ctx.load * float(away.mean())))
        stay = plan.subset(~away, max(1, ctx.load - users))
        routed = plan.subset(away, users)
        lat = ctx.lattice
        spec_side = replay(stay, lat.candidate_variant(), seeds=lat.seeds, seed=lat.seed)
        base_side = replay(routed, lat.baseline_variant(), seeds=lat.seeds, seed=lat.seed)
        yield _Option(
            "route_class",
            f"class {name} routed to servers without speculation",
            _merged(spec_side, base_side),
            [],
            action=f"send class {name}'s requests to the baseline pool (a router rule on the "
            "class); the speculative servers keep the rest",
            assumption=f"{users} of the {ctx.load} users' worth of load moves with it",
        )


def _better_head(ctx: Context) -> Iterator[_Option]:
    """The class that gains least per step, with the α of the best other class — or, alone,
    with its first position accepting as its later ones do."""
    plan = ctx.lattice.plan
    k = plan.k
    tau = [float(1 + np.sum(c.unconditional(k))) for c in plan.classes]
    weak = int(np.argmin(tau))
    cls = plan.classes[weak]
    alphas = list(cls.conditional(k))
    if len(plan.classes) > 1:
        best = plan.classes[int(np.argmax(tau))]
        target = [max(a, b) for a, b in zip(alphas, best.conditional(k), strict=True)]
    elif k > 1:
        target = [float(np.mean(alphas[1:])), *alphas[1:]]
    else:
        return
    if max(t - a for t, a in zip(target, alphas, strict=True)) < HEAD_GAIN:
        return
    better = TrafficClass(name=cls.name, share=cls.share, alpha_by_pos=tuple(target))
    classes = tuple(better if i == weak else c for i, c in enumerate(plan.classes))
    variant = _variant(ctx, table=unconditional_table(classes, k))
    yield _Option(
        "better_head",
        f"a drafter accepting α {', '.join(f'{a:.2f}' for a in target)} on class {cls.name}",
        _run(ctx, variant, ("head", weak)),
        [],
        action=f"train a drafter head on class {cls.name}'s traffic (alphagate train-head) and "
        "measure its α before serving it",
        assumption=f"the new head reaches α {', '.join(f'{a:.2f}' for a in target)} "
        f"(now {', '.join(f'{a:.2f}' for a in alphas)})",
        classes={c.name: [float(a) for a in c.conditional(k)] for c in classes},
    )


class _Scales(NamedTuple):
    """The step-time model's error on the candidate (measured ÷ simulated) per resample, taken
    on the mean above the 95th percentile (steady) and on the figure itself (it holds errors of
    the tail's own, but a P99 where the distribution jumps — steps with a prefill chunk and
    steps without — moves by the jump when a few samples cross it)."""

    tail: FloatArray
    figure: FloatArray


def _scales(ctx: Context, before: Figures, before_tail: Figures, metric: Metric) -> _Scales:
    return _Scales(
        tail=np.asarray(ctx.measured_candidate_tail[metric] / before_tail[metric]),
        figure=np.asarray(ctx.measured_candidate[metric] / before[metric]),
    )


def _predicted(
    after: Figures, scales: _Scales, metric: Metric
) -> tuple[FloatArray, Interval | None]:
    """The simulated figure after the remedy × the tail-mean scale, per resample, with the
    interval of both scales' predictions over the resamples."""
    by_tail, by_figure = after[metric] * scales.tail, after[metric] * scales.figure
    ivs = [iv for iv in (interval(by_tail), interval(by_figure)) if iv is not None]
    if not ivs:
        return by_tail, None
    return by_tail, Interval(low=min(i.low for i in ivs), high=max(i.high for i in ivs))


def _excess(ctx: Context, predicted: dict[Metric, float]) -> float:
    """The sum of the positive logs of predicted ÷ (budget × the baseline's measured)."""
    return sum(
        max(0.0, math.log(v / (ctx.p99_budget * ctx.measured_baseline[m][0])))
        for m, v in predicted.items()
    )


def _itl_interval(
    ctx: Context, opt: _Option, scales: _Scales, iv: Interval | None
) -> Interval | None:
    """The resamples' interval, widened to the predictions with no client lateness and with
    either run's alone: a client's lateness varies from run to run (the A/B measured two), and
    a quiet machine has next to none."""
    lat = ctx.lattice
    metric: Metric = "itl_per_token_p99_ms"
    if iv is None:
        return None
    ends = [iv.low, iv.high]
    for late in (None, *lat.lateness):
        alone = figures(opt.after, lat.counts[:1], lateness=late)[metric][0]
        ends += [float(alone * scales.tail[0]), float(alone * scales.figure[0])]
    return Interval(low=min(ends), high=max(ends))


def _remedy(
    ctx: Context, opt: _Option, before: tuple[Figures, Figures], base_rate: float
) -> Remedy:
    """``before``: the candidate's replay, its figures and their tail means."""
    lat = ctx.lattice
    late = mixed_lateness(lat.chunk_rates(), lat.lateness, opt.after.chunk_rate)
    after = figures(opt.after, lat.counts, lateness=late)
    itl_scales = _scales(ctx, *before, "itl_per_token_p99_ms")
    itl, itl_iv = _predicted(after, itl_scales, "itl_per_token_p99_ms")
    ttft, ttft_iv = _predicted(after, _scales(ctx, *before, "ttft_p99_ms"), "ttft_p99_ms")
    excess = _excess(ctx, {"itl_per_token_p99_ms": float(itl[0]), "ttft_p99_ms": float(ttft[0])})
    return Remedy(
        kind=opt.kind,
        title=opt.title,
        assumption=opt.assumption,
        itl_per_token_p99_ms=float(itl[0]),
        itl_per_token_p99_interval=_itl_interval(ctx, opt, itl_scales, itl_iv),
        ttft_p99_ms=float(ttft[0]),
        ttft_p99_interval=ttft_iv,
        throughput_ratio=opt.after.throughput / base_rate if base_rate > 0 else math.nan,
        fixes_tail=excess == 0.0,
        excess=excess,
        flags=opt.flags,
        command=opt.command,
        action=opt.action,
        classes=opt.classes,
    )


def rank(found: list[Remedy]) -> list[Remedy]:
    """Those that fix the tail, most throughput first; then the rest, least excess first. Of
    the same kind (several K, budgets, thresholds), only the best is kept; one per routed
    class."""
    ordered = sorted(
        found, key=lambda r: (not r.fixes_tail, -r.throughput_ratio if r.fixes_tail else r.excess)
    )
    seen: set[str] = set()
    out = []
    for r in ordered:
        kind = r.title if r.kind == "route_class" else r.kind
        if kind not in seen:
            seen.add(kind)
            out.append(r)
    return out


def remedies(ctx: Context) -> list[Remedy]:
    """Every remedy that applies to the level, replayed and ranked."""
    before = (ctx.lattice.candidate(), ctx.lattice.candidate_tail())
    base_rate = ctx.lattice.run(ctx.lattice.baseline_variant(), ("baseline", False)).throughput
    options = [
        *_schedule_options(ctx), *_smaller_k(ctx), *_budgets(ctx), *_kv_room(ctx),
        *_routes(ctx), *_better_head(ctx),
    ]  # fmt: skip
    return rank([_remedy(ctx, opt, before, base_rate) for opt in options])
