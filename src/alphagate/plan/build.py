"""Build a staged rollout plan: every number computed for the user's model, GPU, traffic and load.

The order of the computation is the order a reader decides in:

1. **α per class** — given, measured, or a documented prior (:mod:`alphagate.plan.priors`);
2. **the policy** — K per concurrency: the engine's batch-size schedule, or one fixed K with
   speculation off above the concurrency where it stops paying; losing K cut by simulation;
3. **predictions** at every level for that policy (paired simulations);
4. **the verdict, the per-class calls and the gate**, all for that policy, over the concurrencies
   from the target to the peak, and why, as records (:mod:`alphagate.plan.reasons`; the sentences
   are composed from them in :mod:`alphagate.report.reasons`);
5. the engine configuration, memory, and the runbook (:mod:`alphagate.plan.runbook`).
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import alphagate.plan.reasons as why
from alphagate import theory
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
    TreePlan,
    Uncertainty,
    Verdict,
    parse_engine_version,
)
from alphagate.plan.runbook import (
    CALIBRATION,
    HEAD_STAGE,
    alpha_text,
    below_gate,
    calibrate_argv,
    plan_argv,
    playbook,
    policy_text,
    risks,
    stages,
)
from alphagate.plan.trees import plan_trees, tree_policy_text
from alphagate.sim.predict import MIN_GAIN, model_speedup
from alphagate.sim.uncertainty import CostDesign
from alphagate.specs.deployment import ArmCaps

__all__ = ["FIXED_RULE", "GATE_MARGIN", "build_plan"]

#: Added to the modelled break-even α to make the gate α: about twice the 95% half-width
#: (± 0.02–0.03) of an α measured over the 2,000 drafts Stage 2 asks for, so that a class does
#: not clear the gate on measurement noise alone.
GATE_MARGIN = 0.05
#: The common fixed gate "α ≥ 0.55" (vLLM users state it in ρ), shown beside the computed one.
FIXED_RULE = 0.55
#: The first vLLM release with ``num_speculative_tokens_per_batch_size``: from it on the plan
#: ships a K per batch size, before it one fixed K.
DYNAMIC_K_SINCE = (0, 32)
#: The TPOT speedup a gate asks for is the predicted one divided by this (a margin for the
#: step-time model's error at the target), and never more than :data:`TPOT_GATE_CAP`: a gate
#: that asks for the whole predicted gain fails on run-to-run noise.
TPOT_GATE_SLACK = 1.1
TPOT_GATE_CAP = 1.05
#: The P99 ITL-per-token ratio (candidate ÷ baseline) a gate allows without ``--p99-budget``:
#: the run-to-run noise an alternated A/B of a few runs resolves, no more.
P99_NOISE = 1.05
#: The shipped K "agrees" with the simulator's best when it reaches this share of its speedup:
#: a K within 2% of the best is within the model's error (:data:`~alphagate.sim.predict.MIN_GAIN`).
K_AGREEMENT = 0.98
#: Share of the plan's levels where the shipped K agrees, for the schedule's confidence: high at
#: or above the first (with the six to eight levels of a plan's table, one level off), medium at
#: or above the second (half of them), low below.
CONFIDENCE_HIGH, CONFIDENCE_MEDIUM = 0.8, 0.5
#: Slack for comparing products of floats: a P99 with the budget's bound, a ratio with 1.
_FLOAT_SLACK = 1e-9
#: Without ``--k``, the K at which a class given α per position is summed up as one α, for the
#: figures that take one α per class (``ClassRow.alpha``, the naive mean α, the throughput quoted
#: beside a P99 budget); the predictions themselves use every position's α.
_SUMMARY_K = 3


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
            a = theory.equivalent_alpha(c.conditional(req.k or _SUMMARY_K))
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


def _at(rows: list[LoadRow], concurrency: int) -> LoadRow:
    """The row of one concurrency of the plan's table."""
    return next(r for r in rows if r.concurrency == concurrency)


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
    # suffix decoding ships one cap: vLLM's proposer asserts that a step schedules exactly
    # num_speculative_tokens (vllm/v1/spec_decode/suffix_decoding.py), so no schedule by batch
    dynamic = (
        req.engine == "vllm"
        and (version is None or version >= DYNAMIC_K_SINCE)
        and pred.suffix_cap is None
    )
    fixed_k = (
        req.k
        or pred.suffix_cap
        or pred.paying_k_sim(req.concurrency, blend)
        or pred.paying_k_sim(1, blend)
        or 1
    )
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
        # K = 0: the launched speculative server with its drafts off (its drafter's first
        # forward still runs, its KV still held), or a pool without speculation
        drafting = k > 0 or pred.off_simulated()
        on = pred.paired(c, blend, k).spec if drafting else fixed.baseline
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
                tpot_speedup=pred.paired(c, blend, k).speedup.tpot_mean_speedup
                if drafting
                else 1.0,
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
                batch=ArmCaps(
                    baseline=pred.arm_batch(c, 0),
                    speculative=pred.arm_batch(c, k) if k else min(c, pred.off_cap()),
                ),
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
    if not keep or (k == 0 and not pred.off_simulated()):
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
    target = _at(rows, req.concurrency)
    away = [c.name for c in classes if not c.clears_gate or c.name in also_away]
    if target.k == 0 or target.throughput_speedup < MIN_GAIN or len(away) == len(classes):
        return "no-go", []
    if any(c.alpha_source == "prior" for c in classes) and low_gain < MIN_GAIN:
        return "measure first", []
    if away:
        return "go for some classes only", away
    return "go", []


