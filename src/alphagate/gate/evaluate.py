"""Judging rules on evidence: pass, fail, or not enough evidence yet — never a pass on too little.

For a ``>=`` rule: pass when the 95% interval's lower bound clears the threshold, fail when its
upper bound is below it, otherwise (the interval straddles it, or the sample is below the
minimum) *insufficient*. ``<=`` rules mirror that. A value without an interval (a ``vllm bench
serve`` summary) is insufficient unless the rule set allows point estimates; a per-class rule
needs a measurement of that class, and a rule at concurrency C an A/B at C. Exit codes: 0 pass,
1 fail, 3 insufficient.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from alphagate.core.records import Frozen, Results
from alphagate.gate.evidence import Evidence, Value, ab_value
from alphagate.gate.rules import ACCEPTANCE_METRICS, Rule, RuleSet
from alphagate.measure.estimate import AcceptanceEstimate, Interval, wilson

__all__ = ["EXIT_CODES", "GateResult", "RuleResult", "evaluate", "no_evidence"]

Outcome = Literal["pass", "fail", "insufficient"]
EXIT_CODES: dict[Outcome, int] = {"pass": 0, "fail": 1, "insufficient": 3}


class RuleResult(Frozen):
    """One rule against its evidence."""

    rule: Rule
    value: float | None
    interval: Interval | None
    sample: float = Field(description="drafts or requests behind the value")
    sample_unit: str
    margin: float | None = Field(description="value − threshold (≥ rules), threshold − value (≤)")
    result: Outcome
    why: str
    evidence: str
    basis: str = Field(default="", description="what the interval is made of")


class GateResult(Results):
    """The gate's decision: every rule, and the exit code it maps to."""

    verb: Literal["gate"] = "gate"
    decision: Outcome
    exit_code: int
    results: list[RuleResult]
    sources: list[str]
    notes: list[str] = Field(default_factory=list, description="what the evidence could not tell")
    source_lost: str | None = Field(
        default=None, description="a live source stopped answering: a watch ends on it"
    )


def _acceptance_value(metric: str, est: AcceptanceEstimate) -> Value:
    basis = est.interval_basis
    if metric == "draft_acceptance_rate":
        return Value(
            est.draft_acceptance_rate,
            est.draft_acceptance_rate_ci,
            est.num_drafts,
            "drafts",
            basis=basis,
        )
    if metric == "alpha":
        return Value(est.alpha_iid, est.alpha_iid_ci, est.num_drafts, "drafts", basis=basis)
    return Value(
        est.mean_acceptance_length,
        est.mean_acceptance_length_ci,
        est.num_drafts,
        "drafts",
        basis=basis,
    )


def _judge(rule: Rule, v: Value, minimum: int, rs: RuleSet) -> tuple[Outcome, str]:
    allow_point = rs.allow_point_estimates
    if v.value is None:
        return "insufficient", v.missing or "no value: the evidence does not contain this quantity"
    if v.distorted:
        return "insufficient", (
            "the A/B measured its client or server falling behind, not the server: "
            + "; ".join(v.distorted)
            + " — rerun on a quieter machine (or fewer streams per client process)"
        )
    if v.n < minimum:
        return "insufficient", f"{v.n:,.0f} {v.unit} < the {minimum:,} needed to decide"
    if v.single_run and not rs.allow_single_run:
        return "insufficient", (
            f"one run per side ({v.value:.3g}): an interval within one run cannot see the "
            "variation between runs — bench --repeats 3 (or more) alternates them; "
            "--allow-single-run judges it anyway"
        )
    if v.interval is None and not allow_point:
        return "insufficient", (
            f"a point estimate ({v.value:.4g}) with no interval to bound it; "
            "--allow-point-estimates judges it as it is"
        )
    lo, hi = (v.interval.low, v.interval.high) if v.interval else (v.value, v.value)
    note = "" if v.interval else " (a point estimate, judged as it is)"
    if v.single_run and v.interval:
        note = " (one run per side, judged on its within-run interval as asked)"
    if rule.op == ">=":
        if lo >= rule.threshold:
            return "pass", f"the 95% interval is above {rule.threshold:.4g}{note}"
        if hi < rule.threshold:
            return "fail", f"the 95% interval is below {rule.threshold:.4g}{note}"
    else:
        if hi <= rule.threshold:
            return "pass", f"the 95% interval is below {rule.threshold:.4g}{note}"
        if lo > rule.threshold:
            return "fail", f"the 95% interval is above {rule.threshold:.4g}{note}"
    return "insufficient", f"the 95% interval [{lo:.3g}, {hi:.3g}] straddles {rule.threshold:.4g}"


