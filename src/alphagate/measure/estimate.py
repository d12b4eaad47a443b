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

and their sampling error. Treating steps as independent draws, τ's standard error is sd(a) / √D
with sd(a) from the histogram, and α_i is a binomial proportion over the c_{i−1} steps that reached
position i + 1 (Wilson interval). Steps are not independent: the steps of one request share its
prompt, and traffic mixes classes of different α — with few requests the independent-steps
interval is far too narrow. So a source that sees the window in pieces (scrape intervals, log
lines, Prometheus sub-windows: *batches*) passes their counts, and the standard errors of ρ and τ
become the larger of the independent-steps one and the cluster-robust one over batches (the
ratio estimator's delta-method variance, Cochran 1977 §6.4); the Wilson intervals of α_i are
widened by the same design effect. ``interval_basis`` says which was used.

When drafts propose fewer than K tokens (an n-gram proposer, or K set per batch size), ρ mixes
lengths and does not invert to α; α is then the first position's acceptance c_0 ÷ D.

Inconsistent counts (accepted above drafted, a later position above an earlier one, more drafts
than draft tokens, a K below what the counts show) raise ``ValueError``: a source that produces
them is misconfigured, and an estimate from them could pass a gate it should not.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from pydantic import Field

from alphagate.core.records import Frozen
from alphagate.theory.acceptance import alpha_from_draft_acceptance_rate
from alphagate.theory.intervals import Z_95, wilson_interval

__all__ = [
    "MIN_BATCHES",
    "AcceptanceEstimate",
    "Batch",
    "Interval",
    "estimate",
    "estimate_from_requests",
    "infer_k",
    "wilson",
]

#: batches needed before the cluster-robust standard error is used
MIN_BATCHES = 5

#: (drafts, draft tokens, accepted tokens) of one piece of the window
Batch = tuple[float, float, float]


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
    sglang_accept_rate: float | None = Field(
        default=None,
        description="SGLang's accept rate where it has no counts, in its current definition: "
        "accepted ÷ (passes · (num_draft_tokens − 1)) (alphagate.measure.engines)",
    )
    interval_basis: str = Field(
        default="independent steps",
        description="what the intervals assume: independent steps, or N batches (cluster-robust)",
    )
    design_effect: float | None = Field(
        default=None, description="cluster-robust ÷ independent-steps variance of ρ (≥ 1)"
    )


def _alpha(rho: float, k: int) -> float | None:
    a = float(alpha_from_draft_acceptance_rate(min(max(rho, 0.0), 1.0), k))
    return None if math.isnan(a) else a


def infer_k(
    per_pos: list[float], drafts: float, draft_tokens: float, given: int | None = None
) -> int | None:
    """K: the number of per-position counters, at least draft tokens ÷ drafts (rounded up); a
    ``given`` K below what the counts show raises ``ValueError``."""
    seen = len(per_pos)
    if drafts > 0 and draft_tokens > 0:
        seen = max(seen, math.ceil(draft_tokens / drafts - 1e-9))
    if given is not None:
        if given < seen:
            raise ValueError(
                f"K={given} is below the K the counts show ({seen}: "
                f"{'per-position counters' if len(per_pos) >= seen else 'draft tokens ÷ drafts'})"
            )
        return given
    return seen or None


def _check(
    drafts: float, draft_tokens: float, accepted: float, counts: list[float], sum_tol: float
) -> None:
    tol = 0.5 + 1e-6 * max(drafts, draft_tokens, accepted, 1.0)
    if min(drafts, draft_tokens, accepted, *counts, 0.0) < -tol:
        raise ValueError("negative counts")
    if draft_tokens > 0 and accepted > draft_tokens + tol:
        raise ValueError(f"{accepted:,.0f} accepted tokens exceed {draft_tokens:,.0f} drafted")
    if draft_tokens > 0 and drafts > draft_tokens + tol:
        raise ValueError(f"{drafts:,.0f} drafts exceed {draft_tokens:,.0f} draft tokens")
    chain = [drafts, *counts]
    for i in range(1, len(chain)):
        if chain[i] > chain[i - 1] + tol:
            raise ValueError(
                f"position {i} accepted {chain[i]:,.0f} times, more than position {i - 1} "
                f"({chain[i - 1]:,.0f}): per-position counts must not grow"
            )
    if counts and abs(sum(counts) - accepted) > tol + sum_tol * accepted:
        raise ValueError(
            f"per-position counts sum to {sum(counts):,.0f}, not the {accepted:,.0f} accepted"
        )


def _cluster_se(batches: list[Batch], rate: float, denominator: int) -> float:
    """Cluster-robust standard error of Σ accepted ÷ Σ (drafts or draft tokens) over batches."""
    n = len(batches)
    den = np.asarray([b[denominator] for b in batches])
    num = np.asarray([b[2] for b in batches])
    resid = num - rate * den
    return float(math.sqrt(n / (n - 1) * float((resid**2).sum())) / den.sum())


def estimate(
    drafts: float,
    draft_tokens: float,
    accepted: float,
    per_pos: list[float],
    k: int | None = None,
    *,
    batches: list[Batch] | None = None,
    batch_unit: str = "batches",
    sum_tol: float = 1e-3,
) -> AcceptanceEstimate:
    """The estimate and its intervals from counter totals over a window (and, when the source
    saw the window in pieces, the counts of each piece — ``batch_unit`` names them). Raises
    ``ValueError`` on counts that cannot come from one speculative decoder; the per-position
    counts may differ from the accepted total by ``sum_tol`` of it (counts read at one instant:
    0.1%; Prometheus' ``increase()`` extrapolates each series on its own, see
    :mod:`alphagate.measure.prometheus`)."""
    k = infer_k(per_pos, drafts, draft_tokens, k)
    counts = [float(x) for x in per_pos[: k or 0]] + [0.0] * max(0, (k or 0) - len(per_pos))
    _check(drafts, draft_tokens, accepted, counts if per_pos else [], sum_tol)
    rho = accepted / draft_tokens if draft_tokens > 0 else None
    tau = 1.0 + accepted / drafts if drafts > 0 else None
    full = k is not None and k > 0 and draft_tokens >= k * drafts * (1 - 1e-6) - 0.5
    spread = _NO_SPREAD
    if drafts > 0 and k and tau is not None and rho is not None:
        spread = _spread(
            _Totals(drafts, draft_tokens, tau, rho, k),
            counts if per_pos else None,
            full=full,
            batches=[b for b in batches or [] if b[0] > 0 and b[1] > 0],
            batch_unit=batch_unit,
        )
    if not per_pos:
        counts = []
    prev = [drafts, *counts[:-1]] if counts else []
    deff = spread.design_effect
    by_pos_ci = [wilson(x / deff, p / deff) for x, p in zip(counts, prev, strict=True)]
    alpha_ci = spread.alpha_ci
    if full or not counts:
        alpha = _alpha(rho, k) if rho is not None and k else None
    else:  # short drafts: ρ mixes proposal lengths; the first position's acceptance is α's estimate
        alpha = counts[0] / drafts if drafts > 0 else None
        alpha_ci = by_pos_ci[0] if by_pos_ci else None
    return AcceptanceEstimate(
        num_drafts=drafts,
        num_draft_tokens=draft_tokens,
        num_accepted_tokens=accepted,
        k=k,
        accepted_per_pos=counts,
        draft_acceptance_rate=rho,
        draft_acceptance_rate_ci=spread.rho_ci,
        mean_acceptance_length=tau,
        mean_acceptance_length_ci=spread.tau_ci,
        alpha_iid=alpha,
        alpha_iid_ci=alpha_ci,
        per_position_acceptance=[x / drafts for x in counts] if drafts > 0 else [],
        alpha_by_pos=[x / p if p > 0 else None for x, p in zip(counts, prev, strict=True)],
        alpha_by_pos_ci=by_pos_ci,
        acceptance_histogram=spread.histogram,
        interval_basis=spread.basis,
        design_effect=deff if spread.basis != _INDEPENDENT else None,
    )


_INDEPENDENT = "independent steps"


class _Totals(NamedTuple):
    """A window's drafts and draft tokens, and the τ and ρ they give at K (drafts > 0)."""

    drafts: float
    draft_tokens: float
    tau: float
    rho: float
    k: int


class _Spread(NamedTuple):
    """The 95% intervals of τ, ρ and α, the acceptance histogram behind them, what they assume
    (``basis``), and the cluster-robust ÷ independent-steps variance of ρ."""

    histogram: list[float]
    tau_ci: Interval | None
    rho_ci: Interval | None
    alpha_ci: Interval | None
    basis: str
    design_effect: float


_NO_SPREAD = _Spread([], None, None, None, _INDEPENDENT, 1.0)


def _spread(
    w: _Totals, counts: list[float] | None, *, full: bool, batches: list[Batch], batch_unit: str
) -> _Spread:
    """The intervals of a window with drafts: from the acceptance histogram's variance over
    independent steps (``counts``: per-position counts, None without them), widened to the
    cluster-robust error when there are :data:`MIN_BATCHES` ``batches`` or more."""
    hist, var = _histogram_variance(w.drafts, counts, w.k)
    se_tau = math.sqrt(var / w.drafts)
    se_rho = se_tau / (w.draft_tokens / w.drafts)  # ÷ K, or fewer when drafts are short
    basis, deff = _INDEPENDENT, 1.0
    if len(batches) >= MIN_BATCHES:
        # Student's t with n − 1 degrees of freedom for a few batches, as a z-scaled error
        from scipy.stats import t as student_t  # ~0.3 s to import: only when batches exist

        t = float(student_t.ppf(0.975, len(batches) - 1)) / Z_95
        cl_tau = t * _cluster_se(batches, w.tau - 1.0, 0)
        cl_rho = t * _cluster_se(batches, w.rho, 1)
        deff = max(1.0, (cl_rho / se_rho) ** 2) if se_rho > 0 else 1.0
        se_tau, se_rho = max(se_tau, cl_tau), max(se_rho, cl_rho)
        basis = f"{len(batches)} {batch_unit} (cluster-robust)"
    tau_ci = Interval(
        low=max(1.0, w.tau - Z_95 * se_tau),
        high=max(1.0, min(1.0 + w.k, w.tau + Z_95 * se_tau)),
    )
    rho_ci = Interval(
        low=min(1.0, max(0.0, w.rho - Z_95 * se_rho)),
        high=max(0.0, min(1.0, w.rho + Z_95 * se_rho)),
    )
    alpha_ci = None
    if full:
        lo, hi = _alpha(rho_ci.low, w.k), _alpha(rho_ci.high, w.k)
        alpha_ci = Interval(low=lo, high=hi) if lo is not None and hi is not None else None
    return _Spread(hist, tau_ci, rho_ci, alpha_ci, basis, deff)


def _histogram_variance(
    drafts: float, counts: list[float] | None, k: int
) -> tuple[list[float], float]:
    """Steps that accepted exactly j drafts (j = 0..K), and the variance of that number per
    step; without per-position counts no histogram, and the largest variance a count in 0..K can
    have."""
    if counts is None:
        return [], k * k / 4.0
    c = np.asarray([drafts, *counts, 0.0])
    h = np.maximum(c[:-1] - c[1:], 0.0)  # steps accepting exactly j drafts
    j = np.arange(h.size)
    mean = float((j * h).sum() / drafts)
    return [float(x) for x in h], float(((j - mean) ** 2 * h).sum() / max(drafts - 1.0, 1.0))


def estimate_from_requests(
    counts: list[Batch], histograms: list[list[int]] | None, k: int | None
) -> AcceptanceEstimate:
    """Acceptance from per-request counts (drafts, draft tokens, accepted), each request a
    cluster: the steps of one request share its prompt, so the intervals are cluster-robust over
    requests (:func:`estimate`). ``histograms``: each request's steps accepting exactly j drafts
    (j = 0..K), which give the per-position counts c_i = Σ_{j > i} h_j; None without them."""
    drafts = float(sum(c[0] for c in counts))
    draft_tokens = float(sum(c[1] for c in counts))
    accepted = float(sum(c[2] for c in counts))
    per_pos: list[float] = []
    if histograms:
        width = max(len(h) for h in histograms)
        total = np.zeros(width)
        for h in histograms:
            total[: len(h)] += h
        per_pos = [float(total[i + 1 :].sum()) for i in range(width - 1)]
    return estimate(
        drafts, draft_tokens, accepted, per_pos, k, batches=counts, batch_unit="requests"
    )