class _Evaluation(NamedTuple):
    """The policy's figures at every level and per class, and the verdict they give before the
    ranges are read."""

    policy: _Policy
    rows: list[LoadRow]
    classes: list[ClassRow]
    low_gain: float  # the blend's speedup at the target with the α priors at their low ends
    verdict: Verdict
    away: list[str]


def _launched(policy: _Policy) -> int:
    """The K the speculative server starts with where a batch-size schedule switches its drafts
    off at some levels, so that server runs them; 0 for one fixed K, whose levels past the
    crossover are routed to a pool without speculation, and for a policy that never drafts."""
    if not policy.dynamic:
        return 0
    return max([0, *policy.schedule, *policy.k_at.values()])


def _evaluate(
    pred: Predictor,
    req: PlanRequest,
    policy: _Policy,
    classes: list[_Cls],
    also_away: frozenset[str] = frozenset(),
) -> _Evaluation:
    """Predict ``policy`` at every level and per class, and decide (:func:`_verdict`)."""
    pred.launch(_launched(policy))
    rows = _rows(pred, policy, classes)
    class_rows = _class_rows(pred, req, policy, classes)
    k_t = policy.k_at[req.concurrency]
    low_gain = pred.sim_speedup(req.concurrency, _blend(classes, low=True), k_t)
    verdict, away = _verdict(req, policy, rows, class_rows, low_gain, also_away)
    return _Evaluation(policy, rows, class_rows, low_gain, verdict, away)


def _decide(
    pred: Predictor, req: PlanRequest, classes: list[_Cls]
) -> tuple[_Evaluation, _TailWatch]:
    """The policy and its verdict, after the tail watch at the target has lowered K or routed
    classes away where that keeps the P99 within the budget (and turned the verdict where
    nothing does)."""
    ev = _evaluate(pred, req, _policy(pred, req, _blend(classes)), classes)
    if ev.verdict == "no-go":
        return ev, _NO_WATCH
    tail = _p99_check(pred, req, ev.policy, classes, ev.away)
    if tail.k_cap is not None or tail.routed:
        policy = ev.policy
        if tail.k_cap is not None:
            policy = _cap_policy(policy, pred, req.concurrency, tail.k_cap)
        ev = _evaluate(pred, req, policy, classes, frozenset(tail.routed))
    if tail.check is not None and not tail.check.ok and ev.verdict != "measure first":
        ev = ev._replace(verdict="no-go", away=[])
    return ev, tail


class _Outcome(NamedTuple):
    """What is shipped at the target, read against the ranges."""

    verdict: Verdict
    headline: float  # throughput speedup of the pool left after routing
    fleet: float  # the same over all traffic, the routed classes at 1×
    decision: Interval  # the headline's range
    uncertainty: Uncertainty


