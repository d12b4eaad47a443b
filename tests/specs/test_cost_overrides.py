"""Coefficients and engine settings given by hand (specs/calibration.py), on top of a deployment
or a profile's: what the CLI's cost flags are generated from, and what the Python API applies
the same way."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from alphagate.specs.calibration import CostOverrides, EngineSettings, coefficient_values
from alphagate.specs.deployment import DeploymentConfig, drafter_for


def test_nothing_given_leaves_the_deployment_as_it_was() -> None:
    dep = DeploymentConfig()
    assert CostOverrides().apply(dep) == dep
    assert EngineSettings().apply(dep) == dep


def test_each_value_given_sets_its_deployment_field() -> None:
    dep = CostOverrides(
        step_overhead_ms=1.5, spec_overhead_ms=0.3, target_time_scale=1.2, draft_tp=1
    ).apply(DeploymentConfig(tp=2))
    assert (dep.step_overhead_ms, dep.spec_step_overhead_ms) == (1.5, 0.3)
    assert (dep.target_time_scale, dep.draft_tp, dep.tp) == (1.2, 1, 2)
    assert coefficient_values(dep)["step_overhead_s"] == pytest.approx(1.5e-3)


def test_the_draft_forward_time_is_the_drafters_own() -> None:
    """An n-gram lookup runs on the CPU once per step (``cpu_cost_ms``); a model drafter's host
    time is per forward (``forward_overhead_ms``)."""
    ngram = DeploymentConfig(drafter=drafter_for("ngram", None))
    eagle = DeploymentConfig()
    over = CostOverrides(draft_overhead_ms=0.25)
    assert over.apply(ngram).drafter.cpu_cost_ms == 0.25  # type: ignore[union-attr]
    assert over.apply(eagle).drafter.forward_overhead_ms == 0.25  # type: ignore[union-attr]
    assert coefficient_values(over.apply(eagle))["draft_forward_overhead_s"] == pytest.approx(
        0.25e-3
    )


def test_values_outside_the_bounds_of_their_flags_are_refused() -> None:
    for bad in ({"step_overhead_ms": -1.0}, {"target_time_scale": 0.0}, {"draft_tp": 65}):
        with pytest.raises(ValidationError):
            CostOverrides(**bad)  # type: ignore[arg-type]
