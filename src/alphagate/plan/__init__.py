"""The staged rollout plan: records, predictions, the builder and the runbook."""

from alphagate.plan.build import build_plan
from alphagate.plan.records import Plan, PlanRequest

__all__ = ["Plan", "PlanRequest", "build_plan"]