def _ship(
    pred: Predictor, req: PlanRequest, classes: list[_Cls], ev: _Evaluation, p99: P99Check | None
) -> _Outcome:
    """The headline and fleet speedups of what is shipped, the verdict once their range is read
    (:func:`_three_way`), and what would narrow that range."""
    k_t = ev.policy.k_at[req.concurrency]
    headline, fleet = _routed_speedups(pred, req, k_t, classes, ev.away)
    if not ev.away:
        headline = fleet = pred.sim_speedup(req.concurrency, _blend(classes), k_t)
    decision = _shipped_interval(pred, req, k_t, classes, ev.away)
    verdict = _three_way(ev.verdict, decision, ev.rows, req, p99)
    uncertainty = _uncertainty(pred, req, ev.policy, ev.rows, classes, ev.away, decision)
    return _Outcome(verdict, headline, fleet, decision, uncertainty)


def _verdict_reason(
    req: PlanRequest, ev: _Evaluation, out: _Outcome, p99: P99Check | None
) -> why.VerdictReason:
    """Why the verdict, with the figures its sentence quotes."""
    c = req.concurrency
    t = _at(ev.rows, c)
    u = out.uncertainty
    if out.verdict == "no-go":
        return _no_go_reason(req, ev, u, p99)
    if out.verdict == "measure first":
        if not u.straddles:
            return why.PriorLowEnd(
                concurrency=c,
                k=t.k,
                throughput_speedup=t.throughput_speedup,
                low_end_speedup=ev.low_gain,
            )
        return why.RangeHoldsOne(
            concurrency=c,
            k=t.k,
            speedup=out.headline,
            interval=u.decision_interval,
            alpha_priors=list(u.alpha_priors),
            settle=u.settle,
        )
    peak = None
    if req.peak != c:
        p = _at(ev.rows, req.peak)
        peak = why.PeakRun(
            concurrency=req.peak, k=p.k, speedup=u.peak_speedup, interval=u.peak_interval
        )
    gain = why.Shipped(
        concurrency=c, k=t.k, speedup=out.headline, interval=u.decision_interval, peak=peak
    )
    if out.verdict == "go":
        return gain
    routed = [
        why.RoutedClass(
            name=x.name,
            alpha_label=x.alpha_label,
            gate_alpha=x.alpha_gate,
            fails_at_concurrency=x.fails_at_concurrency,
        )
        for x in ev.classes
        if not x.clears_gate
    ]
    return why.ShippedForSome(
        **gain.model_dump(exclude={"kind"}), fleet_speedup=out.fleet, routed=routed
    )


def _no_go_reason(
    req: PlanRequest, ev: _Evaluation, u: Uncertainty, p99: P99Check | None
) -> why.VerdictReason:
    """Why NO-GO: the tail, no paying K, a gain within the model's error, or the gate."""
    c = req.concurrency
    t = _at(ev.rows, c)
    if p99 is not None and not p99.ok:
        return why.TailPastBudget(
            concurrency=c,
            k=p99.k,
            throughput_speedup=t.throughput_speedup,
            off_ms=p99.off_ms,
            on_ms=p99.on_ms,
            ratio=p99.ratio,
            budget=p99.budget,
            slo_ms=p99.slo_ms,
        )
    pays_up_to = max((r.concurrency for r in ev.rows if r.k > 0), default=None)
    if t.k == 0:
        return why.NoKPays(
            concurrency=c,
            k_max=req.k or req.k_max,
            min_gain=MIN_GAIN,
            best_k=t.best_k_sim,
            best_speedup=t.best_k_sim_speedup,
            best_interval=u.decision_interval if u.straddles else None,
            pays_up_to=pays_up_to,
        )
    if t.throughput_speedup < MIN_GAIN:
        return why.GainWithinError(
            concurrency=c,
            k=t.k,
            throughput_speedup=t.throughput_speedup,
            min_gain=MIN_GAIN,
            pays_up_to=pays_up_to,
        )
    worst = min(ev.classes, key=lambda x: x.speedup_target)
    return why.NoClassClearsGate(
        concurrency=c,
        k=t.k,
        gate_alpha=worst.alpha_gate,
        alpha_breakeven=t.alpha_breakeven,
        margin=GATE_MARGIN,
        class_name=worst.name,
        alpha_label=worst.alpha_label,
        speedup=worst.speedup_target,
        pays_up_to=pays_up_to,
    )


