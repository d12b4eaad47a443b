"""A measurement's results: one record for every source, read back from its JSON, with an exit
code on its error (2: bad or unreachable source, 3: not enough seen yet)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from alphagate.core.errors import ConfigError
from alphagate.measure.estimate import estimate
from alphagate.measure.results import MeasureError, MeasureResult, SeriesPoint


def test_a_result_reads_back_from_its_payload() -> None:
    est = estimate(100, 300, 150.0, [80.0, 50.0, 20.0])
    r = MeasureResult(
        verb="measure live",
        source="http://h:8000/metrics",
        overall=est,
        classes={"chat": est},
        series=[
            SeriesPoint(
                end=10.0, num_drafts=100, draft_acceptance_rate=0.5, mean_acceptance_length=2.5
            )
        ],
        models=["llama"],
    )
    payload = r.payload()
    assert payload["schema"] == "alphagate.results/v1" and payload["verb"] == "measure live"
    assert MeasureResult.model_validate(payload) == r
    assert r.overall is not None and r.overall.draft_acceptance_rate == pytest.approx(0.5)


def test_only_the_measure_verbs_are_results_of_a_measurement() -> None:
    with pytest.raises(ValidationError):
        MeasureResult(verb="plan", source="x", overall=None)  # type: ignore[arg-type]


def test_an_error_says_bad_input_or_not_enough_yet() -> None:
    bad = MeasureError("--url: cannot connect")
    assert isinstance(bad, ConfigError) and bad.exit_code == 2
    assert MeasureError("no drafts yet", exit_code=3).exit_code == 3
