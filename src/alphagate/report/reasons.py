"""Sentences from the typed reasons the builders return: a plan's verdict reason, what would
change it, its qualifiers and the tail watch's action (:mod:`alphagate.plan.reasons`), and the
notes of an offline measurement (:class:`~alphagate.measure.offline.results.OfflineDetails`).

The builders count; this module words — as vLLM splits ``SpecDecodingStats`` from
``SpecDecodingLogging``. :func:`worded` fills a plan's sentence fields from its records (the plan
JSON keeps both), :func:`with_offline_notes` an offline result's notes.
"""

from __future__ import annotations

import alphagate.plan.reasons as why
from alphagate.core.fmt import num
from alphagate.core.records import Interval
from alphagate.measure.offline.results import (
    AGREEMENT_WARN,
    NOT_ITS_OWN,
    CheckpointBadLines,
    CheckpointCut,
    CheckpointNote,
    OfflineDetails,
)
from alphagate.measure.results import MeasureResult
from alphagate.plan.records import Plan

__all__ = [
    "change_text",
    "offline_notes",
    "qualifier_text",
    "semantics_note",
    "settle_text",
    "tail_action_text",
    "verdict_text",
    "with_offline_notes",
    "worded",
]


# ---------------------------------------------------------------- plans
def worded(plan: Plan) -> Plan:
    """The plan with its sentences (``reason``, ``qualifiers``, ``change_verdict``,
    ``p99.action``) composed from its reasons. A plan without reasons (a file written before they
    were recorded) keeps the sentences it has."""
    r = plan.reasons
    if r is None:
        return plan
    p99 = plan.p99
    if p99 is not None:
        p99 = p99.model_copy(update={"action": tail_action_text(r.tail)})
    return plan.model_copy(
        update={
            "reason": verdict_text(r.verdict),
            "qualifiers": [qualifier_text(q) for q in r.qualifiers],
            "change_verdict": [change_text(c) for c in r.changes],
            "p99": p99,
        }
    )


def tail_action_text(a: why.TailAction | None) -> str:
    """What the tail watch changed ("" where it changed nothing)."""
    match a:
        case None:
            return ""
        case why.KLowered():
            return f"K lowered from {a.from_k} to {a.to_k} at concurrency {a.concurrency} and above"
        case why.RoutedForTail():
            return f"{', '.join(a.classes)} routed without speculation for the tail"
        case why.TailUnfixable():
            return f"no K in 1..{a.k} and no routing keeps it within the budget"


def settle_text(s: why.Settle) -> str:
    """What would settle a range that holds 1×, and the range it is expected to leave."""
    left = s.settled_interval
    if left is not None and left.straddles(1.0):
        return (
            f"a calibration would leave {left.text(suffix='×')}, still across 1×, so only an A/B at "
            f"concurrency {s.at} settles a gain this small; calibrate first to see "
            "how the model moves"
        )
    tail = "" if left is None else f" (expected to leave {left.text(suffix='×')})"
    if s.by == "measure alpha":
        return f"measure α first (Stage 2){tail}"
    if s.by == "ab":
        return (
            f"the plan is calibrated already, so the A/B at concurrency {s.at} "
            "(Stage 2) settles it; a profile fitted at the K the policy runs there, or with a "
            "smaller residual, would narrow the range"
        )
    return f"calibrate on the two replicas{tail}"


def _pays(up_to: int | None) -> str:
    return "" if up_to is None else f"; with this traffic it pays up to concurrency {up_to}"


def _range(iv: Interval | None) -> str:
    return "" if iv is None else f" {iv.text()}"


def _peak(p: why.PeakRun | None) -> str:
    if p is None:
        return ""
    if not p.k:
        return f"; at the peak {p.concurrency} speculation is off (K=0)"
    return f"; at the peak {p.concurrency} it runs K={p.k} ({p.speedup:.2f}×{_range(p.interval)})"


def verdict_text(r: why.VerdictReason) -> str:
    """Why the verdict, in one sentence that names every figure's concurrency."""
    match r:
        case why.RangeHoldsOne():
            over = "the step-time constants' ranges" + (
                f" and the α priors of {', '.join(r.alpha_priors)}" if r.alpha_priors else ""
            )
            return (
                f"at concurrency {r.concurrency} (K={r.k}) the predicted speedup is "
                f"{r.speedup:.2f}× {r.interval.text(suffix='×')}, across 1× over {over}: "
                f"{settle_text(r.settle)}"
            )
        case why.PriorLowEnd():
            return (
                f"with the prior α the blend gains {r.throughput_speedup:.2f}× throughput at "
                f"concurrency {r.concurrency} (K={r.k}), but at the low end of the priors "
                f"{r.low_end_speedup:.2f}×: measure α before turning it on"
            )
        case why.Shipped():
            return (
                f"{r.speedup:.2f}×{_range(r.interval)} higher throughput at concurrency "
                f"{r.concurrency} (K={r.k}){_peak(r.peak)}"
            )
        case why.ShippedForSome():
            names = ", ".join(
                f"{x.name} (α {x.alpha_label}, gate {num(x.gate_alpha)} at concurrency "
                f"{x.fails_at_concurrency})"
                for x in r.routed
            )
            return (
                f"{r.speedup:.2f}×{_range(r.interval)} higher throughput at concurrency "
                f"{r.concurrency} (K={r.k}) for the classes that clear the gate "
                f"({r.fleet_speedup:.2f}× fleet-wide); route {names} without speculation"
                f"{_peak(r.peak)}"
            )
        case _:
            return _no_go_text(r)