def _changes(
    pred: Predictor, req: PlanRequest, verdict: Verdict, ev: _Evaluation, p99: P99Check | None
) -> list[why.VerdictChange]:
    """What would turn a NO-GO or MEASURE FIRST plan: a P99 budget where only the tail stops it
    (speculation pays there), else the α that would pay; where the policy pays; the priors to
    measure. Under any verdict, a class below its gate: a head trained on its traffic."""
    heads: list[why.VerdictChange] = list(_heads(req, verdict, ev.classes))
    if verdict not in ("no-go", "measure first"):
        return heads
    c = req.concurrency
    out: list[why.VerdictChange] = []
    if p99 is not None and not p99.ok:
        need = math.ceil(p99.ratio * 100) / 100  # the smallest budget, as --p99-budget takes it
        speed = _speed(pred, c, ev.classes, p99.k)
        out.append(why.P99Budget(budget=need, k=p99.k, concurrency=c, throughput_speedup=speed))
    else:
        out.append(_alpha_needed(pred, req))
    paying = [r for r in ev.policy.levels if ev.policy.k_at[r] > 0]
    if paying:
        out.append(why.PaysUpTo(concurrency=max(paying), k=ev.policy.k_at[max(paying)]))
    out += [
        why.MeasurePrior(class_name=x.name, alpha_low=x.alpha_low, alpha_high=x.alpha_high)
        for x in ev.classes
        if x.alpha_source == "prior"
    ]
    return out + heads


def _heads(req: PlanRequest, verdict: Verdict, classes: list[ClassRow]) -> list[why.TrainHead]:
    """The classes of an EAGLE-3 deployment below their gate in a plan that speculates (a no-go
    plan has no gate): each may clear it with a head trained on its own traffic."""
    if req.deployment.method != "eagle3" or verdict == "no-go":
        return []
    return [
        why.TrainHead(
            class_name=x.name,
            alpha=x.alpha,
            alpha_gate=x.alpha_gate,
            concurrency=x.fails_at_concurrency or req.concurrency,
            stage=HEAD_STAGE,
        )
        for x in classes
        if below_gate(x) and x.alpha_gate is not None
    ]


def _alpha_needed(pred: Predictor, req: PlanRequest) -> why.VerdictChange:
    """The lowest gate α over K in 1..K max at the target, with its ρ (none: no α pays)."""
    c = req.concurrency
    needs = [(k, _gate_alpha(pred, k, c)) for k in pred.k_range]
    reachable = [(k, a) for k, a in needs if a < 1.0]
    if not reachable:
        return why.NoAlphaPays(concurrency=c)
    k, a = min(reachable, key=lambda x: x[1])
    rho = pred.rate_and_length(a, k)[0]
    return why.AlphaNeeded(alpha=a, draft_acceptance_rate=rho, k=k, concurrency=c)


def _qualifiers(verdict: Verdict, classes: list[ClassRow], tail: _TailWatch) -> list[why.Qualifier]:
    """What a GO rests on that is not measured, or that the user allowed."""
    out: list[why.Qualifier] = []
    if verdict in ("go", "go for some classes only"):
        priors = [c.name for c in classes if c.alpha_source == "prior"]
        if priors:
            out.append(why.OnPriors(classes=priors))
    p99 = tail.check
    if p99 is None:
        return out
    if p99.ok and tail.action is not None:
        out.append(why.TailKept(action=tail.action))
    if not p99.ok and verdict == "measure first":
        out.append(
            why.TailPredicted(ratio=p99.ratio, concurrency=p99.concurrency, budget=p99.budget)
        )
    if p99.ok and p99.ratio > 1.0 + _FLOAT_SLACK:
        out.append(
            why.TailWithinBudget(ratio=p99.ratio, concurrency=p99.concurrency, budget=p99.budget)
        )
    return out


class _Tail(NamedTuple):
    """The P99 ITL per token of a pool without and with speculation, and its throughput gain."""

    off_ms: float
    on_ms: float
    gain: float


