"""Answers of the ``alphagate model`` verb: typed result records built from the closed forms.

Each builder takes validated inputs and returns one frozen record; renderers in
:mod:`alphagate.report.model` turn records into tables and the CLI dumps them as JSON. The draft
and verify costs default to Leviathan's idealisation (c = 0, v = 1) in every builder and flag.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from pydantic import Field

from alphagate import theory
from alphagate.core.records import Frozen
from alphagate.core.traffic import TrafficClass, validate_classes

__all__ = [
    "BlendAnswer",
    "BlendClassRow",
    "BreakevenAnswer",
    "ConvertAnswer",
    "CostModel",
    "OptimalKAnswer",
    "RequiredAnswer",
    "SpeedupAnswer",
    "TableAnswer",
    "blend_answer",
    "breakeven_answer",
    "convert_answer",
    "optimal_k_answer",
    "required_answer",
    "speedup_answer",
    "table_answer",
]


class CostModel(Frozen):
    """Draft and verify cost ratios in plain-decode-step units (see :data:`GLOSSARY`)."""

    draft_cost: float = Field(
        default=0.0, ge=0.0, description="c: one draft forward ÷ one decode step"
    )
    verify_cost: float = Field(
        default=1.0, gt=0.0, description="v: K+1-token verify ÷ one decode step"
    )


def _opt(x: float) -> float | None:
    """NaN (unreachable / undefined) becomes None so JSON shows ``null``."""
    return None if math.isnan(x) else x


class SpeedupAnswer(Frozen):
    """Exact speedup at (α, K, c, v), with the linear rule of thumb 1 + K·α next to it."""

    alpha: float
    k: int
    draft_cost: float
    verify_cost: float
    expected_tokens_per_pass: float
    speedup: float
    draft_acceptance_rate: float
    mean_acceptance_length: float
    upper_bound_tokens_per_pass: float
    alpha_breakeven: float | None
    operations_factor: float
    compute_bound_speedup: float
    linear_expected_tokens: float
    linear_speedup: float
    linear_overestimate_ratio: float


def speedup_answer(alpha: float, k: int, costs: CostModel) -> SpeedupAnswer:
    c, v = costs.draft_cost, costs.verify_cost
    e = float(theory.expected_tokens_per_pass(alpha, k))
    lin = float(theory.linear_expected_tokens(alpha, k))
    overhead = float(theory.linear_overhead(k, c, v))
    return SpeedupAnswer(
        alpha=alpha,
        k=k,
        draft_cost=c,
        verify_cost=v,
        expected_tokens_per_pass=e,
        speedup=float(theory.speedup(alpha, k, c, v)),
        draft_acceptance_rate=float(theory.draft_acceptance_rate(alpha, k)),
        mean_acceptance_length=float(theory.mean_acceptance_length(alpha, k)),
        upper_bound_tokens_per_pass=float(
            min(k + 1.0, 1.0 / (1.0 - alpha)) if alpha < 1 else k + 1.0
        ),
        alpha_breakeven=_opt(float(theory.alpha_breakeven(k, c, v))),
        operations_factor=float(theory.operations_factor(alpha, k, c)),
        compute_bound_speedup=float(theory.compute_bound_speedup(alpha, k, c)),
        linear_expected_tokens=lin,
        linear_speedup=float(theory.linear_speedup(alpha, k, overhead)),
        linear_overestimate_ratio=lin / e,
    )


class BreakevenAnswer(Frozen):
    """α at which speculation stops paying (S = 1), exact and per the linear rule overhead / K."""

    k: int
    draft_cost: float
    verify_cost: float
    alpha_breakeven: float | None
    draft_acceptance_rate_breakeven: float | None
    mean_acceptance_length_breakeven: float | None
    alpha_breakeven_linear: float
    reason: str | None


def breakeven_answer(k: int, costs: CostModel) -> BreakevenAnswer:
    c, v = costs.draft_cost, costs.verify_cost
    a = _opt(float(theory.alpha_breakeven(k, c, v)))
    reason = None
    if a is None:
        reason = (
            f"an iteration costs K·c + v = {k * c + v:.3g} decode steps, more than the K + 1 = "
            f"{k + 1} tokens even perfect acceptance yields"
        )
    return BreakevenAnswer(
        k=k,
        draft_cost=c,
        verify_cost=v,
        alpha_breakeven=a,
        draft_acceptance_rate_breakeven=None
        if a is None
        else float(theory.draft_acceptance_rate(a, k)),
        mean_acceptance_length_breakeven=None
        if a is None
        else float(theory.mean_acceptance_length(a, k)),
        alpha_breakeven_linear=float(
            theory.linear_alpha_breakeven(k, theory.linear_overhead(k, c, v))
        ),
        reason=reason,
    )


class RequiredAnswer(Frozen):
    """Smallest α that reaches a target speedup, or None with the reason it is unreachable."""

    target_speedup: float
    k: int
    draft_cost: float
    verify_cost: float
    alpha_required: float | None
    draft_acceptance_rate_required: float | None
    mean_acceptance_length_required: float | None
    alpha_required_linear: float | None
    max_speedup: float
    reason: str | None


def required_answer(target: float, k: int, costs: CostModel) -> RequiredAnswer:
    c, v = costs.draft_cost, costs.verify_cost
    a = _opt(float(theory.alpha_for_speedup(target, k, c, v)))
    max_speedup = float(theory.speedup(1.0, k, c, v))
    reason = None
    if a is None:
        reason = (
            f"at K={k}, c={c:g}, v={v:g} even α = 1 gives only {max_speedup:.3f}×; "
            f"raise K or lower the draft/verify cost"
        )
    overhead = float(theory.linear_overhead(k, c, v))
    lin = (target * (1.0 + overhead) - 1.0) / k
    return RequiredAnswer(
        target_speedup=target,
        k=k,
        draft_cost=c,
        verify_cost=v,
        alpha_required=a,
        draft_acceptance_rate_required=None
        if a is None
        else float(theory.draft_acceptance_rate(a, k)),
        mean_acceptance_length_required=None
        if a is None
        else float(theory.mean_acceptance_length(a, k)),
        alpha_required_linear=lin if 0.0 <= lin <= 1.0 else None,
        max_speedup=max_speedup,
        reason=reason,
    )


class OptimalKAnswer(Frozen):
    """Best K in 1..k_max (0 = leave speculation off) and the speedup at every K."""

    alpha: float
    draft_cost: float
    verify_cost: float
    k_max: int
    k: int
    speedup: float
    speedup_by_k: list[float]
    oracle_bound_tokens_per_pass: float | None


def optimal_k_answer(alpha: float, costs: CostModel, k_max: int) -> OptimalKAnswer:
    c, v = costs.draft_cost, costs.verify_cost
    k, s = theory.optimal_k(alpha, c, v, k_max)
    by_k = theory.speedup(alpha, np.arange(1, k_max + 1), c, v)
    return OptimalKAnswer(
        alpha=alpha,
        draft_cost=c,
        verify_cost=v,
        k_max=k_max,
        k=k,
        speedup=s,
        speedup_by_k=[float(x) for x in by_k],
        oracle_bound_tokens_per_pass=None if alpha >= 1 else 1.0 / (1.0 - alpha),
    )


class BlendClassRow(Frozen):
    name: str
    share: float
    alpha: float
    expected_tokens_per_pass: float
    speedup: float
    time_share: float
    net_win: bool


class BlendAnswer(Frozen):
    """Blended speedup of several classes computed from time per token, next to the naive α."""

    k: int
    draft_cost: float
    verify_cost: float
    classes: list[BlendClassRow]
    blended_speedup: float
    equivalent_alpha: float
    naive_mean_alpha: float
    naive_speedup: float
    alpha_breakeven: float | None
    net_win: bool


def blend_answer(classes: list[TrafficClass], k: int, costs: CostModel) -> BlendAnswer:
    """Blend by time per token; a per-position class enters with the i.i.d. α of the same E."""
    validate_classes(classes)
    b = theory.blend(
        [c.share for c in classes],
        [theory.equivalent_alpha(c.conditional(k)) for c in classes],
        k,
        costs.draft_cost,
        costs.verify_cost,
    )
    rows = [
        BlendClassRow(
            name=cls.name,
            share=float(b.shares[i]),
            alpha=float(b.alphas[i]),
            expected_tokens_per_pass=float(b.expected_tokens_per_pass[i]),
            speedup=float(b.speedups[i]),
            time_share=float(b.time_shares[i]),
            net_win=bool(b.speedups[i] > 1.0),
        )
        for i, cls in enumerate(classes)
    ]
    return BlendAnswer(
        k=k,
        draft_cost=costs.draft_cost,
        verify_cost=costs.verify_cost,
        classes=rows,
        blended_speedup=b.blended_speedup,
        equivalent_alpha=b.equivalent_alpha,
        naive_mean_alpha=b.naive_mean_alpha,
        naive_speedup=b.naive_speedup,
        alpha_breakeven=_opt(float(theory.alpha_breakeven(k, costs.draft_cost, costs.verify_cost))),
        net_win=b.blended_speedup > 1.0,
    )


Quantity = Literal["alpha", "draft_acceptance_rate", "mean_acceptance_length"]


class ConvertAnswer(Frozen):
    """One acceptance figure expressed as all three quantities (i.i.d. assumption for α)."""

    k: int
    given: Quantity
    given_value: float
    alpha: float | None
    draft_acceptance_rate: float
    mean_acceptance_length: float
    per_position_unconditional: list[float] | None
    reason: str | None


def convert_answer(given: Quantity, value: float, k: int) -> ConvertAnswer:
    if given == "alpha":
        alpha: float | None = value
        rho = float(theory.draft_acceptance_rate(value, k))
    elif given == "draft_acceptance_rate":
        rho = value
        alpha = _opt(float(theory.alpha_from_draft_acceptance_rate(value, k)))
    else:
        rho = float(theory.draft_acceptance_rate_from_mean_acceptance_length(value, k))
        alpha = _opt(float(theory.alpha_from_mean_acceptance_length(value, k)))
    reason = None if alpha is not None else f"{given}={value:g} is outside what K={k} can produce"
    per_pos = None
    if alpha is not None:
        per_pos = [float(x) for x in theory.unconditional_from_conditional(np.full(k, alpha))]
    return ConvertAnswer(
        k=k,
        given=given,
        given_value=value,
        alpha=alpha,
        draft_acceptance_rate=rho,
        mean_acceptance_length=float(
            theory.mean_acceptance_length_from_draft_acceptance_rate(rho, k)
        ),
        per_position_unconditional=per_pos,
        reason=reason,
    )


class TableAnswer(Frozen):
    """Speedup grid ``speedup[v][k][alpha]`` with break-even per (v, K) and the linear gap."""

    alphas: list[float]
    ks: list[int]
    draft_cost: float
    verify_costs: list[float]
    speedup: list[list[list[float]]]
    linear_speedup: list[list[list[float]]]
    expected_tokens_per_pass: list[list[float]]
    linear_expected_tokens: list[list[float]]
    alpha_breakeven: list[list[float | None]]
    alpha_breakeven_linear: list[list[float]]


def table_answer(
    alphas: list[float], ks: list[int], draft_cost: float, verify_costs: list[float]
) -> TableAnswer:
    a = np.asarray(alphas)[None, None, :]  # [1, 1, n_alpha]
    k = np.asarray(ks)[None, :, None]  # [1, n_k, 1]
    v = np.asarray(verify_costs)[:, None, None]  # [n_v, 1, 1]
    s = theory.speedup(a, k, draft_cost, v)  # [n_v, n_k, n_alpha]
    overhead = theory.linear_overhead(k, draft_cost, v)
    lin_s = theory.linear_speedup(a, k, overhead)
    be = theory.alpha_breakeven(k[..., 0], draft_cost, v[..., 0])  # [n_v, n_k]
    be_lin = theory.linear_alpha_breakeven(k[..., 0], overhead[..., 0])
    e = theory.expected_tokens_per_pass(a[0], k[0])  # [n_k, n_alpha]
    e_lin = theory.linear_expected_tokens(a[0], k[0])
    return TableAnswer(
        alphas=list(alphas),
        ks=list(ks),
        draft_cost=draft_cost,
        verify_costs=list(verify_costs),
        speedup=np.broadcast_to(s, (len(verify_costs), len(ks), len(alphas))).tolist(),
        linear_speedup=np.broadcast_to(lin_s, (len(verify_costs), len(ks), len(alphas))).tolist(),
        expected_tokens_per_pass=e.tolist(),
        linear_expected_tokens=e_lin.tolist(),
        alpha_breakeven=[[_opt(float(x)) for x in row] for row in np.atleast_2d(be)],
        alpha_breakeven_linear=np.broadcast_to(be_lin, (len(verify_costs), len(ks))).tolist(),
    )