def _no_go_text(
    r: why.TailPastBudget | why.NoKPays | why.GainWithinError | why.NoClassClearsGate,
) -> str:
    match r:
        case why.TailPastBudget():
            bound = f"{r.budget:g}× the baseline's" + (
                "" if r.slo_ms is None else f" and the {r.slo_ms:g} ms SLO"
            )
            return (
                f"at concurrency {r.concurrency} speculation (K={r.k}) gains "
                f"{r.throughput_speedup:.2f}× throughput, but its P99 ITL per token rises "
                f"{r.off_ms:.1f} → {r.on_ms:.1f} ms ({r.ratio:.2f}×), past {bound}, at every K "
                "and with any class routed away"
            )
        case why.NoKPays():
            unsure = (
                "" if r.best_interval is None
                else f" {r.best_interval.text()}, a range that holds 1×"
            )  # fmt: skip
            return (
                f"no K in 1..{r.k_max} gains {r.min_gain - 1:.0%} at concurrency {r.concurrency} "
                f"(the best, K={r.best_k}, gives {r.best_speedup:.3f}× throughput{unsure})"
                f"{_pays(r.pays_up_to)}"
            )
        case why.GainWithinError():
            return (
                f"at concurrency {r.concurrency} (K={r.k}) the blend gains only "
                f"{r.throughput_speedup:.2f}× throughput, within the model's "
                f"{r.min_gain - 1:.0%} error{_pays(r.pays_up_to)}"
            )
        case why.NoClassClearsGate():
            return (
                f"at concurrency {r.concurrency} (K={r.k}) no class clears the gate α "
                f"{num(r.gate_alpha)} (the break-even α at the pessimistic end of the step-time "
                f"ranges, at least {num(r.alpha_breakeven)} + {r.margin}); {r.class_name} at α "
                f"{r.alpha_label} gives {r.speedup:.2f}× throughput{_pays(r.pays_up_to)}"
            )


def change_text(c: why.VerdictChange) -> str:
    """One thing that would turn a NO-GO or MEASURE FIRST verdict, with its numbers."""
    match c:
        case why.P99Budget():
            return (
                f"a P99 budget of {c.budget:g}× the baseline's (--p99-budget {c.budget:g}) would "
                f"ship K={c.k} at concurrency {c.concurrency}, if the tail matters less than the "
                f"{c.throughput_speedup:.2f}× throughput"
            )
        case why.AlphaNeeded():
            return (
                f"a measured α ≥ {c.alpha:.2f} per class (ρ ≥ {c.draft_acceptance_rate:.3f} at "
                f"K={c.k}) would make speculation pay at concurrency {c.concurrency}"
            )
        case why.NoAlphaPays():
            return f"no α makes speculation pay at concurrency {c.concurrency} on this deployment"
        case why.PaysUpTo():
            return (
                f"at the α given, speculation pays up to concurrency {c.concurrency} (K={c.k}): "
                "a speculative pool run at or below it would gain"
            )
        case why.MeasurePrior():
            return (
                f"measure {c.class_name}'s α (Stage 2): its prior spans "
                f"{c.alpha_low:.2f}–{c.alpha_high:.2f}"
            )
        case why.TrainHead():
            return (
                f"{c.class_name} needs α ≥ {c.alpha_gate:.2f} at concurrency {c.concurrency} "
                f"(it has {c.alpha:.2f}): a head trained on its own traffic may clear it — "
                f"Stage {c.stage} trains one, measures it on requests it never saw, and re-plans"
            )


def qualifier_text(q: why.Qualifier) -> str:
    """One thing a verdict rests on that is not measured, or that the user allowed."""
    match q:
        case why.OnPriors():
            return f"on prior α for {', '.join(q.classes)}: Stage 2 measures it before the gate"
        case why.TailKept():
            return tail_action_text(q.action) + " to keep the P99 ITL per token"
        case why.TailPredicted():
            return (
                f"P99 ITL per token predicted {q.ratio:.2f}× the baseline's at concurrency "
                f"{q.concurrency} at these α: the gate will hold it to {q.budget:g}×"
            )
        case why.TailWithinBudget():
            return (
                f"P99 ITL per token {q.ratio:.2f}× the baseline's at concurrency "
                f"{q.concurrency}, within --p99-budget {q.budget:g}"
            )


