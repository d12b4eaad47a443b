"""Acceptance figures of rollout plans: α by position per class as the plan assumes it (the values
given per position, one α, or a prior's documented range) beside the α measured by position, and
the acceptance length each class's α predicts at the K run at the target.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from alphagate import theory
from alphagate.measure.estimate import AcceptanceEstimate
from alphagate.plan.records import ClassRow, Plan
from alphagate.report.charts.acceptance import (
    alpha_line,
    alpha_panel,
    pmf_line,
    pmf_panel,
    positions,
)
from alphagate.report.charts.plan import as_plans, group_plans, k_at_target, plans_at
from alphagate.report.charts.spec import Chart, HLine, Line
from alphagate.report.charts.where import and_list

__all__ = ["MeasuredAlpha", "plan_acceptance_length_chart", "plan_alpha_chart", "same_classes"]


def _class_conditional(c: ClassRow, k: int) -> list[float]:
    """A class's conditional α at positions 1..k: the per-position α given (its last value
    repeated past its end), else its one α."""
    if c.alpha_by_pos:
        a = list(c.alpha_by_pos)
        return (a + [a[-1]] * k)[:k]
    return [c.alpha] * k


def _informative(c: ClassRow) -> bool:
    """Whether a class's planned α says more than one number: per position, or a prior's range."""
    return bool(c.alpha_by_pos) or c.alpha_low != c.alpha_high


def _classes_key(p: Plan) -> tuple[object, ...]:
    return tuple(
        (c.name, c.alpha, c.alpha_by_pos, c.alpha_low, c.alpha_high, c.alpha_source)
        for c in p.classes
    )


def same_classes(plans: Sequence[Plan]) -> list[tuple[Plan, ...]]:
    """The plans grouped by the α they assume per class: one α chart per group."""
    return group_plans(plans, _classes_key)


@dataclass(frozen=True)
class MeasuredAlpha:
    """A measured α by position to draw beside the plan's: of a class (None: all traffic), from
    a source in a few words (a bench run, a measure verb); ``elsewhere`` says where it was
    measured when that is not shown to be the plan's deployment
    (:func:`~alphagate.report.charts.where.elsewhere`)."""

    cls: str | None
    source: str
    estimate: AcceptanceEstimate
    elsewhere: str | None = None


def _planned_line(c: ClassRow, k: int) -> Line:
    """A class's planned α at positions 1..k, dashed; a prior with its range."""
    ranged = c.alpha_source == "prior"
    return Line(
        label=f"{c.name} planned ({c.alpha_source}{', prior range' if ranged else ''})",
        x=positions(k),
        y=tuple(_class_conditional(c, k)),
        role="planned",
        low=(c.alpha_low,) * k if ranged else None,
        high=(c.alpha_high,) * k if ranged else None,
        dashed=True,
        group=c.name,
    )


def _alpha_caption(series: Sequence[MeasuredAlpha], gated: bool) -> str:
    others = list(dict.fromkeys(m.elsewhere for m in series if m.elsewhere))
    where = (
        " " + "; ".join(others) + ": compare the shape by position, not the level."
        if others
        else ""
    )
    measured_note = (
        " Measured: by position with 95% Wilson intervals over the drafts that reached it." + where
        if series
        else ""
    )
    gate = " The gate line is the α each class must clear." if gated else ""
    return (
        "Planned (dashed): the α given per position, one α repeated at every position, "
        "or a prior with its documented range." + measured_note + gate
    )


def plan_alpha_chart(
    plans: Plan | Sequence[Plan], measured: Sequence[MeasuredAlpha] = ()
) -> Chart | None:
    """α by position per class as the plan assumes it — the values given per position, or a
    prior's range — beside the α measured by position (``measured``), with 95% intervals.

    None when there is nothing to read in it: every class has one α with no range and nothing
    measured is given (the α sources table says the same).
    """
    ps = as_plans(plans)
    if len({_classes_key(p) for p in ps}) != 1:
        raise ValueError("plan_alpha_chart: the plans assume different α")
    series = [m for m in measured if m.estimate.num_drafts > 0 and m.estimate.alpha_by_pos]
    if not series and not any(_informative(c) for c in ps[0].classes):
        return None
    ks = [k_at_target(q) for q in ps]
    k = max([*ks, *(len(m.estimate.alpha_by_pos) for m in series), 1])
    lines = [_planned_line(c, k) for c in ps[0].classes]
    for m in series:
        name = m.cls or "all traffic"
        lines.append(alpha_line(f"{name} measured ({m.source})", m.estimate, name))
    gates = list(dict.fromkeys(q.gate.alpha_min for q in ps if q.gate is not None))
    refs = tuple(HLine(g, f"gate α ≥ {g:.2f}") for g in gates)
    title = f"{plans_at(ps, article=False)}, K = {and_list([str(k) for k in ks])}"
    return Chart(
        key="alpha_by_position",
        title="α by position per class — " + ("planned and measured" if series else "as planned"),
        caption=_alpha_caption(series, bool(gates)),
        panels=(alpha_panel(title, lines, refs),),
    )


def plan_acceptance_length_chart(p: Plan) -> Chart:
    """Predicted tokens per target pass per class at the K run at the target."""
    k = k_at_target(p)
    lines = []
    for c in p.classes:
        per_pos = theory.unconditional_from_conditional(_class_conditional(c, k))
        pmf = list(theory.acceptance_length_pmf(per_pos))
        lines.append(pmf_line(c.name, pmf, group=c.name, role="planned"))
    return Chart(
        key="acceptance_length",
        title="Acceptance length per class — predicted",
        caption=f"K = {k}; P(j tokens) = α_1…α_(j−1)·(1 − α_j), all K accepted + bonus = K + 1.",
        panels=(pmf_panel(f"predicted from α, K = {k}", lines),),
    )
