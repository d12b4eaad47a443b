"""Acceptance estimated from counts, with 95% confidence intervals: the one record every
``alphagate measure`` source produces and every consumer (``plan --alpha-from``, ``gate``,
``report``) reads.

From vLLM's counters over a window — drafts D, draft tokens, accepted tokens A and accepted tokens
per position c_i (vLLM increments c_i when the first i + 1 drafts of a step were accepted,
``vllm/v1/spec_decode/metrics.py``) — the number of drafts a step accepts has the histogram
h_j = c_{j−1} − c_j (c_{−1} = D, c_K = 0). So the counts determine:

    τ = 1 + A / D                      (mean acceptance length, bonus included)
    ρ = A / (K · D)                    (draft acceptance rate)
    α_i = c_i / c_{i−1}                (conditional acceptance at position i + 1)

and their sampling error: τ's standard error is sd(a) / √D with sd(a) from the histogram; α_i is
a binomial proportion over the c_{i−1} steps that reached position i + 1 (Wilson interval). Steps
are treated as independent draws; steps of one request share its prompt, so the intervals are a
little narrow for traffic with very few requests.
"""

from __future__ import annotations

import math

import numpy as np
from pydantic import Field

from alphagate.core.records import Frozen
from alphagate.theory.acceptance import alpha_from_draft_acceptance_rate
from alphagate.theory.intervals import Z_95, wilson_interval

__all__ = ["AcceptanceEstimate", "Interval", "estimate", "wilson"]


class Interval(Frozen):
    """A 95% confidence interval."""

    low: float
    high: float


def wilson(successes: float, trials: float) -> Interval | None:
    """The Wilson score interval (:func:`alphagate.theory.intervals.wilson_interval`) as a record;
    None without trials."""
    if trials <= 0:
        return None
    low, high = wilson_interval(min(max(successes, 0.0), trials), trials)
    return Interval(low=float(low), high=float(high))


class AcceptanceEstimate(Frozen):
    """Acceptance over one window (or one class), in vLLM's semantics, with 95% intervals."""

    num_drafts: float = Field(description="speculative steps (vLLM num_drafts)")
    num_draft_tokens: float
    num_accepted_tokens: float
    k: int | None = Field(description="draft tokens per step")
    accepted_per_pos: list[float] = Field(description="vLLM's per-position counters, c_i")
    draft_acceptance_rate: float | None = Field(description="ρ = accepted ÷ drafted")
    draft_acceptance_rate_ci: Interval | None
    mean_acceptance_length: float | None = Field(description="τ = 1 + accepted ÷ drafts")
    mean_acceptance_length_ci: Interval | None
    alpha_iid: float | None = Field(description="the i.i.d. conditional α that gives this ρ at K")
    alpha_iid_ci: Interval | None
    per_position_acceptance: list[float] = Field(description="c_i ÷ drafts (unconditional)")
    alpha_by_pos: list[float | None] = Field(description="conditional α_i = c_i ÷ c_{i−1}")
    alpha_by_pos_ci: list[Interval | None]
    acceptance_histogram: list[float] = Field(
        description="steps that accepted exactly j drafts, j = 0..K (empty without per-position counts)"
    )
    sglang_accept_length: float | None = Field(
        default=None,
        description="SGLang's accept length (τ) where it has no counts: a gauge or log average",
    )


def _alpha(rho: float, k: int) -> float | None:
    a = float(alpha_from_draft_acceptance_rate(min(max(rho, 0.0), 1.0), k))
    return None if math.isnan(a) else a


def estimate(
    drafts: float,
    draft_tokens: float,
    accepted: float,
    per_pos: list[float],
    k: int | None = None,
) -> AcceptanceEstimate:
    """The estimate and its intervals from counter totals over a window."""
    if k is None:
        k = len(per_pos) or (round(draft_tokens / drafts) if drafts > 0 else None)
    counts = [float(x) for x in per_pos[: k or 0]] + [0.0] * max(0, (k or 0) - len(per_pos))
    rho = accepted / draft_tokens if draft_tokens > 0 else None
    tau = 1.0 + accepted / drafts if drafts > 0 else None
    hist: list[float] = []
    tau_ci = rho_ci = alpha_ci = None
    if drafts > 0 and k and tau is not None and rho is not None:
        if per_pos:
            c = np.asarray([drafts, *counts, 0.0])
            h = np.maximum(c[:-1] - c[1:], 0.0)  # steps accepting exactly j drafts
            hist = [float(x) for x in h]
            j = np.arange(h.size)
            mean = float((j * h).sum() / drafts)
            var = float(((j - mean) ** 2 * h).sum() / max(drafts - 1.0, 1.0))
        else:  # no per-position counters: the largest variance a count in 0..K can have
            var = k * k / 4.0
        half = Z_95 * math.sqrt(var / drafts)
        tau_ci = Interval(low=max(1.0, tau - half), high=min(1.0 + k, tau + half))
        rho_ci = Interval(low=max(0.0, rho - half / k), high=min(1.0, rho + half / k))
        lo, hi = _alpha(rho_ci.low, k), _alpha(rho_ci.high, k)
        alpha_ci = Interval(low=lo, high=hi) if lo is not None and hi is not None else None
    if not per_pos:
        counts = []
    prev = [drafts, *counts[:-1]] if counts else []
    return AcceptanceEstimate(
        num_drafts=drafts,
        num_draft_tokens=draft_tokens,
        num_accepted_tokens=accepted,
        k=k,
        accepted_per_pos=counts,
        draft_acceptance_rate=rho,
        draft_acceptance_rate_ci=rho_ci,
        mean_acceptance_length=tau,
        mean_acceptance_length_ci=tau_ci,
        alpha_iid=_alpha(rho, k) if rho is not None and k else None,
        alpha_iid_ci=alpha_ci,
        per_position_acceptance=[x / drafts for x in counts] if drafts > 0 else [],
        alpha_by_pos=[x / p if p > 0 else None for x, p in zip(counts, prev, strict=True)],
        alpha_by_pos_ci=[wilson(x, p) for x, p in zip(counts, prev, strict=True)],
        acceptance_histogram=hist,
    )
