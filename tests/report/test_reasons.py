"""Sentences from typed reasons: every kind a plan or an offline measurement records, worded as
the plan and ``measure offline`` print it (each expected sentence written out by hand), and the
records round-trip through JSON."""

from __future__ import annotations

import pytest

from alphagate.core.records import Interval
from alphagate.measure.offline.results import (
    CheckpointBadLines,
    CheckpointCut,
    OfflineClass,
    OfflineDetails,
    Skipped,
)
from alphagate.plan.reasons import (
    AlphaNeeded,
    GainWithinError,
    KLowered,
    MeasurePrior,
    NoAlphaPays,
    NoClassClearsGate,
    NoKPays,
    OnPriors,
    P99Budget,
    PaysUpTo,
    PeakRun,
    PlanReasons,
    PriorLowEnd,
    RangeHoldsOne,
    RoutedClass,
    RoutedForTail,
    Settle,
    Shipped,
    ShippedForSome,
    TailKept,
    TailPastBudget,
    TailPredicted,
    TailUnfixable,
    TailWithinBudget,
)
from alphagate.report.reasons import (
    change_text,
    offline_notes,
    qualifier_text,
    settle_text,
    tail_action_text,
    verdict_text,
)

IV = Interval(low=1.25, high=1.5)
ACROSS = Interval(low=0.99, high=1.12)


@pytest.mark.parametrize(
    ("reason", "text"),
    [
        (
            TailPastBudget(concurrency=1, k=6, throughput_speedup=1.99, off_ms=14.9, on_ms=17.1,
                           ratio=1.148, budget=1.0, slo_ms=None),
            "at concurrency 1 speculation (K=6) gains 1.99× throughput, but its P99 ITL per token "
            "rises 14.9 → 17.1 ms (1.15×), past 1× the baseline's, at every K and with any class "
            "routed away",
        ),
        (
            TailPastBudget(concurrency=64, k=2, throughput_speedup=1.31, off_ms=88.4, on_ms=88.1,
                           ratio=0.997, budget=1.2, slo_ms=30.0),
            "at concurrency 64 speculation (K=2) gains 1.31× throughput, but its P99 ITL per token "
            "rises 88.4 → 88.1 ms (1.00×), past 1.2× the baseline's and the 30 ms SLO, at every K "
            "and with any class routed away",
        ),
        (
            NoKPays(concurrency=256, k_max=8, min_gain=1.02, best_k=1, best_speedup=1.0081,
                    best_interval=Interval(low=0.97, high=1.04), pays_up_to=128),
            "no K in 1..8 gains 2% at concurrency 256 (the best, K=1, gives 1.008× throughput "
            "[0.97–1.04], a range that holds 1×); with this traffic it pays up to concurrency 128",
        ),
        (
            NoKPays(concurrency=256, k_max=3, min_gain=1.02, best_k=1, best_speedup=0.884,
                    best_interval=None, pays_up_to=None),
            "no K in 1..3 gains 2% at concurrency 256 (the best, K=1, gives 0.884× throughput)",
        ),
        (
            GainWithinError(concurrency=128, k=1, throughput_speedup=1.013, min_gain=1.02,
                            pays_up_to=64),
            "at concurrency 128 (K=1) the blend gains only 1.01× throughput, within the model's 2% "
            "error; with this traffic it pays up to concurrency 64",
        ),
        (
            NoClassClearsGate(concurrency=64, k=3, gate_alpha=0.77, alpha_breakeven=0.32,
                              margin=0.05, class_name="chat", alpha_label="0.70", speedup=1.43,
                              pays_up_to=64),
            "at concurrency 64 (K=3) no class clears the gate α 0.77 (the break-even α at the "
            "pessimistic end of the step-time ranges, at least 0.32 + 0.05); chat at α 0.70 gives "
            "1.43× throughput; with this traffic it pays up to concurrency 64",
        ),
        (
            NoClassClearsGate(concurrency=64, k=3, gate_alpha=None, alpha_breakeven=None,
                              margin=0.05, class_name="chat", alpha_label="0.70", speedup=0.93,
                              pays_up_to=None),
            "at concurrency 64 (K=3) no class clears the gate α — (the break-even α at the "
            "pessimistic end of the step-time ranges, at least — + 0.05); chat at α 0.70 gives "
            "0.93× throughput",
        ),
        (
            RangeHoldsOne(concurrency=128, k=1, speedup=1.06, interval=ACROSS,
                          alpha_priors=["chat", "code"],
                          settle=Settle(by="measure alpha", at=128,
                                        settled_interval=Interval(low=1.03, high=1.09))),
            "at concurrency 128 (K=1) the predicted speedup is 1.06× [0.99–1.12×], across 1× over "
            "the step-time constants' ranges and the α priors of chat, code: measure α first "
            "(Stage 2) (expected to leave [1.03–1.09×])",
        ),
        (
            PriorLowEnd(concurrency=256, k=1, throughput_speedup=1.06, low_end_speedup=0.97),
            "with the prior α the blend gains 1.06× throughput at concurrency 256 (K=1), but at "
            "the low end of the priors 0.97×: measure α before turning it on",
        ),
        (
            Shipped(concurrency=16, k=4, speedup=1.85, interval=Interval(low=1.44, high=2.06),
                    peak=None),
            "1.85× [1.44–2.06] higher throughput at concurrency 16 (K=4)",
        ),
        (
            Shipped(concurrency=64, k=3, speedup=1.41, interval=None,
                    peak=PeakRun(concurrency=512, k=0, speedup=1.0, interval=None)),
            "1.41× higher throughput at concurrency 64 (K=3); at the peak 512 speculation is off "
            "(K=0)",
        ),
        (
            ShippedForSome(concurrency=64, k=2, speedup=1.40, interval=IV, fleet_speedup=1.25,
                           routed=[RoutedClass(name="code", alpha_label="0.40", gate_alpha=0.64,
                                               fails_at_concurrency=128)],
                           peak=PeakRun(concurrency=256, k=1, speedup=1.06,
                                        interval=Interval(low=1.02, high=1.10))),
            "1.40× [1.25–1.50] higher throughput at concurrency 64 (K=2) for the classes that "
            "clear the gate (1.25× fleet-wide); route code (α 0.40, gate 0.64 at concurrency 128) "
            "without speculation; at the peak 256 it runs K=1 (1.06× [1.02–1.10])",
        ),
    ],
)  # fmt: skip
def test_every_verdict_reason_reads_as_one_sentence(reason: object, text: str) -> None:
    assert verdict_text(reason) == text  # type: ignore[arg-type]


