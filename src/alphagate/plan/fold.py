"""Measured α folded into the traffic classes (``simulate``/``plan --alpha-from``): the classes
that have no α of their own take it from measurement files (:mod:`alphagate.plan.measured`) —
per class, or one overall figure applied to every class when asked for. The CLI and the Python
API share it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from alphagate.core.errors import ConfigError
from alphagate.core.traffic import TrafficClass
from alphagate.plan.measured import apply_measurement, load_measurement, merge_measurements
from alphagate.specs.deployment import DeploymentConfig, SuffixDrafter

__all__ = ["fold_measurements", "measured_suffix"]


def fold_measurements(
    classes: tuple[TrafficClass, ...],
    paths: Sequence[str | Path],
    *,
    k: int | None = None,
    overall: bool = False,
    require_all: bool = False,
) -> tuple[TrafficClass, ...]:
    """``classes`` with α from the measurement files ``paths`` where a class has none; an α
    given with a class stays. ``k``: the drafts per step a file's ρ is inverted at when it does
    not say; ``overall``: apply one file's overall figure to every class without one;
    ``require_all``: refuse a class still without α. :class:`ConfigError` naming the field at
    fault (``alpha_from``, ``alpha_overall``)."""
    if overall and len(paths) > 1:
        raise ConfigError(
            "--alpha-overall applies one file's overall α: give one --alpha-from", "alpha_overall"
        )
    try:
        measured = merge_measurements([load_measurement(p, k) for p in paths])
        mix = apply_measurement(classes, measured, overall=overall)
    except ConfigError as exc:
        raise ConfigError(str(exc), "alpha_from") from None
    missing = [c.name for c in mix if not c.has_alpha]
    if require_all and missing:
        where = ", ".join(str(p) for p in paths)
        raise ConfigError(f"{where} has no α for {', '.join(missing)}", "alpha_from")
    return mix


def measured_suffix(dep: DeploymentConfig, paths: Sequence[str | Path]) -> DeploymentConfig:
    """``dep`` with the suffix trees' settings its measurement files were replayed with, so
    that the engine serves what was measured (a deployment of another drafter, or without a
    suffix measurement, as it is)."""
    if not isinstance(dep.drafter, SuffixDrafter) or not paths:
        return dep
    try:
        setting = merge_measurements([load_measurement(p) for p in paths]).suffix
    except ConfigError as exc:
        raise ConfigError(str(exc), "alpha_from") from None
    if setting is None:
        return dep
    drafter = dep.drafter.model_copy(update=setting.params.model_dump())
    return dep.model_copy(update={"drafter": drafter})
