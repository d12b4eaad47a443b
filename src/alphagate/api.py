"""The Python API's verbs that answer as their commands print: a plan whose verdict, reasons and
"what would change it" are worded (the builder in :mod:`alphagate.plan.build` returns them as
typed reasons; :mod:`alphagate.report.reasons` words them, as the CLI does)."""

from __future__ import annotations

from alphagate.plan.build import build_plan as _build_plan
from alphagate.plan.records import Plan, PlanRequest
from alphagate.report.reasons import worded

__all__ = ["build_plan"]


def build_plan(request: PlanRequest) -> Plan:
    """The rollout plan for ``request``, worded as ``alphagate plan`` prints it."""
    return worded(_build_plan(request))