def test_settle_names_the_cheapest_measurement_and_what_it_leaves() -> None:
    left = Interval(low=1.03, high=1.09)
    assert settle_text(Settle(by="calibrate", at=64, settled_interval=left)) == (
        "calibrate on the two replicas (expected to leave [1.03–1.09×])"
    )
    assert settle_text(Settle(by="ab", at=64, settled_interval=None)) == (
        "the plan is calibrated already, so the A/B at concurrency 64 (Stage 2) settles it; a "
        "profile fitted at the K the policy runs there, or with a smaller residual, would narrow "
        "the range"
    )
    assert settle_text(Settle(by="calibrate", at=64, settled_interval=ACROSS)) == (
        "a calibration would leave [0.99–1.12×], still across 1×, so only an A/B at concurrency "
        "64 settles a gain this small; calibrate first to see how the model moves"
    )


def test_changes_qualifiers_and_tail_actions() -> None:
    assert [
        change_text(P99Budget(budget=1.15, k=6, concurrency=1, throughput_speedup=1.99)),
        change_text(AlphaNeeded(alpha=0.6412, draft_acceptance_rate=0.6402, k=1, concurrency=256)),
        change_text(NoAlphaPays(concurrency=256)),
        change_text(PaysUpTo(concurrency=128, k=1)),
        change_text(MeasurePrior(class_name="chat", alpha_low=0.6, alpha_high=0.8)),
    ] == [
        "a P99 budget of 1.15× the baseline's (--p99-budget 1.15) would ship K=6 at concurrency 1, "
        "if the tail matters less than the 1.99× throughput",
        "a measured α ≥ 0.64 per class (ρ ≥ 0.640 at K=1) would make speculation pay at "
        "concurrency 256",
        "no α makes speculation pay at concurrency 256 on this deployment",
        "at the α given, speculation pays up to concurrency 128 (K=1): a speculative pool run at "
        "or below it would gain",
        "measure chat's α (Stage 2): its prior spans 0.60–0.80",
    ]
    lowered = KLowered(from_k=6, to_k=3, concurrency=1)
    assert [
        qualifier_text(OnPriors(classes=["chat", "code"])),
        qualifier_text(TailKept(action=lowered)),
        qualifier_text(TailKept(action=RoutedForTail(classes=["code", "rag"]))),
        qualifier_text(TailPredicted(ratio=10.624, concurrency=256, budget=1.0)),
        qualifier_text(TailWithinBudget(ratio=1.148, concurrency=1, budget=1.2)),
    ] == [
        "on prior α for chat, code: Stage 2 measures it before the gate",
        "K lowered from 6 to 3 at concurrency 1 and above to keep the P99 ITL per token",
        "code, rag routed without speculation for the tail to keep the P99 ITL per token",
        "P99 ITL per token predicted 10.62× the baseline's at concurrency 256 at these α: the "
        "gate will hold it to 1×",
        "P99 ITL per token 1.15× the baseline's at concurrency 1, within --p99-budget 1.2",
    ]
    assert tail_action_text(None) == ""
    assert tail_action_text(TailUnfixable(k=2)) == (
        "no K in 1..2 and no routing keeps it within the budget"
    )