def _tail(pred: Predictor, c: int, pool: tuple[TrafficClass, ...], k: int) -> _Tail:
    """The tail of a pool at concurrency ``c`` with K = ``k``."""
    run = pred.paired(c, pool, k)
    return _Tail(
        run.baseline.itl_per_token_ms.p99 or 0.0,
        run.spec.itl_per_token_ms.p99 or 0.0,
        pred.sim_speedup(c, pool, k),
    )


class _TailWatch(NamedTuple):
    """The P99 check at the target, what it changed (None: nothing), the K to cap the policy at
    from the target up (None: unchanged), and the classes routed away for their tail."""

    check: P99Check | None
    action: why.TailAction | None
    k_cap: int | None
    routed: list[str]


_NO_WATCH = _TailWatch(None, None, None, [])


def _p99_check(
    pred: Predictor, req: PlanRequest, policy: _Policy, classes: list[_Cls], away: list[str]
) -> _TailWatch:
    """The recipe's tail watch at the target: the P99 ITL per token of the shipped pool must not
    be worse than without speculation (``--p99-budget`` allows a ratio above 1, and
    ``--slo-p99-itl-ms`` bounds it in ms). When it is, the plan ships what keeps it: the largest
    paying K below the policy's at the target, else routing the lowest-α classes away, else
    nothing (the verdict turns)."""
    c = req.concurrency
    k = policy.k_at[c]
    if k == 0 or len(away) == len(classes):
        return _NO_WATCH
    budget = req.p99_budget or 1.0
    slo = req.slo_p99_itl_ms

    def fits(t: _Tail) -> bool:
        return t.on_ms <= budget * t.off_ms + _FLOAT_SLACK and (slo is None or t.on_ms <= slo)

    def check(t: _Tail, kk: int, ok: bool) -> P99Check:
        return P99Check(
            concurrency=c, k=kk, off_ms=t.off_ms, on_ms=t.on_ms,
            ratio=t.on_ms / t.off_ms if t.off_ms > 0 else 1.0, budget=budget, slo_ms=slo, ok=ok,
        )  # fmt: skip

    first = _tail(pred, c, _pool(classes, away), k)
    if fits(first):
        return _TailWatch(check(first, k, True), None, None, [])
    lower = [(kk, _tail(pred, c, _pool(classes, away), kk)) for kk in range(k - 1, 0, -1)]
    good = [(kk, t) for kk, t in lower if t.gain >= MIN_GAIN and fits(t)]
    if good:
        kk, t = max(good, key=lambda x: x[1].gain)
        return _TailWatch(
            check(t, kk, True), why.KLowered(from_k=k, to_k=kk, concurrency=c), kk, []
        )
    kept = sorted((x for x in classes if x.cls.name not in away), key=lambda x: x.cls.alpha or 0)
    extra: list[str] = []
    for x in kept[:-1]:
        extra.append(x.cls.name)
        for kk in range(k, 0, -1):
            t = _tail(pred, c, _pool(classes, [*away, *extra]), kk)
            if t.gain >= MIN_GAIN and fits(t):
                action = why.RoutedForTail(classes=list(extra))
                return _TailWatch(check(t, kk, True), action, kk if kk != k else None, extra)
    return _TailWatch(check(first, k, False), why.TailUnfixable(k=k), None, [])


def build_plan(req: PlanRequest) -> Plan:
    """Compute the plan for ``req`` (raises SpecError / ConfigError on impossible input, and on
    a calibration profile fitted for another deployment). Its reasons are records
    (``Plan.reasons``); :func:`alphagate.report.reasons.worded` puts them in words."""
    if req.calibration is not None:
        req.calibration.check_deployment(req.deployment)
    pred = Predictor(req)
    classes = _resolve_classes(req)
    ev, tail = _decide(pred, req, classes)
    out = _ship(pred, req, classes, ev, tail.check)
    reasons = why.PlanReasons(
        verdict=_verdict_reason(req, ev, out, tail.check),
        changes=_changes(pred, req, out.verdict, ev, tail.check),
        qualifiers=_qualifiers(out.verdict, ev.classes, tail),
        tail=tail.action,
    )
    tree = plan_trees(pred, req) if req.engine == "sglang" and req.trees else None
    plan = _plan_record(pred, req, classes, ev, out, tail.check, reasons, tree)
    worded = tree_policy_text(tree) if tree is not None else policy_text(plan)
    plan = plan.model_copy(update={"policy": worded})
    return plan.model_copy(
        update={
            "stages": stages(req, plan),
            "risks": risks(req, pred, plan),
            "playbook": playbook(req, pred, plan),
        }
    )


