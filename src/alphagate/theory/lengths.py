"""Drafts of variable length (suffix decoding drafts 0 … K tokens per step, by how much of the
context its suffix trees match): acceptance as a joint distribution over engine steps,
``joint[L, a]`` — the share (or count) of steps that drafted L tokens and accepted a of them,
``[..., K + 1, K + 1]`` with a ≤ L (L = 0: a step without a draft).

Everything a fixed-K chain takes from α follows from the joint instead: vLLM's counters (a step
is a draft only when it drafted, ``vllm/v1/core/sched/scheduler.py``, ``update_from_output``),

    drafts D = Σ_{L≥1} n_{L,a}      draft tokens = Σ L·n_{L,a}      accepted A = Σ a·n_{L,a}
    c_i = Σ_{a≥i} n_{L,a}           ρ = A ÷ draft tokens            τ = 1 + A ÷ D

the tokens a decoding sequence emits per step, 1 + Σ a·p_{L,a} (over every step), and the verify
positions it schedules, 1 + Σ L·p_{L,a}. α at position i is conditional on a draft reaching it —
drafted there, the first i − 1 tokens accepted: α_i = c_i ÷ Σ_{L≥i, a≥i−1} n_{L,a} (vLLM's
c_i ÷ c_{i−1} counts the steps that never drafted an i-th token). A fixed-K chain is the joint
with all its mass on L = K (:func:`chain_joint`).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from alphagate.core.traffic import TrafficClass
from alphagate.theory._arrays import as_float
from alphagate.theory.roots import bisect

__all__ = [
    "LengthCounters",
    "chain_joint",
    "conditional_alpha",
    "draft_lengths",
    "equivalent_alpha_at_lengths",
    "joint_from_lengths",
    "length_counters",
    "mean_drafted",
    "profile_class",
    "rate_and_length",
    "tokens_per_step",
    "truncate_joint",
]

FloatArray = npt.NDArray[np.float64]


class LengthCounters(NamedTuple):
    """vLLM's counters of a joint, and the denominators of α conditional on a draft reaching
    each position (summed over the joint's last two axes)."""

    drafts: FloatArray
    draft_tokens: FloatArray
    accepted: FloatArray
    accepted_per_pos: FloatArray  # [..., K]: c_i
    reached_per_pos: FloatArray  # [..., K]: steps whose draft reached position i
    histogram: FloatArray  # [..., K + 1]: drafting steps that accepted exactly a


def _tail_sum(x: FloatArray, axis: int) -> FloatArray:
    """Σ over indices ≥ each index along ``axis`` (a reversed cumulative sum)."""
    return np.flip(np.cumsum(np.flip(x, axis), axis), axis)


def length_counters(joint: npt.ArrayLike) -> LengthCounters:
    """Counters of a joint ``[..., K + 1, K + 1]`` (L drafted × a accepted)."""
    j = as_float(joint)
    k = j.shape[-1] - 1
    n = np.arange(k + 1, dtype=np.float64)
    by_a = j[..., 1:, :].sum(axis=-2)  # steps with a draft, by accepted
    reached = _tail_sum(_tail_sum(j, -2), -1)  # [..., L, a]: Σ over L' ≥ L and a' ≥ a
    i = np.arange(1, k + 1)
    return LengthCounters(
        drafts=by_a.sum(axis=-1),
        draft_tokens=(j.sum(axis=-1) * n).sum(axis=-1),
        accepted=(by_a * n).sum(axis=-1),
        accepted_per_pos=_tail_sum(by_a, -1)[..., 1:],
        reached_per_pos=reached[..., i, i - 1],
        histogram=by_a,
    )


def conditional_alpha(joint: npt.ArrayLike) -> FloatArray:
    """α_i = c_i ÷ (steps whose draft reached position i), ``[..., K]``; NaN where none did."""
    c = length_counters(joint)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(c.reached_per_pos > 0, c.accepted_per_pos / c.reached_per_pos, np.nan)


def draft_lengths(joint: npt.ArrayLike) -> FloatArray:
    """The share of steps that draft L tokens, ``[..., K + 1]`` (L = 0 … K)."""
    j = as_float(joint)
    return np.asarray(j.sum(axis=-1) / j.sum(axis=(-1, -2))[..., None])


def equivalent_alpha_at_lengths(joint: npt.ArrayLike) -> float:
    """The one α per reached position that, with the joint's own draft lengths
    (:func:`joint_from_lengths`), gives the joint's tokens per step: what a fixed-K gate's α is
    for drafts of variable length (ρ and τ at that α and those lengths equal the joint's only
    when acceptance does not vary with position)."""
    j = as_float(joint)
    k = j.shape[-1] - 1
    # P(L ≥ i), i = 1…K: position i is drafted, and accepted with α^i (tokens_per_step of
    # joint_from_lengths at a constant α, in closed form: the bisection calls it often)
    reached = draft_lengths(j)[::-1].cumsum()[::-1][1:]
    powers = np.arange(1, k + 1)
    want = float(tokens_per_step(j))

    def at(a: float) -> float:
        return 1.0 + float((a**powers * reached).sum())

    if want <= at(0.0) + 1e-12:
        return 0.0
    if want >= at(1.0) - 1e-12:
        return 1.0
    return bisect(lambda a: at(a) >= want, 0.0, 1.0, tol=1e-10)


def rate_and_length(alpha: float, lengths: npt.ArrayLike) -> tuple[float, float]:
    """(ρ, τ) of drafts of these lengths (``[K + 1]``) at one α per reached position."""
    p = as_float(lengths)
    c = length_counters(joint_from_lengths(p, np.full(p.size - 1, alpha)))
    rho = float(c.accepted / c.draft_tokens) if c.draft_tokens > 0 else 0.0
    tau = 1.0 + float(c.accepted / c.drafts) if c.drafts > 0 else 1.0
    return rho, tau


def profile_class(
    name: str, share: float, steps: npt.ArrayLike | list[list[float]], source: str = "given"
) -> TrafficClass:
    """A traffic class whose drafts vary in length: its step joint (rows L = 0…K, counts or
    shares; ragged lists or a square array) and, for what reads one α per class, the α per
    reached position that gives its tokens per step at its lengths
    (:func:`equivalent_alpha_at_lengths`)."""
    if isinstance(steps, list):
        k = len(steps) - 1
        joint = np.zeros((k + 1, k + 1))
        for n, row in enumerate(steps):
            joint[n, : n + 1] = row[: n + 1]
    else:
        joint = as_float(steps)
    k = joint.shape[-1] - 1
    return TrafficClass(
        name=name,
        share=share,
        alpha=equivalent_alpha_at_lengths(joint),
        draft_steps=tuple(tuple(float(x) for x in joint[n, : n + 1]) for n in range(k + 1)),
        source=source,
    )


def tokens_per_step(joint: npt.ArrayLike) -> FloatArray:
    """Tokens a decoding sequence emits per engine step: 1 + E[a] over every step (a step
    without a draft emits one)."""
    j = as_float(joint)
    p = j / j.sum(axis=(-1, -2), keepdims=True)
    return np.asarray(1.0 + (p.sum(axis=-2) * np.arange(j.shape[-1])).sum(axis=-1))


def mean_drafted(joint: npt.ArrayLike) -> FloatArray:
    """Draft tokens a decoding sequence puts in the verify pass per step: E[L] over every step."""
    j = as_float(joint)
    p = j / j.sum(axis=(-1, -2), keepdims=True)
    return np.asarray((p.sum(axis=-1) * np.arange(j.shape[-2])).sum(axis=-1))


def truncate_joint(joint: npt.ArrayLike, k: int) -> FloatArray:
    """The joint when at most ``k`` draft tokens are verified per step (the scheduler cuts a
    longer draft, ``vllm/v1/core/sched/scheduler.py``): L → min(L, k), a → min(a, k)."""
    j = as_float(joint)
    big = j.shape[-1] - 1
    if k >= big:
        return np.array(j, dtype=np.float64)
    out = np.array(j[..., : k + 1, : k + 1], dtype=np.float64)
    out[..., k, :] += j[..., k + 1 :, : k + 1].sum(axis=-2)
    out[..., :, k] += j[..., : k + 1, k + 1 :].sum(axis=-1)
    out[..., k, k] += j[..., k + 1 :, k + 1 :].sum(axis=(-1, -2))
    return out


def joint_from_lengths(lengths: npt.ArrayLike, alpha_by_pos: npt.ArrayLike) -> FloatArray:
    """The joint of drafts whose lengths follow ``lengths`` (``[K + 1]``, L = 0 … K) and whose
    position i is accepted with conditional probability α_i when reached (``[K]``): P(a ≥ j | L)
    = Π_{i≤j} α_i for j ≤ L."""
    p = as_float(lengths)
    k = p.size - 1
    reach = np.concatenate([[1.0], np.cumprod(as_float(alpha_by_pos)[:k])])  # P(a ≥ j), j = 0…K
    out = np.zeros((k + 1, k + 1))
    for n in range(k + 1):
        r = reach[: n + 1]
        out[n, : n + 1] = p[n] * (r - np.append(r[1:], 0.0))
    return out


def chain_joint(alpha_by_pos: npt.ArrayLike) -> FloatArray:
    """A chain of K drafts every step (EAGLE, a draft model): all mass on L = K."""
    a = as_float(alpha_by_pos)
    lengths = np.zeros(a.size + 1)
    lengths[-1] = 1.0
    return joint_from_lengths(lengths, a)