# ---------------------------------------------------------------- offline measurements
def with_offline_notes(m: MeasureResult) -> MeasureResult:
    """An offline result as ``measure offline`` prints it: its semantics and notes in words (a
    result of another verb is returned as it is)."""
    d = m.offline
    if d is None:
        return m
    d = d.model_copy(update={"semantics_note": semantics_note(d)})
    return m.model_copy(update={"offline": d, "notes": offline_notes(d)})


def semantics_note(d: OfflineDetails) -> str:
    """How the counters were obtained: the greedy replay, or sampling with greedy or sampled
    drafts."""
    if d.semantics == "greedy":
        return (
            "greedy (temperature 0): every engine step is replayed — a step accepts the drafts "
            "that match the logged tokens and moves past them plus one; the last step verifies "
            "drafts past the end of the output against the target's own continuation, as vLLM "
            "counts them. Exact when the log is this target's greedy output."
        )
    head = (
        f"sampling (temperature {d.temperature:g}, top-p {d.top_p:g}, top-k {d.top_k}): "
        "the log must be a sample of this target at these settings (else --regenerate draws one). "
    )
    if d.draft_sampling == "greedy":
        return head + (
            "With vLLM's default greedy drafts the engine keeps a draft exactly when the token it "
            "samples is the draft (a rejected one-hot draft is replaced by a token drawn without "
            "it), so the walk that matches drafts against the sampled tokens gives each "
            "trajectory's counters exactly; over the log they are unbiased estimates."
        )
    return head + (
        "With sampled drafts, a draft was accepted with probability min(p(y), q(y)) ÷ p(y) given "
        "the token y that came out (Leviathan et al. 2023, Algorithm 1): the counters are "
        "expectations along each logged trajectory."
    )


def _checkpoint_text(n: CheckpointNote) -> str:
    match n:
        case CheckpointCut():
            return (
                f"--checkpoint {n.path} ended in a cut-off line (a run stopped mid-write); it was "
                f"moved to {n.moved_to} and the run resumes from the {n.whole_lines} whole "
                "request lines before it"
            )
        case CheckpointBadLines():
            shown = ", ".join(map(str, n.lines[:10])) + (" …" if len(n.lines) > 10 else "")
            return (
                f"--checkpoint {n.path}: {len(n.lines)} lines are not scored requests (lines "
                f"{shown}); those requests are scored again"
            )


def _agreement_note(d: OfflineDetails) -> str | None:
    """Where a greedy run's log is not (wholly) the target's own greedy output."""
    agree = d.trajectory_agreement
    if d.semantics != "greedy" or agree is None or agree >= AGREEMENT_WARN:
        return None
    if agree < NOT_ITS_OWN:
        return (
            f"only {agree:.1%} of the logged output tokens are this target's own greedy choice: "
            "the log is not its greedy trajectory (another model, sampling, people, or a "
            "different chat template). The figures measure the drafter along this text; "
            "--regenerate replaces each output with the target's own greedy continuation (exact)."
        )
    return (
        f"{agree:.2%} of the logged output tokens are this target's own greedy choice here: "
        "near-ties that flip between this run's numerics and the server's (bf16 on GPU, "
        "batching) — the walk follows the logged tokens; --dtype bfloat16 narrows the gap."
    )


#: What a suffix replay assumes about the server, said beside its figures.
SUFFIX_NOTE = (
    "suffix decoding: the requests go through one server's suffix cache in log order, one after "
    "another, each response cached as the server caches it (to the last step's bonus token). "
    "A server that overlapped requests also drafted from the partial responses running beside "
    "each one, which the log does not record. Drafts vary in length: α at a position is "
    "conditional on a draft reaching it (drafted there, earlier positions accepted)."
)


def offline_notes(d: OfflineDetails) -> list[str]:
    """The notes of an offline measurement: what the checkpoint did not hold whole, the
    semantics, the intervals' basis, and what the log or the run changed."""
    notes = [_checkpoint_text(n) for n in d.checkpoint]
    notes += [
        semantics_note(d),
        "95% intervals: bootstrap over requests (a request's steps are not independent).",
    ]
    if d.overall.acceptance_by_length is not None:
        notes.append(SUFFIX_NOTE)
    agreement = _agreement_note(d)
    if agreement is not None:
        notes.append(agreement)
    if d.retokenized:
        notes.append(
            f"{d.retokenized} requests have no output token ids in the log: their text was "
            "re-tokenized, which can split it differently than the server generated it."
        )
    if d.truncated:
        notes.append(
            f"{d.truncated} requests were cut to fit the context "
            f"({d.max_model_len or 'the model'}'s limit)."
        )
    if d.skipped:
        notes.append("left out: " + "; ".join(f"{s.reason}: {s.count}" for s in d.skipped))
    return notes