class _EngineSide(NamedTuple):
    """The drafter, the engine configuration of the policy, and the two servers' commands."""

    draft: str | None
    speculative_config: dict[str, object]
    speculative_config_static: dict[str, object]
    sglang_flags: list[str]
    command: EngineCommand
    serve_baseline: list[str]
    serve_candidate: list[str]


def _engine_side(
    pred: Predictor, req: PlanRequest, policy: _Policy, tree: TreePlan | None
) -> _EngineSide:
    drafter = req.deployment.drafter
    draft = drafter.checkpoint or default_draft(drafter.method, req.deployment.model)
    k_top = max([1, *policy.schedule, *policy.k_at.values()])
    schedule = compress_schedule(policy.schedule) if policy.dynamic else []
    spec_cfg = vllm_speculative_config(
        drafter, draft, k_top, pred.resolved.tp, schedule or None, pred.resolved.draft_tp
    )
    static_cfg = vllm_speculative_config(
        drafter, draft, policy.fixed_k, pred.resolved.tp, None, pred.resolved.draft_tp
    )
    flags = (
        tree.flags
        if tree is not None and tree.flags
        else sglang_flags(drafter, draft, policy.fixed_k)
    )
    cmd = EngineCommand(pred.resolved, req.served_model)
    baseline, candidate = _serve_commands(
        req, cmd, spec_cfg if policy.dynamic else static_cfg, flags
    )
    return _EngineSide(draft, spec_cfg, static_cfg, flags, cmd, baseline, candidate)


def _plan_record(
    pred: Predictor,
    req: PlanRequest,
    classes: list[_Cls],
    ev: _Evaluation,
    out: _Outcome,
    p99: P99Check | None,
    reasons: why.PlanReasons,
    tree: TreePlan | None = None,
) -> Plan:
    """The plan's figures, before the policy is worded and the runbook written."""
    policy, blend = ev.policy, _blend(classes)
    k_t = policy.k_at[req.concurrency]
    naive = sum(c.share * c.alpha for c in ev.classes)
    engine = _engine_side(pred, req, policy, tree)
    confidence, agreement = _schedule_confidence(policy, ev.rows)
    return Plan(
        verdict=out.verdict,
        deployment=pred.resolved.describe(),
        deployment_detail=pred.resolved.summary(),
        method=req.deployment.drafter.method,
        draft=engine.draft,
        engine=req.engine,
        engine_version=req.engine_version,
        policy="",
        fixed_k=policy.fixed_k,
        concurrency=req.concurrency,
        peak_concurrency=req.peak,
        slo_p99_itl_ms=req.slo_p99_itl_ms,
        classes=ev.classes,
        routed_away=ev.away,
        rows=ev.rows,
        headline_speedup=out.headline,
        headline_interval=out.decision,
        uncertainty=out.uncertainty,
        fleet_speedup=out.fleet,
        blend_speedup_target=_at(ev.rows, req.concurrency).throughput_speedup,
        blend_speedup_peak=_at(ev.rows, req.peak).throughput_speedup,
        blend_speedup_target_closed_form=pred.model_speedup(blend, k_t, req.concurrency),
        naive_mean_alpha=naive,
        naive_alpha_speedup_target=pred.model_speedup(
            (TrafficClass(name="naive", share=1.0, alpha=naive),), k_t, req.concurrency
        ),
        blend_crossover_concurrency=pred.crossover(blend, policy.fixed_k),
        blend_crossover_interval=pred.crossover_interval(blend, policy.fixed_k),
        crossover_search_max=pred.b_max,
        memory=_memory(pred, policy.fixed_k),
        speculative_config=engine.speculative_config,
        speculative_config_static=engine.speculative_config_static,
        dynamic_k_supported=policy.dynamic,
        batch_schedule=compress_schedule(policy.schedule) if policy.dynamic else [],
        schedule_confidence=confidence,
        schedule_agreement=agreement,
        disable_above_concurrency=policy.disable_above,
        sglang_flags=engine.sglang_flags,
        serve_baseline=engine.serve_baseline,
        serve_candidate=[] if out.verdict == "no-go" else engine.serve_candidate,
        served_model=engine.command.served_name,
        checkpoint=engine.command.checkpoint,
        p99=p99,
        gate=None if out.verdict == "no-go" else _gate(pred, req, policy, ev.rows),
        stages=[],
        risks=[],
        playbook=[],
        uses_priors=any(c.alpha_source == "prior" for c in ev.classes),
        calibration=_calibration_notes(req, policy),
        reasons=reasons,
        sglang_tree=tree,
    )


