"""The base records: frozen and strict, finite-or-None numbers, intervals and their text, and the
results schema every verb writes and reads back."""

from __future__ import annotations

import math
from typing import Literal

import pytest
from pydantic import ValidationError

from alphagate.core.records import (
    RESULTS_SCHEMA,
    Frozen,
    Interval,
    Results,
    finite,
    results_payload,
)


class _Point(Frozen):
    x: float


class _Answer(Results):
    verb: Literal["model speedup"] = "model speedup"
    value: float


def test_records_are_frozen_and_refuse_unknown_fields() -> None:
    p = _Point(x=1.0)
    with pytest.raises(ValidationError):
        p.x = 2.0  # type: ignore[misc]
    with pytest.raises(ValidationError, match="extra"):
        _Point(x=1.0, y=2.0)  # type: ignore[call-arg]


def test_finite_keeps_numbers_json_can_hold() -> None:
    assert finite(1.5) == 1.5 and finite(0.0) == 0.0
    assert finite(math.nan) is None and finite(math.inf) is None and finite(-math.inf) is None
    assert finite(None) is None


def test_an_interval_straddles_only_what_lies_strictly_inside() -> None:
    iv = Interval(low=0.9, high=1.2)
    assert iv.straddles(1.0) and not iv.straddles(0.9) and not iv.straddles(1.2)
    assert not iv.straddles(1.3)
    assert Interval(low=None, high=1.2).straddles(-1e9)  # an open end is beyond any value
    assert Interval(low=0.9, high=None).straddles(1e9)


def test_an_interval_prints_its_ends_and_an_open_one_as_an_ellipsis() -> None:
    assert Interval(low=1.15, high=1.4217).text(suffix="×") == "[1.15–1.42×]"
    assert Interval(low=None, high=0.5).text(".1f") == "[…–0.5]"
    assert Interval(low=0.5, high=None).text(".0%") == "[50%–…]"


def test_results_carry_the_schema_and_read_back_from_their_payload() -> None:
    a = _Answer(value=2.94)
    payload = a.payload()
    assert payload == {"schema": RESULTS_SCHEMA, "verb": "model speedup", "value": 2.94}
    assert _Answer.model_validate(payload) == a
    with pytest.raises(ValidationError):
        _Answer.model_validate({**payload, "schema": "alphagate.results/v2"})


def test_a_plain_record_gets_the_schema_and_verb_in_front() -> None:
    assert results_payload("demo", _Point(x=1.0)) == {
        "schema": "alphagate.results/v1",
        "verb": "demo",
        "x": 1.0,
    }