def _stale(ev: Evidence) -> str:
    return (" — " + "; ".join(ev.stale)) if ev.stale else ""


def _levels(keys: list[int | None]) -> str:
    return ", ".join(f"c{c}" if c is not None else "open loop" for c in keys)


def _evidence_for(rule: Rule, ev: Evidence, rs: RuleSet) -> tuple[Value, str, int] | str:
    """The value a rule is judged on, or why there is none."""
    if rule.metric in ACCEPTANCE_METRICS:
        est = ev.acceptance.get(rule.cls)
        if est is None and rule.cls is not None and None in ev.acceptance:
            return (
                f"no measurement of class {rule.cls}, only of all traffic: serve with "
                "--per-request-spec-decode-metrics summary (vLLM ≥ 0.32) and bench with the "
                "dataset's classes, or bench the class alone (bench --only-class "
                f"{rule.cls}), or measure it offline"
            )
        if est is None:
            return "no acceptance evidence was given for it" + _stale(ev)
        return _acceptance_value(rule.metric, est), ev.acceptance_source[rule.cls], rs.min_drafts
    pairs = ev.ab
    pooled = rule.metric == "error_rate" and rule.concurrency is None and len(pairs) != 1
    if pooled and ev.failures:  # no one A/B: every measured run's failures (baselines aside)
        failed = sum(f for _, f, _ in ev.failures)
        total = sum(n for _, _, n in ev.failures)
        where = "every run measured (" + ", ".join(w for w, _, _ in ev.failures) + ")"
        value = Value(failed / total if total else None, wilson(failed, total), total, "requests")
        return value, where, rs.min_requests
    if not pairs:
        return "no baseline vs candidate evidence was given for it" + _stale(ev)
    if rule.concurrency is not None:
        if rule.concurrency not in pairs:
            return (
                f"no A/B at concurrency {rule.concurrency} (the A/B ran at "
                f"{_levels(list(pairs))}): a speedup at another load says little about this one"
            )
        key: int | None = rule.concurrency
    elif len(pairs) == 1:
        key = next(iter(pairs))
    else:
        return f"several A/B levels ({_levels(list(pairs))}): give --concurrency"
    base, cand = pairs[key]
    where = f"A/B at concurrency {key}" if key is not None else "A/B (open loop)"
    return ab_value(rule.metric, base, cand), where, rs.min_requests


def evaluate(rs: RuleSet, ev: Evidence) -> GateResult:
    """Judge every rule; the decision is fail if any fails, else insufficient if any is."""
    results = []
    for rule in rs.rules:
        found = _evidence_for(rule, ev, rs)
        if isinstance(found, str):
            results.append(_insufficient(rule, found))
            continue
        v, src, minimum = found
        outcome, why = _judge(rule, v, minimum, rs)
        if rule.guard and outcome == "insufficient" and v.value is not None:
            outcome, why = "pass", f"not clearly above {rule.threshold:.4g} ({why})"
        margin = (
            None
            if v.value is None
            else (v.value - rule.threshold if rule.op == ">=" else rule.threshold - v.value)
        )
        results.append(
            RuleResult(
                rule=rule,
                value=v.value,
                interval=v.interval,
                sample=v.n,
                sample_unit=v.unit,
                margin=margin,
                result=outcome,
                why=why,
                evidence=src,
                basis=v.basis,
            )
        )
    outcomes = {r.result for r in results}
    decision: Outcome = (
        "fail" if "fail" in outcomes else "insufficient" if "insufficient" in outcomes else "pass"
    )
    return GateResult(
        decision=decision,
        exit_code=EXIT_CODES[decision],
        results=results,
        sources=ev.sources,
        notes=list(dict.fromkeys([*ev.notes, *ev.stale])),
    )


def _insufficient(rule: Rule, why: str) -> RuleResult:
    """``rule`` judged without a value: no evidence for it, for the reason ``why``."""
    return RuleResult(
        rule=rule,
        value=None,
        interval=None,
        sample=0.0,
        sample_unit="",
        margin=None,
        result="insufficient",
        why=why,
        evidence="",
    )


def no_evidence(rs: RuleSet, why: str, sources: list[str]) -> GateResult:
    """Every rule insufficient for one reason (a live source that stopped answering)."""
    results = [_insufficient(rule, why) for rule in rs.rules]
    return GateResult(
        decision="insufficient",
        exit_code=EXIT_CODES["insufficient"],
        results=results,
        sources=sources,
        source_lost=why,
    )
