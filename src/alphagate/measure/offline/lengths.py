"""Acceptance when drafts vary in length (suffix decoding: each step drafts 0 … K tokens), from
the joint counts of a greedy walk: steps that drafted L tokens and accepted a of them
(:func:`~alphagate.measure.offline.walk.walk_lengths`, ``[R, K + 1, K + 1]``).

ρ, τ, vLLM's counters and α by position conditional on a draft reaching it follow from the
joint (:mod:`alphagate.theory.lengths`); the draft-length distribution is Σ_a n_{L,a} over every
step, L = 0 included, and the joint itself is what the simulator draws a step's (L, a) from.
Intervals: the percentile bootstrap over requests, as :mod:`alphagate.measure.offline.stats`.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from alphagate.measure.estimate import AcceptanceEstimate, Interval, estimate
from alphagate.measure.offline.results import OfflineClass, OfflineK
from alphagate.measure.offline.stats import interval, ratio, resampled_sums
from alphagate.theory.lengths import length_counters

__all__ = ["summarize_lengths"]

FloatArray = npt.NDArray[np.float64]


def _cis(boot: FloatArray, k: int) -> dict[str, list[Interval | None]]:
    """Bootstrap intervals of ρ, τ, α_1 and every α_i from resampled joints ``[B, K+1, K+1]``."""
    c = length_counters(boot)
    alpha = ratio(c.accepted_per_pos, c.reached_per_pos)
    return {
        "rho": [interval(ratio(c.accepted, c.draft_tokens))],
        "tau": [interval(1.0 + ratio(c.accepted, c.drafts))],
        "alpha": [interval(alpha[:, i]) for i in range(k)],
    }


def summarize_lengths(
    joints: FloatArray,
    *,
    prompt_tokens: npt.NDArray[np.int64],
    output_tokens: npt.NDArray[np.int64],
    resamples: int,
    rng: np.random.Generator,
) -> tuple[AcceptanceEstimate, OfflineClass]:
    """The estimate and the class detail of these requests' joints ``[R, K + 1, K + 1]``, the
    intervals by bootstrap over requests."""
    r, k = joints.shape[0], joints.shape[-1] - 1
    total = joints.sum(axis=0)
    c = length_counters(total)
    cis: dict[str, list[Interval | None]] = {"rho": [None], "tau": [None], "alpha": [None] * k}
    if r > 1 and resamples > 0:
        flat = joints.reshape(r, -1)
        cis = _cis(resampled_sums(flat, resamples, rng).reshape(resamples, k + 1, k + 1), k)
    alpha = ratio(c.accepted_per_pos, c.reached_per_pos)
    est = estimate(
        float(c.drafts), float(c.draft_tokens), float(c.accepted), list(c.accepted_per_pos), k=k
    ).model_copy(
        update={
            "draft_acceptance_rate_ci": cis["rho"][0],
            "mean_acceptance_length_ci": cis["tau"][0],
            "alpha_iid_ci": cis["alpha"][0],
            "alpha_by_pos": [None if np.isnan(x) else float(x) for x in alpha],
            "alpha_by_pos_ci": cis["alpha"],
            "interval_basis": f"{r} requests (bootstrap)",
            "design_effect": None,
        }
    )
    at_k = OfflineK(
        k=k,
        num_drafts=float(c.drafts),
        draft_acceptance_rate=est.draft_acceptance_rate,
        draft_acceptance_rate_ci=cis["rho"][0],
        mean_acceptance_length=est.mean_acceptance_length,
        mean_acceptance_length_ci=cis["tau"][0],
        alpha_iid=est.alpha_iid,
        alpha_iid_ci=cis["alpha"][0],
    )
    detail = OfflineClass(
        requests=r,
        prompt_tokens=int(prompt_tokens.sum()),
        output_tokens=int(output_tokens.sum()),
        by_k=[at_k],
        acceptance_length_histogram=[float(x) for x in c.histogram],
        draft_length_histogram=[float(x) for x in total.sum(axis=1)],
        acceptance_by_length=[[float(x) for x in total[n, : n + 1]] for n in range(k + 1)],
    )
    return est, detail