def test_reasons_round_trip_through_json_by_kind() -> None:
    r = PlanReasons(
        verdict=ShippedForSome(concurrency=64, k=2, speedup=1.4, interval=IV, fleet_speedup=1.2,
                               routed=[], peak=None),
        changes=[NoAlphaPays(concurrency=8), PaysUpTo(concurrency=4, k=2)],
        qualifiers=[TailKept(action=RoutedForTail(classes=["code"]))],
        tail=RoutedForTail(classes=["code"]),
    )  # fmt: skip
    data = r.model_dump(mode="json")
    assert data["verdict"]["kind"] == "shipped_for_some"
    assert [c["kind"] for c in data["changes"]] == ["no_alpha_pays", "pays_up_to"]
    assert PlanReasons.model_validate(data) == r


def _details(**update: object) -> OfflineDetails:
    one = OfflineClass(
        requests=3, prompt_tokens=30, output_tokens=48, by_k=[], acceptance_length_histogram=[]
    )
    base = OfflineDetails(
        drafter="ngram(2, 3)", target="t", k=3, k_max=3, semantics="greedy", temperature=0.0,
        top_p=1.0, top_k=-1, draft_sampling="greedy", regenerated=False, seed=0, sample=None,
        requests_read=4, requests_used=3, prompt_tokens=30, output_tokens=48, truncated=0,
        retokenized=0, trajectory_agreement=1.0, bootstrap_resamples=100, wall_s=1.0,
        overall=one,
    )  # fmt: skip
    return base.model_copy(update=update)


def test_offline_notes_say_what_the_log_and_the_run_changed() -> None:
    plain = offline_notes(_details())
    assert plain[0].startswith("greedy (temperature 0): every engine step is replayed")
    assert plain[1:] == [
        "95% intervals: bootstrap over requests (a request's steps are not independent)."
    ]
    notes = offline_notes(
        _details(
            trajectory_agreement=0.42, retokenized=2, truncated=1, max_model_len=24,
            skipped=[Skipped(reason="not JSON", count=1, first=["log:7"])],
            checkpoint=[
                CheckpointCut(path="ck.jsonl", moved_to="ck.jsonl.partial-1", whole_lines=2),
                CheckpointBadLines(path="ck.jsonl", lines=list(range(3, 15))),
            ],
        )
    )  # fmt: skip
    assert notes[:2] == [
        "--checkpoint ck.jsonl ended in a cut-off line (a run stopped mid-write); it was moved to "
        "ck.jsonl.partial-1 and the run resumes from the 2 whole request lines before it",
        "--checkpoint ck.jsonl: 12 lines are not scored requests (lines 3, 4, 5, 6, 7, 8, 9, 10, "
        "11, 12 …); those requests are scored again",
    ]
    assert notes[4].startswith("only 42.0% of the logged output tokens are this target's own")
    assert notes[5:] == [
        "2 requests have no output token ids in the log: their text was re-tokenized, which can "
        "split it differently than the server generated it.",
        "1 requests were cut to fit the context (24's limit).",
        "left out: not JSON: 1",
    ]
    near = offline_notes(_details(trajectory_agreement=0.995))[2]
    assert near.startswith("99.50% of the logged output tokens are this target's own greedy")
    sampled = offline_notes(
        _details(semantics="sampling", temperature=0.7, trajectory_agreement=0.1)
    )
    assert sampled[0].startswith("sampling (temperature 0.7, top-p 1, top-k -1): the log must be")
    assert len(sampled) == 2  # agreement is a greedy run's question only
