"""Build a staged rollout plan: every number computed for the user's model, GPU, traffic and load.

The order of the computation is the order a reader decides in:

1. **α per class** — given, measured, or a documented prior (:mod:`alphagate.plan.priors`);
2. **the policy** — K per concurrency: the engine's batch-size schedule, or one fixed K with
   speculation off above the concurrency where it stops paying; losing K cut by simulation;
3. **predictions** at every level for that policy (paired simulations);
4. **the verdict, the per-class calls and the gate**, all for that policy, over the concurrencies
   from the target to the peak;
5. the engine configuration, memory, and the runbook (:mod:`alphagate.plan.runbook`).
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass
from typing import Literal

from alphagate import theory
from alphagate.core.fmt import num
from alphagate.core.records import Interval
from alphagate.core.traffic import TrafficClass
from alphagate.plan.engine_config import (
    EngineCommand,
    compress_schedule,
    default_draft,
    sglang_flags,
    sglang_launch_argv,
    url_port,
    vllm_serve_argv,
    vllm_speculative_config,
)
from alphagate.plan.predictions import Predictor, plan_levels
from alphagate.plan.priors import prior_for
from alphagate.plan.records import (
    AlphaSource,
    ClassRow,
    Gate,
    LoadRow,
    Memory,
    P99Check,
    Plan,
    PlanRequest,
    Uncertainty,
    Verdict,
    parse_engine_version,
)
from alphagate.plan.runbook import CALIBRATION, calibrate_argv, plan_argv, playbook, risks, stages
from alphagate.sim.predict import MIN_GAIN, model_speedup
from alphagate.sim.uncertainty import CostDesign

__all__ = ["FIXED_RULE", "GATE_MARGIN", "build_plan"]

GATE_MARGIN = 0.05  # safety margin added to the computed break-even α
FIXED_RULE = 0.55  # the common fixed gate "α ≥ 0.55", which vLLM users state in ρ
DYNAMIC_K_SINCE = (0, 32)  # first vLLM release with num_speculative_tokens_per_batch_size
#: The TPOT speedup a gate asks for is the predicted one divided by this (a margin for the
#: step-time model's error at the target), and never more than :data:`TPOT_GATE_CAP`: a gate
#: that asks for the whole predicted gain fails on run-to-run noise.
TPOT_GATE_SLACK = 1.1
TPOT_GATE_CAP = 1.05
#: The shipped K "agrees" with the simulator's best when it reaches this share of its speedup.
K_AGREEMENT = 0.98
#: Share of the plan's levels where the shipped K agrees: high at or above the first, medium at
#: or above the second, low below.
CONFIDENCE_HIGH, CONFIDENCE_MEDIUM = 0.8, 0.5


@dataclass(frozen=True)
class _Cls:
    """A class with its α resolved (the prior's midpoint when unmeasured) and its range."""

    cls: TrafficClass
    low: float
    high: float
    kind: AlphaSource


@dataclass(frozen=True)
class _Policy:
    """K per plan level, and the schedule or fixed K that produces it."""

    levels: list[int]
    k_at: dict[int, int]
    fixed_k: int
    dynamic: bool
    schedule: list[int]  # K per batch size 1..max_num_seqs (dynamic), else []
    cut_at: int | None  # the level from which the simulator turned speculation off
    disable_above: int | None  # fixed K: no speculation above this concurrency


def _resolve_classes(req: PlanRequest) -> list[_Cls]:
    out = []
    for c in req.workload.classes:
        if c.has_alpha:
            kind: AlphaSource = "measured" if c.source.startswith("measured") else "given"
            a = theory.equivalent_alpha(c.conditional(req.k or 3))
            out.append(_Cls(c, a, a, kind))
            continue
        p = prior_for(req.deployment.method, c.name)
        src = (
            f"prior {p.low:.2f}–{p.high:.2f} ({p.note}); Stage 2 must replace it with a measurement"
        )
        out.append(
            _Cls(c.model_copy(update={"alpha": p.mid, "source": src}), p.low, p.high, "prior")
        )
    return out


def _blend(classes: list[_Cls], low: bool = False, high: bool = False) -> tuple[TrafficClass, ...]:
    """The classes at their α (``low``/``high``: priors at that end of their range)."""
    if not (low or high):
        return tuple(c.cls for c in classes)
    return tuple(
        c.cls.model_copy(update={"alpha": c.low if low else c.high, "alpha_by_pos": None})
        if c.kind == "prior"
        else c.cls
        for c in classes
    )


def _intervals(
    pred: Predictor, c: int, k: int, classes: list[_Cls], pool: tuple[TrafficClass, ...]
) -> tuple[Interval, Interval, Interval]:
    """(throughput, TPOT, P99 ratio) intervals of ``pool`` at ``c`` with K = ``k``: the step-time
    constants' ranges by simulation at their corners, widened for α priors by the closed form's
    factor between a prior's ends and its midpoint (at the corners' ends)."""
    thr, tpot, p99 = pred.sim_intervals(c, pool, k)
    names = {x.name for x in pool}
    priors = [x for x in classes if x.kind == "prior" and x.cls.name in names]
    if k == 0 or not priors:
        return thr, tpot, p99
    shares = {x.name: x.share for x in pool}
    ends = [
        tuple(x.model_copy(update={"share": shares[x.name]}) for x in _blend(classes, **end)
              if x.name in names)
        for end in ({"low": True}, {"high": True})
    ]  # fmt: skip
    mid = pred.speedup_spread(pool, k, c)
    lo = pred.speedup_spread(ends[0], k, c).low / mid.low if mid.low > 0 else 1.0
    hi = pred.speedup_spread(ends[1], k, c).high / mid.high if mid.high > 0 else 1.0
    lo, hi = min(1.0, lo), max(1.0, hi)

    def widen(x: Interval) -> Interval:
        return Interval(
            low=None if x.low is None else x.low * lo, high=None if x.high is None else x.high * hi
        )

    return widen(thr), widen(tpot), p99


def _window(policy: _Policy, req: PlanRequest) -> list[int]:
    """The levels the verdict is decided over: target to peak."""
    return [c for c in policy.levels if req.concurrency <= c <= req.peak]


def _cut_losses(
    pred: Predictor, blend: tuple[TrafficClass, ...], levels: list[int], k_at: dict[int, int]
) -> tuple[dict[int, int], int | None]:
    """K per level with speculation off from the first level where the simulator finds its K
    losing, and that level (None: no K loses)."""
    cut = next(
        (c for c in levels if k_at[c] > 0 and pred.sim_speedup(c, blend, k_at[c]) < 1.0), None
    )
    if cut is None:
        return dict(k_at), None
    return {c: 0 if c >= cut else k for c, k in k_at.items()}, cut


def _policy(pred: Predictor, req: PlanRequest, blend: tuple[TrafficClass, ...]) -> _Policy:
    levels = plan_levels(req.concurrency, req.peak)
    version = None if req.engine_version is None else parse_engine_version(req.engine_version)
    dynamic = req.engine == "vllm" and (version is None or version >= DYNAMIC_K_SINCE)
    fixed_k = req.k or pred.paying_k_sim(req.concurrency, blend) or pred.paying_k_sim(1, blend) or 1
    if dynamic:
        schedule = pred.model_schedule(blend)
        k_at, cut = _cut_losses(
            pred, blend, levels, {c: schedule[int(pred.batch(c)) - 1] for c in levels}
        )
        if cut is not None:
            b_cut = int(pred.batch(cut))
            schedule = schedule[: b_cut - 1] + [0] * (len(schedule) - b_cut + 1)
        return _Policy(levels, k_at, fixed_k, True, schedule, cut, None)
    # one fixed K, with speculation off above the concurrency where it stops paying
    cross = pred.crossover(blend, fixed_k)
    disable = None if cross is None else max(1, int(cross))
    k_at, cut = _cut_losses(
        pred,
        blend,
        levels,
        {c: 0 if disable is not None and c > disable else fixed_k for c in levels},
    )
    if cut is not None and (disable is None or disable >= cut):
        below = [c for c in levels if c < cut]
        disable = below[-1] if below else None
    return _Policy(levels, k_at, fixed_k, False, [], cut, disable)


def _rows(pred: Predictor, policy: _Policy, classes: list[_Cls]) -> list[LoadRow]:
    blend = _blend(classes)
    rows = []
    for c in policy.levels:
        k = policy.k_at[c]
        fixed = pred.paired(c, blend, policy.fixed_k)
        on = pred.paired(c, blend, k).spec if k else fixed.baseline
        off = fixed.baseline
        best_k, best_s = pred.best_k_sim(c, blend)
        thr, tpot, p99 = _intervals(pred, c, k, classes, blend)
        rows.append(
            LoadRow(
                concurrency=c,
                k=k,
                throughput_speedup=pred.sim_speedup(c, blend, k),
                itl_p50_off_ms=off.itl_per_token_ms.p50 or 0.0,
                itl_p99_off_ms=off.itl_per_token_ms.p99 or 0.0,
                itl_p50_on_ms=on.itl_per_token_ms.p50 or 0.0,
                itl_p99_on_ms=on.itl_per_token_ms.p99 or 0.0,
                tpot_speedup=pred.paired(c, blend, k).speedup.tpot_mean_speedup if k else 1.0,
                alpha_breakeven=pred.breakeven(k, c),
                fixed_k=policy.fixed_k,
                fixed_k_speedup=pred.sim_speedup(c, blend, policy.fixed_k),
                best_k_sim=best_k,
                best_k_sim_speedup=best_s,
                throughput_speedup_interval=thr,
                tpot_speedup_interval=tpot,
                fixed_k_speedup_interval=pred.scaled_interval(c, blend, policy.fixed_k),
                itl_p99_ratio_interval=p99,
                alpha_breakeven_interval=pred.breakeven_interval(k, c),
                best_k_range=pred.best_k_range(blend, c),
            )
        )
    return rows


def _class_rows(
    pred: Predictor, req: PlanRequest, policy: _Policy, classes: list[_Cls]
) -> list[ClassRow]:
    window = _window(policy, req)
    gate_at = {c: _gate_alpha(pred, policy.k_at[c], c) for c in window if policy.k_at[c] > 0}
    out = []
    for c in classes:
        one = (c.cls.model_copy(update={"share": 1.0}),)
        fails = [
            lvl
            for lvl, gate in gate_at.items()
            if gate >= 1.0 or theory.equivalent_alpha(c.cls.conditional(policy.k_at[lvl])) < gate
        ]
        worst = max(gate_at, default=None)
        out.append(
            ClassRow(
                name=c.cls.name,
                share=c.cls.share,
                alpha=float(c.cls.alpha if c.cls.alpha is not None else c.low),
                alpha_label=c.cls.alpha_label(),
                alpha_by_pos=c.cls.alpha_by_pos,
                alpha_low=c.low,
                alpha_high=c.high,
                alpha_source=c.kind,
                source=c.cls.source,
                speedup_target=pred.model_speedup(
                    one, policy.k_at[req.concurrency], req.concurrency
                ),
                speedup_peak=pred.model_speedup(one, policy.k_at[req.peak], req.peak),
                alpha_gate=None if worst is None else gate_at[worst],
                clears_gate=bool(gate_at) and not fails,
                fails_at_concurrency=min(fails) if fails else None,
                crossover_concurrency=pred.crossover(one, policy.fixed_k),
                speedup_target_interval=_class_interval(
                    pred, c, policy.k_at[req.concurrency], req.concurrency
                ),
                speedup_peak_interval=_class_interval(pred, c, policy.k_at[req.peak], req.peak),
                crossover_concurrency_interval=pred.crossover_interval(one, policy.fixed_k),
            )
        )
    return out


def _pessimistic_breakeven(pred: Predictor, k: int, c: int) -> float | None:
    """The break-even α at the pessimistic end of the ranges (None: no α pays there)."""
    iv = pred.breakeven_interval(k, c)
    return None if iv is None else iv.high


def _gate_alpha(pred: Predictor, k: int, c: int) -> float:
    """The α a class must clear at ``c`` with K = ``k``: the break-even α at the pessimistic end
    of the step-time constants' ranges, and never less than the modelled break-even +
    :data:`GATE_MARGIN` (1: no α pays there)."""
    nominal, pessimistic = pred.breakeven(k, c), _pessimistic_breakeven(pred, k, c)
    if nominal is None or pessimistic is None:
        return 1.0
    return min(1.0, max(nominal + GATE_MARGIN, pessimistic))


def _class_interval(pred: Predictor, c: _Cls, k: int, concurrency: int) -> Interval:
    """One class's closed-form speedup over the constants' ranges and its α prior's."""
    if k == 0:
        return Interval(low=1.0, high=1.0)
    one = c.cls.model_copy(update={"share": 1.0})
    ends = [one]
    if c.kind == "prior":
        ends += [one.model_copy(update={"alpha": a, "alpha_by_pos": None}) for a in (c.low, c.high)]
    spreads = [pred.speedup_spread((x,), k, concurrency) for x in ends]
    return Interval(low=min(x.low for x in spreads), high=max(x.high for x in spreads))


def _routed_speedups(
    pred: Predictor, req: PlanRequest, k: int, classes: list[_Cls], away: list[str]
) -> tuple[float, float]:
    """(speedup of the speculative pool's traffic, fleet-wide speedup with the rest at 1×)."""
    keep = [c.cls for c in classes if c.cls.name not in away]
    if not keep or k == 0:
        return 1.0, 1.0
    total = sum(c.share for c in keep)
    pool = tuple(c.model_copy(update={"share": c.share / total}) for c in keep)
    s_pool = pred.sim_speedup(req.concurrency, pool, k)
    fleet = 1.0 / (total / s_pool + (1.0 - total))
    return s_pool, fleet


def _verdict(
    req: PlanRequest,
    policy: _Policy,
    rows: list[LoadRow],
    classes: list[ClassRow],
    low_gain: float,
    also_away: frozenset[str] = frozenset(),
) -> tuple[Verdict, list[str]]:
    """The verdict and the classes to route away, for the shipped policy (``also_away``: routed
    for their tail, :func:`_p99_check`)."""
    target = next(r for r in rows if r.concurrency == req.concurrency)
    away = [c.name for c in classes if not c.clears_gate or c.name in also_away]
    if target.k == 0 or target.throughput_speedup < MIN_GAIN or len(away) == len(classes):
        return "no-go", []
    if any(c.alpha_source == "prior" for c in classes) and low_gain < MIN_GAIN:
        return "measure first", []
    if away:
        return "go for some classes only", away
    return "go", []


def _reason(
    verdict: Verdict,
    req: PlanRequest,
    policy: _Policy,
    rows: list[LoadRow],
    classes: list[ClassRow],
    headline: float,
    fleet: float,
    low_gain: float,
    p99: P99Check | None = None,
    uncertainty: Uncertainty | None = None,
) -> str:
    c, peak = req.concurrency, req.peak
    by = {r.concurrency: r for r in rows}
    t = by[c]
    if verdict == "no-go" and p99 is not None and not p99.ok:
        bound = (
            f"{p99.budget:g}× the baseline's" if p99.slo_ms is None else
            f"{p99.budget:g}× the baseline's and the {p99.slo_ms:g} ms SLO"
        )  # fmt: skip
        return (
            f"at concurrency {c} speculation (K={p99.k}) gains {t.throughput_speedup:.2f}× "
            f"throughput, but its P99 ITL per token rises {p99.off_ms:.1f} → {p99.on_ms:.1f} ms "
            f"({p99.ratio:.2f}×), past {bound}, at every K and with any class routed away"
        )
    if verdict == "no-go":
        paying = [r.concurrency for r in rows if r.k > 0]
        pays = f"; with this traffic it pays up to concurrency {max(paying)}" if paying else ""
        if t.k == 0:
            unsure = (
                f" {uncertainty.decision_interval.text()}, a range that holds 1×"
                if uncertainty is not None and uncertainty.straddles else ""
            )  # fmt: skip
            return (
                f"no K in 1..{req.k or req.k_max} gains {MIN_GAIN - 1:.0%} at concurrency {c} "
                f"(the best, K={t.best_k_sim}, gives {t.best_k_sim_speedup:.3f}× throughput"
                f"{unsure}){pays}"
            )
        if t.throughput_speedup < MIN_GAIN:
            return (
                f"at concurrency {c} (K={t.k}) the blend gains only {t.throughput_speedup:.2f}× "
                f"throughput, within the model's {MIN_GAIN - 1:.0%} error{pays}"
            )
        worst = min(classes, key=lambda x: x.speedup_target)
        return (
            f"at concurrency {c} (K={t.k}) no class clears the gate α {_a(worst.alpha_gate)} "
            f"(the break-even α at the pessimistic end of the step-time ranges, at least "
            f"{_a(t.alpha_breakeven)} + {GATE_MARGIN}); {worst.name} at α "
            f"{worst.alpha_label} gives {worst.speedup_target:.2f}× throughput{pays}"
        )
    if verdict == "measure first" and uncertainty is not None and uncertainty.straddles:
        iv = uncertainty.decision_interval
        over = "the step-time constants' ranges" + (
            f" and the α priors of {', '.join(uncertainty.alpha_priors)}"
            if uncertainty.alpha_priors else ""
        )  # fmt: skip
        return (
            f"at concurrency {c} (K={t.k}) the predicted speedup is {headline:.2f}× "
            f"{iv.text(suffix='×')}, across 1× over {over}: {uncertainty.settle_text()}"
        )
    if verdict == "measure first":
        return (
            f"with the prior α the blend gains {t.throughput_speedup:.2f}× throughput at "
            f"concurrency {c} (K={t.k}), but at the low end of the priors {low_gain:.2f}×: "
            "measure α before turning it on"
        )
    rng = "" if uncertainty is None else f" {uncertainty.decision_interval.text()}"
    peak_txt = ""
    if peak != c:
        p = by[peak]
        peak_s = (
            f"{p.throughput_speedup:.2f}×" if uncertainty is None
            else f"{uncertainty.peak_speedup:.2f}× {uncertainty.peak_interval.text()}"
        )  # fmt: skip
        peak_txt = (
            f"; at the peak {peak} it runs K={p.k} ({peak_s})"
            if p.k
            else f"; at the peak {peak} speculation is off (K=0)"
        )
    if verdict == "go for some classes only":
        bad = [x for x in classes if not x.clears_gate]
        names = ", ".join(
            f"{x.name} (α {x.alpha_label}, gate {_a(x.alpha_gate)} at concurrency {x.fails_at_concurrency})"
            for x in bad
        )
        return (
            f"{headline:.2f}×{rng} higher throughput at concurrency {c} (K={t.k}) for the classes "
            f"that clear the gate ({fleet:.2f}× fleet-wide); route {names} without speculation"
            f"{peak_txt}"
        )
    return f"{headline:.2f}×{rng} higher throughput at concurrency {c} (K={t.k}){peak_txt}"


def _a(x: float | None) -> str:
    return num(x)


def _gate(pred: Predictor, req: PlanRequest, policy: _Policy, rows: list[LoadRow]) -> Gate | None:
    """Thresholds at the highest concurrency (target..peak) where the policy speculates."""
    on = [c for c in _window(policy, req) if policy.k_at[c] > 0]
    if not on:
        return None
    c = max(on)
    k = policy.k_at[c]
    target = next(r for r in rows if r.concurrency == req.concurrency)
    be = _pessimistic_breakeven(pred, k, c)
    be_v = 1.0 if be is None else be
    tpot = target.tpot_speedup or 1.0
    tpot_low = target.tpot_speedup_interval.low if target.tpot_speedup_interval else None
    a = _gate_alpha(pred, k, c)
    return Gate(
        concurrency=c,
        k=k,
        alpha_breakeven=be_v,
        alpha_min=a,
        draft_acceptance_rate_min=float(theory.draft_acceptance_rate(a, k)),
        mean_acceptance_length_min=float(theory.mean_acceptance_length(a, k)),
        quantity_gated=(
            "draft acceptance rate ρ (accepted ÷ drafted, what vLLM reports), "
            "with the conditional α it implies"
        ),
        fixed_rule_alpha=FIXED_RULE,
        fixed_rule_draft_acceptance_rate=float(theory.draft_acceptance_rate(FIXED_RULE, k)),
        min_tpot_speedup=min(
            TPOT_GATE_CAP, tpot / TPOT_GATE_SLACK, *([tpot_low] if tpot_low else [])
        ),
        min_itl_per_token_p99_speedup=1.0 / (req.p99_budget or P99_NOISE),
        p99_budget=req.p99_budget or P99_NOISE,
        p99_budget_source=(
            f"--p99-budget {req.p99_budget:g}"
            if req.p99_budget
            else f"not worse than the baseline's beyond the run-to-run noise ({P99_NOISE - 1:.0%})"
        ),
        max_itl_per_token_p99_ms=req.slo_p99_itl_ms,
    )


def _change_verdict(
    pred: Predictor,
    req: PlanRequest,
    verdict: Verdict,
    policy: _Policy,
    classes: list[ClassRow],
    p99: P99Check | None = None,
) -> list[str]:
    """What would turn a no-go or measure-first plan, with the numbers."""
    if verdict not in ("no-go", "measure first"):
        return []
    c = req.concurrency
    out = []
    if p99 is not None and not p99.ok:
        need = math.ceil(p99.ratio * 100) / 100
        out.append(
            f"a P99 budget of {need:g}× the baseline's (--p99-budget {need:g}) would ship K={p99.k} "
            f"at concurrency {c}, if the tail matters less than the {_speed(pred, c, classes, p99.k):.2f}× "
            "throughput"
        )
    needs = [(k, _gate_alpha(pred, k, c)) for k in range(1, (req.k or req.k_max) + 1)]
    reachable = [(k, a) for k, a in needs if a < 1.0]
    if p99 is not None and not p99.ok:
        pass  # speculation pays here: no α is missing, only the tail
    elif reachable:
        k, a = min(reachable, key=lambda x: x[1])
        out.append(
            f"a measured α ≥ {a:.2f} per class (ρ ≥ {float(theory.draft_acceptance_rate(a, k)):.3f} "
            f"at K={k}) would make speculation pay at concurrency {c}"
        )
    else:
        out.append(f"no α makes speculation pay at concurrency {c} on this deployment")
    paying = [r for r in policy.levels if policy.k_at[r] > 0]
    if paying:
        out.append(
            f"at the α given, speculation pays up to concurrency {max(paying)} "
            f"(K={policy.k_at[max(paying)]}): a speculative pool run at or below it would gain"
        )
    for x in classes:
        if x.alpha_source == "prior":
            out.append(
                f"measure {x.name}'s α (Stage 2): its prior spans {x.alpha_low:.2f}–{x.alpha_high:.2f}"
            )
    return out


def _speed(pred: Predictor, c: int, classes: list[ClassRow], k: int) -> float:
    blend = tuple(TrafficClass(name=x.name, share=x.share, alpha=x.alpha) for x in classes)
    return pred.sim_speedup(c, blend, k)


def _memory(pred: Predictor) -> Memory:
    r = pred.resolved
    d = r.draft_footprint
    lost = max(0, r.kv_capacity_tokens_without_draft - r.kv_capacity_tokens)
    mean_seq = pred.workload.mean_sequence_tokens()
    return Memory(
        draft_name=d.name if d else "n-gram lookup (no weights)",
        draft_params=d.params if d else 0,
        draft_weight_bytes=d.weight_bytes if d else 0.0,
        draft_kv_bytes_per_token=d.kv_bytes_per_token if d else 0.0,
        target_kv_bytes_per_token=r.target_footprint.kv_bytes_per_token,
        kv_tokens_without_draft=r.kv_capacity_tokens_without_draft,
        kv_tokens_with_draft=r.kv_capacity_tokens,
        kv_tokens_lost=lost,
        sequences_lost=lost / mean_seq,
        mean_sequence_tokens=mean_seq,
    )


def _schedule_confidence(policy: _Policy, rows: list[LoadRow]) -> tuple[str, float]:
    """How often the shipped K is the simulator's best (within 2%) at the plan's levels.

    A K that loses (speedup < 1) never counts as agreement, nor does K = 0 where a K gains.
    """
    agree = 0
    for r in rows:
        if r.k == 0:
            agree += int(r.best_k_sim_speedup < MIN_GAIN)
        else:
            agree += int(
                r.throughput_speedup >= 1.0
                and r.throughput_speedup >= K_AGREEMENT * r.best_k_sim_speedup
            )
    share = agree / len(rows)
    level = (
        "high" if share >= CONFIDENCE_HIGH else "medium" if share >= CONFIDENCE_MEDIUM else "low"
    )
    return level, share


def _policy_text(policy: _Policy, req: PlanRequest, verdict: Verdict) -> str:
    if all(k == 0 for k in policy.k_at.values()):
        return "no speculation (K = 0 at every concurrency)"
    if verdict == "no-go":
        return f"no speculation at concurrency {req.concurrency}"
    if policy.dynamic:
        ranges = compress_schedule(policy.schedule)
        return "K by batch size: " + ", ".join(
            f"{k} at {lo}–{hi}" if lo != hi else f"{k} at {lo}" for lo, hi, k in ranges
        )
    off = f", off above concurrency {policy.disable_above}" if policy.disable_above else ""
    return f"K = {policy.fixed_k}{off}"


#: the P99 ITL-per-token ratio (candidate ÷ baseline) a gate allows without a budget: the
#: run-to-run noise an alternated A/B of a few runs resolves, no more
P99_NOISE = 1.05


def _pool(classes: list[_Cls], away: set[str] | list[str]) -> tuple[TrafficClass, ...]:
    keep = [c.cls for c in classes if c.cls.name not in away]
    total = sum(c.share for c in keep)
    return tuple(c.model_copy(update={"share": c.share / total}) for c in keep)


def _tail(
    pred: Predictor, c: int, pool: tuple[TrafficClass, ...], k: int
) -> tuple[float, float, float]:
    """(P99 off, P99 on, throughput speedup) of a pool at concurrency ``c`` with K = ``k``."""
    run = pred.paired(c, pool, k)
    return (
        run.baseline.itl_per_token_ms.p99 or 0.0,
        run.spec.itl_per_token_ms.p99 or 0.0,
        pred.sim_speedup(c, pool, k),
    )


def _p99_check(
    pred: Predictor, req: PlanRequest, policy: _Policy, classes: list[_Cls], away: list[str]
) -> tuple[P99Check | None, int | None, list[str]]:
    """The recipe's tail watch at the target: the P99 ITL per token of the shipped pool must not
    be worse than without speculation (``--p99-budget`` allows a ratio above 1, and
    ``--slo-p99-itl-ms`` bounds it in ms). When it is, the plan ships what keeps it: the largest
    paying K below the policy's at the target, else routing the lowest-α classes away, else
    nothing (the verdict turns). Returns the check, the K to cap the policy at from the target up
    (None: unchanged), and the classes to route away for their tail."""
    c = req.concurrency
    k = policy.k_at[c]
    if k == 0 or len(away) == len(classes):
        return None, None, []
    budget = req.p99_budget or 1.0
    slo = req.slo_p99_itl_ms

    def ok(off: float, on: float, gain: float) -> bool:
        return gain >= MIN_GAIN and on <= budget * off + 1e-9 and (slo is None or on <= slo)

    def check(off: float, on: float, kk: int, fine: bool, action: str) -> P99Check:
        return P99Check(
            concurrency=c, k=kk, off_ms=off, on_ms=on, ratio=on / off if off > 0 else 1.0,
            budget=budget, slo_ms=slo, ok=fine, action=action,
        )  # fmt: skip

    off, on, _ = _tail(pred, c, _pool(classes, away), k)
    if on <= budget * off + 1e-9 and (slo is None or on <= slo):
        return check(off, on, k, True, ""), None, []
    first = (off, on)
    tries = [(kk, *_tail(pred, c, _pool(classes, away), kk)) for kk in range(k - 1, 0, -1)]
    good = [t for t in tries if ok(*t[1:])]
    if good:
        kk, o, n, _ = max(good, key=lambda t: t[3])
        return (
            check(o, n, kk, True, f"K lowered from {k} to {kk} at concurrency {c} and above"),
            kk,
            [],
        )
    kept = sorted((x for x in classes if x.cls.name not in away), key=lambda x: x.cls.alpha or 0)
    extra: list[str] = []
    for x in kept[:-1]:
        extra.append(x.cls.name)
        for kk in range(k, 0, -1):
            o, n, g = _tail(pred, c, _pool(classes, [*away, *extra]), kk)
            if ok(o, n, g):
                names = ", ".join(extra)
                return (
                    check(o, n, kk, True, f"{names} routed without speculation for the tail"),
                    kk if kk != k else None,
                    extra,
                )
    return (
        check(*first, k, False, f"no K in 1..{k} and no routing keeps it within the budget"),
        None,
        [],
    )


def _cap_policy(policy: _Policy, pred: Predictor, c: int, k_cap: int) -> _Policy:
    """The policy with K at most ``k_cap`` from concurrency ``c`` up (the schedule from its
    batch size up)."""
    k_at = {lvl: min(k, k_cap) if lvl >= c else k for lvl, k in policy.k_at.items()}
    b = int(pred.batch(c))
    schedule = [min(k, k_cap) if i + 1 >= b else k for i, k in enumerate(policy.schedule)]
    fixed = policy.fixed_k if policy.dynamic else min(policy.fixed_k, k_cap)
    return _Policy(
        policy.levels, k_at, fixed, policy.dynamic, schedule, policy.cut_at, policy.disable_above
    )


def _qualifiers(
    req: PlanRequest, verdict: Verdict, classes: list[ClassRow], p99: P99Check | None
) -> list[str]:
    """What a GO rests on that is not measured, or that the user allowed."""
    out = []
    if verdict in ("go", "go for some classes only"):
        priors = [c.name for c in classes if c.alpha_source == "prior"]
        if priors:
            out.append(f"on prior α for {', '.join(priors)}: Stage 2 measures it before the gate")
    if p99 is not None and p99.ok and p99.action:
        out.append(p99.action + " to keep the P99 ITL per token")
    if p99 is not None and not p99.ok and verdict == "measure first":
        out.append(
            f"P99 ITL per token predicted {p99.ratio:.2f}× the baseline's at concurrency "
            f"{p99.concurrency} at these α: the gate will hold it to {p99.budget:g}×"
        )
    if p99 is not None and p99.ok and p99.ratio > 1.0 + 1e-9:
        out.append(
            f"P99 ITL per token {p99.ratio:.2f}× the baseline's at concurrency {p99.concurrency}, "
            f"within --p99-budget {p99.budget:g}"
        )
    return out


def _three_way(
    verdict: Verdict,
    decision: Interval,
    rows: list[LoadRow],
    req: PlanRequest,
    p99: P99Check | None,
) -> Verdict:
    """GO / NO-GO only where the interval at the target is clear of 1×: a GO whose interval
    reaches below 1×, or a NO-GO (a gain within the model's error, or classes below the gate's
    pessimistic break-even) whose interval reaches above it, is MEASURE FIRST. A NO-GO for the
    tail stays."""
    if verdict in ("go", "go for some classes only") and decision.low is not None:
        return "measure first" if decision.low < 1.0 else verdict
    t = next(r for r in rows if r.concurrency == req.concurrency)
    iv = t.throughput_speedup_interval
    if (
        verdict == "no-go" and t.k > 0 and (p99 is None or p99.ok)
        and iv is not None and iv.straddles(1.0)
    ):  # fmt: skip
        return "measure first"
    return verdict


def _shipped_interval(
    pred: Predictor, req: PlanRequest, k: int, classes: list[_Cls], away: list[str]
) -> Interval:
    """Throughput speedup of what is shipped at the target (the pool left after routing), over
    the ranges."""
    if k == 0:
        return Interval(low=1.0, high=1.0)
    return _intervals(pred, req.concurrency, k, classes, _pool(classes, away))[0]


def _uncertainty(
    pred: Predictor,
    req: PlanRequest,
    policy: _Policy,
    rows: list[LoadRow],
    classes: list[_Cls],
    away: list[str],
    decision: Interval,
) -> Uncertainty:
    """The ranges, the interval the verdict reads, and, when it (or the peak's) holds 1×, the
    cheapest measurement that would settle it with the interval it would leave there."""
    c = req.concurrency
    priors = [x.cls.name for x in classes if x.kind == "prior"]
    straddles = decision.straddles(1.0)
    pool = _pool(classes, away)
    k_peak = policy.k_at[req.peak]
    peak_iv = (
        decision if req.peak == c
        else _intervals(pred, req.peak, k_peak, classes, pool)[0] if k_peak
        else Interval(low=1.0, high=1.0)
    )  # fmt: skip
    peak_value = pred.sim_speedup(req.peak, pool, k_peak)
    at = c if straddles else req.peak
    k = policy.k_at[at]
    t = next(r for r in rows if r.concurrency == c)
    if (k == 0 and at == c) or (t.k == 0 and t.best_k_sim_speedup > 1.0):
        # speculation is off at the target: is the best K's gain clear of 1× (K = 0 there)?
        best = pred.sim_intervals(c, pool, t.best_k_sim)[0]
        if best.straddles(1.0):
            at, k, straddles, decision = c, t.best_k_sim, True, best
    settle: Literal["measure alpha", "calibrate", "ab"] | None = None
    settled: Interval | None = None
    commands: list[str] = []
    if k > 0 and (straddles or peak_iv.straddles(1.0)):
        constants_only = pred.sim_intervals(at, pool, k)[0]
        if priors and not constants_only.straddles(1.0):
            settle, settled = "measure alpha", constants_only
        elif pred.ranges.origin == "calibration":
            # calibrated already: calibrating again the same way narrows nothing
            settle = "ab"
        else:
            settle = "calibrate"
            # a calibration that determines each coefficient leaves about ± CALIBRATED_SPREAD
            ranges = pred.ranges.narrowed()
            lo, hi = (
                CostDesign(pred.cost, ranges)
                .spread(lambda m: model_speedup(m, pool, k, pred.batch(at), pred.workload))
                .ratio()
            )
            r_lo, r_hi = ranges.residual_factors()
            lo, hi = lo * r_lo, hi * r_hi
            sim = pred.sim_speedup(at, pool, k)
            settled = Interval(low=sim * lo, high=sim * hi)
            replan = plan_argv(
                req, alpha_from=[], out=f"{req.out_stem}-calibrated.md", calibration=CALIBRATION
            )
            commands = [shlex.join(calibrate_argv(req, [c, req.peak])), shlex.join(replan)]
    return Uncertainty(
        origin=pred.ranges.origin,
        ranges=list(pred.ranges.varying()),
        alpha_priors=priors,
        decision_concurrency=c,
        decision_interval=decision,
        peak_interval=peak_iv,
        peak_speedup=peak_value,
        straddles=straddles,
        settle_at=at if settle else None,
        settle_by=settle,
        settle_commands=commands,
        settled_interval=settled,
    )


def build_plan(req: PlanRequest) -> Plan:
    """Compute the plan for ``req`` (raises SpecError / ConfigError on impossible input, and on
    a calibration profile fitted for another deployment)."""
    if req.calibration is not None:
        req.calibration.check_deployment(req.deployment)
    pred = Predictor(req)
    classes = _resolve_classes(req)
    blend = _blend(classes)
    policy = _policy(pred, req, blend)
    rows = _rows(pred, policy, classes)
    class_rows = _class_rows(pred, req, policy, classes)
    k_t = policy.k_at[req.concurrency]
    low_gain = pred.sim_speedup(req.concurrency, _blend(classes, low=True), k_t)
    verdict, away = _verdict(req, policy, rows, class_rows, low_gain)
    p99: P99Check | None = None
    if verdict != "no-go":
        p99, k_cap, tail_away = _p99_check(pred, req, policy, classes, away)
        if k_cap is not None:
            policy = _cap_policy(policy, pred, req.concurrency, k_cap)
        if k_cap is not None or tail_away:
            rows = _rows(pred, policy, classes)
            class_rows = _class_rows(pred, req, policy, classes)
            k_t = policy.k_at[req.concurrency]
            low_gain = pred.sim_speedup(req.concurrency, _blend(classes, low=True), k_t)
            verdict, away = _verdict(req, policy, rows, class_rows, low_gain, frozenset(tail_away))
        if p99 is not None and not p99.ok and verdict != "measure first":
            verdict, away = "no-go", []
    headline, fleet = _routed_speedups(pred, req, k_t, classes, away)
    if not away:
        headline = fleet = pred.sim_speedup(req.concurrency, blend, k_t)
    decision = _shipped_interval(pred, req, k_t, classes, away)
    verdict = _three_way(verdict, decision, rows, req, p99)
    uncertainty = _uncertainty(pred, req, policy, rows, classes, away, decision)
    naive = sum(c.share * c.alpha for c in class_rows)
    by = {r.concurrency: r for r in rows}
    drafter = req.deployment.drafter
    draft = drafter.checkpoint or default_draft(drafter.method, req.deployment.model)
    k_top = max([1, *policy.schedule, *policy.k_at.values()])
    schedule = compress_schedule(policy.schedule) if policy.dynamic else []
    confidence, agreement = _schedule_confidence(policy, rows)
    spec_cfg = vllm_speculative_config(
        drafter, draft, k_top, pred.resolved.tp, schedule or None, pred.resolved.draft_tp
    )
    static_cfg = vllm_speculative_config(
        drafter, draft, policy.fixed_k, pred.resolved.tp, None, pred.resolved.draft_tp
    )
    flags = sglang_flags(drafter, draft, policy.fixed_k)
    engine_cmd = EngineCommand(pred.resolved, req.served_model)
    serve_baseline, serve_candidate = _serve_commands(
        req, engine_cmd, spec_cfg if policy.dynamic else static_cfg, flags
    )
    plan = Plan(
        verdict=verdict,
        qualifiers=_qualifiers(req, verdict, class_rows, p99),
        reason=_reason(
            verdict, req, policy, rows, class_rows, headline, fleet, low_gain, p99, uncertainty
        ),
        change_verdict=_change_verdict(pred, req, verdict, policy, class_rows, p99),
        deployment=pred.resolved.describe(),
        deployment_detail=pred.resolved.summary(),
        method=drafter.method,
        draft=draft,
        engine=req.engine,
        engine_version=req.engine_version,
        policy=_policy_text(policy, req, verdict),
        fixed_k=policy.fixed_k,
        concurrency=req.concurrency,
        peak_concurrency=req.peak,
        slo_p99_itl_ms=req.slo_p99_itl_ms,
        classes=class_rows,
        routed_away=away,
        rows=rows,
        headline_speedup=headline,
        headline_interval=decision,
        uncertainty=uncertainty,
        fleet_speedup=fleet,
        blend_speedup_target=by[req.concurrency].throughput_speedup,
        blend_speedup_peak=by[req.peak].throughput_speedup,
        blend_speedup_target_closed_form=pred.model_speedup(blend, k_t, req.concurrency),
        naive_mean_alpha=naive,
        naive_alpha_speedup_target=pred.model_speedup(
            (TrafficClass(name="naive", share=1.0, alpha=naive),), k_t, req.concurrency
        ),
        blend_crossover_concurrency=pred.crossover(blend, policy.fixed_k),
        blend_crossover_interval=pred.crossover_interval(blend, policy.fixed_k),
        crossover_search_max=pred.b_max,
        memory=_memory(pred),
        speculative_config=spec_cfg,
        speculative_config_static=static_cfg,
        dynamic_k_supported=policy.dynamic,
        batch_schedule=schedule,
        schedule_confidence=confidence,
        schedule_agreement=agreement,
        disable_above_concurrency=policy.disable_above,
        sglang_flags=flags,
        serve_baseline=serve_baseline,
        serve_candidate=[] if verdict == "no-go" else serve_candidate,
        served_model=engine_cmd.served_name,
        checkpoint=engine_cmd.checkpoint,
        p99=p99,
        gate=None if verdict == "no-go" else _gate(pred, req, policy, rows),
        stages=[],
        risks=[],
        playbook=[],
        uses_priors=any(c.alpha_source == "prior" for c in class_rows),
        calibration=_calibration_notes(req, policy),
    )
    return plan.model_copy(
        update={
            "stages": stages(req, plan),
            "risks": risks(req, pred, plan),
            "playbook": playbook(req, pred, plan),
        }
    )


def _serve_commands(
    req: PlanRequest, cmd: EngineCommand, spec: dict[str, object], flags: list[str]
) -> tuple[list[str], list[str]]:
    """The engine command of the baseline server and of the speculative staging replica."""
    base_port = url_port(req.url, 8000)
    cand_port = url_port(req.staging_url, base_port + 1)
    if req.engine == "sglang":
        return sglang_launch_argv(cmd, base_port, None), sglang_launch_argv(cmd, cand_port, flags)
    return (
        vllm_serve_argv(cmd, base_port, None),
        vllm_serve_argv(cmd, cand_port, spec, per_request_metrics=req.per_request_counts),
    )


def _calibration_notes(req: PlanRequest, policy: _Policy) -> list[str]:
    """What the profile was fitted on, and where the target, the peak or their K lie outside it."""
    prof = req.calibration
    if prof is None:
        return []
    notes = [prof.summary()]
    for c in dict.fromkeys((req.concurrency, req.peak)):
        note = prof.range_note(c, policy.k_at.get(c))
        if note:
            notes.append(note)
    return notes