def _gate(pred: Predictor, req: PlanRequest, policy: _Policy, rows: list[LoadRow]) -> Gate | None:
    """Thresholds at the highest concurrency (target..peak) where the policy speculates."""
    on = [c for c in _window(policy, req) if policy.k_at[c] > 0]
    if not on:
        return None
    c = max(on)
    k = policy.k_at[c]
    target = _at(rows, req.concurrency)
    be = _pessimistic_breakeven(pred, k, c)
    be_v = 1.0 if be is None else be
    tpot = target.tpot_speedup or 1.0
    tpot_low = target.tpot_speedup_interval.low if target.tpot_speedup_interval else None
    a = _gate_alpha(pred, k, c)
    rho_min, tau_min = pred.rate_and_length(a, k)
    return Gate(
        concurrency=c,
        k=k,
        alpha_breakeven=be_v,
        alpha_min=a,
        draft_acceptance_rate_min=rho_min,
        mean_acceptance_length_min=tau_min,
        quantity_gated=(
            "draft acceptance rate ρ (accepted ÷ drafted, what vLLM reports), "
            "with the conditional α it implies"
        ),
        fixed_rule_alpha=FIXED_RULE,
        fixed_rule_draft_acceptance_rate=pred.rate_and_length(FIXED_RULE, k)[0],
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


def _speed(pred: Predictor, c: int, classes: list[ClassRow], k: int) -> float:
    blend = tuple(TrafficClass(name=x.name, share=x.share, alpha=x.alpha) for x in classes)
    return pred.sim_speedup(c, blend, k)


def _memory(pred: Predictor, k: int) -> Memory:
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
        largest_batch=ArmCaps(baseline=pred.b_max, speculative=r.largest_batch(pred.workload, k=k)),
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


def _pool(classes: list[_Cls], away: set[str] | list[str]) -> tuple[TrafficClass, ...]:
    keep = [c.cls for c in classes if c.cls.name not in away]
    total = sum(c.share for c in keep)
    return tuple(c.model_copy(update={"share": c.share / total}) for c in keep)


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
    t = _at(rows, req.concurrency)
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
    the ranges (1× at K = 0 routed to servers without speculation,
    :meth:`Predictor.sim_intervals`)."""
    return _intervals(pred, req.concurrency, k, classes, _pool(classes, away))[0]


def _measured_alpha(req: PlanRequest, classes: list[_Cls]) -> dict[str, Any]:
    """How a printed re-plan keeps this plan's measured α: typed (the measurement's file may
    not travel with the plan), or — where α alone cannot carry it (suffix decoding's draft
    lengths, SGLang's draft shapes) — the measurement files as given."""
    if req.alpha_files and (req.trees or req.deployment.method == "suffix"):
        return {"alpha_from": list(req.alpha_files), "overall": req.alpha_overall}
    typed = {x.cls.name: alpha_text(x.cls) for x in classes if x.kind == "measured"}
    return {"alpha_from": [], "typed": typed}


class _DecisionPoint(NamedTuple):
    """Where the verdict's interval is read: the concurrency, its K, the interval, and whether
    it holds 1×."""

    at: int
    k: int
    interval: Interval
    straddles: bool


class _Settlement(NamedTuple):
    """The cheapest measurement that would settle a verdict, the interval it would leave, and
    the commands that run it."""

    by: Literal["measure alpha", "calibrate", "ab"] | None = None
    interval: Interval | None = None
    commands: tuple[str, ...] = ()


def _peak_interval(
    pred: Predictor,
    req: PlanRequest,
    k_peak: int,
    classes: list[_Cls],
    pool: tuple[TrafficClass, ...],
    decision: Interval,
) -> Interval:
    """The speedup's interval at the peak concurrency (1× where speculation is off there and
    its traffic is routed to servers without it)."""
    if req.peak == req.concurrency:
        return decision
    return _intervals(pred, req.peak, k_peak, classes, pool)[0]


def _decision_point(
    pred: Predictor,
    req: PlanRequest,
    policy: _Policy,
    rows: list[LoadRow],
    pool: tuple[TrafficClass, ...],
    decision: Interval,
) -> _DecisionPoint:
    """The target when its interval holds 1×, else the peak — or the target at the best K when
    speculation is off there but that K's gain is not clear of 1×."""
    c = req.concurrency
    straddles = decision.straddles(1.0)
    at = c if straddles else req.peak
    point = _DecisionPoint(at=at, k=policy.k_at[at], interval=decision, straddles=straddles)
    t = _at(rows, c)
    if (point.k == 0 and at == c) or (t.k == 0 and t.best_k_sim_speedup > 1.0):
        best = pred.sim_intervals(c, pool, t.best_k_sim)[0]
        if best.straddles(1.0):
            return _DecisionPoint(at=c, k=t.best_k_sim, interval=best, straddles=True)
    return point


def _calibrated_interval(
    pred: Predictor, pool: tuple[TrafficClass, ...], *, at: int, k: int
) -> Interval:
    """The speedup's interval at ``at`` once a calibration has determined each coefficient to
    about ± CALIBRATED_SPREAD."""
    ranges = pred.ranges.narrowed()
    lo, hi = (
        CostDesign(pred.cost, ranges)
        .spread(lambda m: model_speedup(m, pool, k, pred.batch(at), pred.workload))
        .ratio()
    )
    sim = pred.sim_speedup(at, pool, k)
    low, high = ranges.widened(sim, sim * lo, sim * hi)
    return Interval(low=low, high=high)


def _settlement(
    pred: Predictor,
    req: PlanRequest,
    classes: list[_Cls],
    pool: tuple[TrafficClass, ...],
    point: _DecisionPoint,
    priors: list[str],
) -> _Settlement:
    """Measure the priors' α when the cost constants alone leave the verdict clear of 1×; else
    calibrate — or, calibrated already (calibrating again the same way narrows nothing), A/B."""
    constants_only = pred.sim_intervals(point.at, pool, point.k)[0]
    if priors and not constants_only.straddles(1.0):
        return _Settlement(by="measure alpha", interval=constants_only)
    if pred.ranges.origin == "calibration":
        return _Settlement(by="ab")
    settled = _calibrated_interval(pred, pool, at=point.at, k=point.k)
    replan = plan_argv(
        req,
        out=f"{req.out_stem}-calibrated.md",
        calibration=CALIBRATION,
        **_measured_alpha(req, classes),
    )
    calibrate = calibrate_argv(req, [req.concurrency, req.peak])
    return _Settlement(
        by="calibrate",
        interval=settled,
        commands=(shlex.join(calibrate), shlex.join(replan)),
    )


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
    priors = [x.cls.name for x in classes if x.kind == "prior"]
    pool = _pool(classes, away)
    k_peak = policy.k_at[req.peak]
    peak_iv = _peak_interval(pred, req, k_peak, classes, pool, decision)
    peak_value = pred.sim_speedup(req.peak, pool, k_peak)
    point = _decision_point(pred, req, policy, rows, pool, decision)
    settle = _Settlement()
    if point.k > 0 and (point.straddles or peak_iv.straddles(1.0)):
        settle = _settlement(pred, req, classes, pool, point, priors)
    return Uncertainty(
        origin=pred.ranges.origin,
        ranges=list(pred.ranges.varying()),
        alpha_priors=priors,
        decision_concurrency=req.concurrency,
        decision_interval=point.interval,
        peak_interval=peak_iv,
        peak_speedup=peak_value,
        straddles=point.straddles,
        settle_at=point.at if settle.by else None,
        settle_by=settle.by,
        settle_commands=list(settle.commands),
        settled_interval=settle.interval,
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
