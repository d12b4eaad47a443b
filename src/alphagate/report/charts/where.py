"""Which deployment and which servers a figure shows, in words for its caption: the baseline and
the candidate of a bench, the model it measured, and whether that is the deployment of the plans
beside it (the rule ``gate`` applies: the served model name).
"""

from __future__ import annotations

from collections.abc import Sequence

from alphagate.bench.records import BenchResult
from alphagate.plan.records import Plan

__all__ = [
    "and_list",
    "bench_model",
    "bench_name",
    "bench_sides",
    "bench_where",
    "elsewhere",
    "plan_deployment_name",
    "same_deployment",
    "where_note",
]


def and_list(items: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def plan_deployment_name(p: Plan) -> str:
    """The plan's deployment in a few words: model, dtype, GPUs."""
    d = p.deployment_detail
    return f"{d.model} {d.weight_dtype} on {d.tp}× {d.gpu}"


def bench_model(b: BenchResult) -> str | None:
    """The model name the bench's requests carried, None when they named none."""
    return b.model or None


def same_deployment(p: Plan, b: BenchResult) -> bool:
    """Whether a bench measured the plan's deployment: it sent the plan's served model name (the
    rule ``gate`` applies; a bench that sent no model name is not known to be the plan's)."""
    return bench_model(b) == p.served_model


def _urls(b: BenchResult) -> dict[str, str]:
    """Each target's server, by target (``baseline``, ``candidate`` or ``default``)."""
    return {lv.target: lv.url for lv in b.levels}


def _drafts(b: BenchResult, target: str) -> bool:
    return any(
        lv.acceptance is not None and lv.acceptance.num_drafts > 0
        for lv in b.levels
        if lv.target == target
    )


def bench_name(b: BenchResult) -> str:
    """``measured: CANDIDATE vs BASELINE`` (or the one server measured)."""
    urls = _urls(b)
    if "candidate" in urls:
        return f"measured: {urls['candidate']} vs {urls.get('baseline', '?')}"
    return f"measured: {next(iter(urls.values()), '?')}"


def bench_sides(b: BenchResult) -> str:
    """Which server is the baseline (speculation off) and which the candidate, in words."""
    urls = _urls(b)
    if "candidate" not in urls:
        return f"One server, {next(iter(urls.values()), '?')}: no baseline to compare with"
    base = "its counters show drafts" if _drafts(b, "baseline") else "speculation off"
    cand = "speculative" if _drafts(b, "candidate") else "speculative; no drafts counted"
    return (
        f"Baseline: {urls.get('baseline', '?')} ({base}, black); candidate: "
        f"{urls['candidate']} ({cand})"
    )


def bench_where(b: BenchResult) -> str:
    """Where a bench measured: the model it sent, else its candidate's (or only) server."""
    model = bench_model(b)
    urls = _urls(b)
    url = urls.get("candidate", next(iter(urls.values()), "?"))
    return f"model {model} at {url}" if model else f"{url} (model not recorded)"


def elsewhere(b: BenchResult, plans: Sequence[Plan]) -> str | None:
    """The clause that says a bench is not the deployment of the plans beside it ("Measured on
    …, not the plan's deployment (…)"); None when it is one plan's, or when there is no plan."""
    if not plans or any(same_deployment(p, b) for p in plans):
        return None
    deps = and_list(list(dict.fromkeys(plan_deployment_name(p) for p in plans)))
    known = "not" if bench_model(b) else "not known to be"
    return f"Measured on {bench_where(b)}, {known} the plan's deployment ({deps})"


def where_note(b: BenchResult, plans: Sequence[Plan]) -> str:
    """The caption's last sentence: where the bench measured, against the plans beside it."""
    other = elsewhere(b, plans)
    if other is not None:
        return f" {other}: compare its shape with the prediction, not its values."
    if plans:
        return f" Measured on the plan's deployment (model {bench_model(b)})."
    return ""
