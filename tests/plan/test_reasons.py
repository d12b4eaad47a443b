"""The plan's typed reasons (:mod:`alphagate.plan.reasons`): every record reads back from the plan
JSON as the record it was, by its ``kind``, in the slot it belongs to, and nothing else does."""

from __future__ import annotations

import typing

import pytest
from pydantic import TypeAdapter, ValidationError

from alphagate.core.records import Interval
from alphagate.plan import reasons as r

RANGE = Interval(low=0.92, high=1.18)
PEAK = r.PeakRun(concurrency=256, k=2, speedup=1.07, interval=None)
TAIL = r.KLowered(from_k=4, to_k=2, concurrency=64)

#: one record of every kind, by the slot of :class:`~alphagate.plan.reasons.PlanReasons` it fills
VERDICTS: list[typing.Any] = [
    r.TailPastBudget(
        concurrency=1,
        k=3,
        throughput_speedup=1.4,
        off_ms=10.0,
        on_ms=13.0,
        ratio=1.3,
        budget=1.1,
        slo_ms=None,
    ),
    r.NoKPays(
        concurrency=256,
        k_max=5,
        min_gain=1.05,
        best_k=1,
        best_speedup=0.97,
        best_interval=RANGE,
        pays_up_to=64,
    ),
    r.GainWithinError(concurrency=64, k=2, throughput_speedup=1.03, min_gain=1.05, pays_up_to=None),
    r.NoClassClearsGate(
        concurrency=64,
        k=2,
        gate_alpha=0.55,
        alpha_breakeven=0.5,
        margin=0.05,
        class_name="code",
        alpha_label="prior 0.3–0.5",
        speedup=0.98,
        pays_up_to=None,
    ),
    r.RangeHoldsOne(
        concurrency=64,
        k=2,
        speedup=1.05,
        interval=RANGE,
        alpha_priors=["chat"],
        settle=r.Settle(by="measure alpha", at=64, settled_interval=Interval(low=1.02, high=1.08)),
    ),
    r.PriorLowEnd(concurrency=64, k=2, throughput_speedup=1.2, low_end_speedup=0.99),
    r.Shipped(concurrency=64, k=3, speedup=1.6, interval=RANGE, peak=PEAK),
    r.ShippedForSome(
        concurrency=64,
        k=3,
        speedup=1.5,
        interval=None,
        peak=None,
        fleet_speedup=1.3,
        routed=[
            r.RoutedClass(name="code", alpha_label="0.4", gate_alpha=0.5, fails_at_concurrency=128)
        ],
    ),
]
CHANGES: list[typing.Any] = [
    r.P99Budget(budget=1.2, k=2, concurrency=1, throughput_speedup=1.3),
    r.AlphaNeeded(alpha=0.62, draft_acceptance_rate=0.48, k=2, concurrency=256),
    r.NoAlphaPays(concurrency=512),
    r.PaysUpTo(concurrency=64, k=2),
    r.MeasurePrior(class_name="chat", alpha_low=0.5, alpha_high=0.8),
]
QUALIFIERS: list[typing.Any] = [
    r.OnPriors(classes=["chat", "code"]),
    r.TailKept(action=r.RoutedForTail(classes=["code"])),
    r.TailPredicted(ratio=1.4, concurrency=1, budget=1.1),
    r.TailWithinBudget(ratio=1.05, concurrency=64, budget=1.1),
]
TAILS: list[typing.Any] = [TAIL, r.RoutedForTail(classes=["code"]), r.TailUnfixable(k=1)]


def _kinds(records: list[typing.Any]) -> list[str]:
    return [x.kind for x in records]


def test_every_kind_is_named_once_and_each_slot_has_its_own() -> None:
    every = _kinds(VERDICTS + CHANGES + QUALIFIERS + TAILS)
    assert len(set(every)) == len(every)
    # every record class the module exports with a kind is one of those above
    exported = {
        getattr(r, name).model_fields["kind"].default
        for name in r.__all__
        if isinstance(getattr(r, name), type) and "kind" in getattr(r, name).model_fields
    }
    assert exported == set(every)


@pytest.mark.parametrize("verdict", VERDICTS, ids=_kinds(VERDICTS))
def test_a_plans_reasons_read_back_as_the_records_they_were(verdict: typing.Any) -> None:
    reasons = r.PlanReasons(verdict=verdict, changes=CHANGES, qualifiers=QUALIFIERS, tail=TAIL)
    back = r.PlanReasons.model_validate_json(reasons.model_dump_json())
    assert back == reasons
    assert type(back.verdict) is type(verdict)
    assert [type(x) for x in back.changes] == [type(x) for x in CHANGES]
    assert [type(x) for x in back.qualifiers] == [type(x) for x in QUALIFIERS]
    assert type(back.tail) is r.KLowered


@pytest.mark.parametrize(
    ("slot", "records", "others"),
    [
        (r.VerdictReason, VERDICTS, CHANGES + QUALIFIERS + TAILS),
        (r.VerdictChange, CHANGES, VERDICTS + QUALIFIERS + TAILS),
        (r.Qualifier, QUALIFIERS, VERDICTS + CHANGES + TAILS),
        (r.TailAction, TAILS, VERDICTS + CHANGES + QUALIFIERS),
    ],
    ids=["verdict", "change", "qualifier", "tail"],
)
def test_a_slot_takes_its_own_kinds_only(
    slot: typing.Any, records: list[typing.Any], others: list[typing.Any]
) -> None:
    adapter: TypeAdapter[typing.Any] = TypeAdapter(slot)
    for record in records:
        assert adapter.validate_python(record.model_dump()) == record
    for record in others:
        with pytest.raises(ValidationError):
            adapter.validate_python(record.model_dump())


def test_a_record_refuses_a_field_it_does_not_have_and_stays_as_made() -> None:
    payload = {**r.PaysUpTo(concurrency=64, k=2).model_dump(), "speedup": 1.2}
    with pytest.raises(ValidationError, match="speedup"):
        TypeAdapter(r.VerdictChange).validate_python(payload)
    with pytest.raises(ValidationError):
        TAIL.to_k = 3  # type: ignore[misc]
