"""Acceptance from per-request counters, with 95% intervals by bootstrap over requests.

Drafts of one request share its prompt and are not independent, so the unit resampled is the
request (Efron's percentile bootstrap): each resample draws the requests with replacement, sums
their counters, and recomputes ρ = A ÷ (draft tokens), τ = 1 + A ÷ D, α_i = c_i ÷ c_{i−1} and the
i.i.d. α that gives ρ at K. The sums are sufficient statistics: shards of a log (processes, Ray
workers) merge by concatenating their per-request counters.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from alphagate.measure.estimate import AcceptanceEstimate, Interval, estimate
from alphagate.measure.offline.results import OfflineClass, OfflineK, OfflineTree
from alphagate.measure.offline.walk import TreeCounts, WalkCounts
from alphagate.specs.tree import TreeShape
from alphagate.theory.acceptance import alpha_from_draft_acceptance_rate

__all__ = ["BOOTSTRAP", "interval", "ratio", "resampled_sums", "summarize", "summarize_trees"]

FloatArray = npt.NDArray[np.float64]
#: resamples per interval
BOOTSTRAP = 1000
_BATCH = 100


def interval(x: FloatArray) -> Interval | None:
    x = x[np.isfinite(x)]
    if x.size < 2:
        return None
    lo, hi = np.percentile(x, [2.5, 97.5])
    return Interval(low=float(lo), high=float(hi))


def ratio(a: FloatArray, b: FloatArray) -> FloatArray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(b > 0, a / np.where(b > 0, b, 1.0), np.nan)


def resampled_sums(values: FloatArray, resamples: int, rng: np.random.Generator) -> FloatArray:
    """``values [R, d]`` → the column sums of ``resamples`` bootstrap resamples, ``[B, d]``."""
    r = values.shape[0]
    out = np.empty((resamples, values.shape[1]))
    for lo in range(0, resamples, _BATCH):
        n = min(_BATCH, resamples - lo)
        w = rng.multinomial(r, np.full(r, 1.0 / r), size=n).astype(np.float64)
        out[lo : lo + n] = w @ values
    return out


def _alpha_of(d: FloatArray, dt: FloatArray, a: FloatArray, c0: FloatArray, k: int) -> FloatArray:
    """α as :func:`~alphagate.measure.estimate.estimate` defines it: the i.i.d. α that gives ρ
    at K when every draft has K tokens, else (short n-gram drafts) position 1's acceptance."""
    full = dt >= k * d * (1 - 1e-6) - 0.5
    rho = np.clip(ratio(a, dt), 0.0, 1.0)
    by_rho = alpha_from_draft_acceptance_rate(np.nan_to_num(rho), k)
    return np.where(np.isnan(rho), np.nan, np.where(full, by_rho, ratio(c0, d)))


def _columns(counts: WalkCounts, k: int) -> FloatArray:
    """``[R, 4 K_max + K]``: per K, the drafts, draft tokens, accepted and accepted at position 1
    of each request (a block of K_max columns each); then its per-position counts at K."""
    return np.concatenate(
        [
            counts.drafts,
            counts.draft_tokens,
            counts.accepted,
            counts.accepted_per_pos[:, :, 0],
            counts.accepted_per_pos[:, k - 1, :k],
        ],
        axis=1,
    )


def _at_k(tot: FloatArray, boot: FloatArray | None, k: int, k_max: int) -> OfflineK:
    """Acceptance at K from the column totals (:func:`_columns`), with the bootstrap's intervals
    (``boot``: the resampled totals, ``[B, columns]``; None: no intervals)."""
    cols = [k - 1 + i * k_max for i in range(4)]  # drafts, draft tokens, accepted, position 1
    d, dt, a, c0 = (tot[c] for c in cols)
    ci: dict[str, Interval | None] = {"rho": None, "tau": None, "alpha": None}
    if boot is not None:
        bd, bdt, ba, bc0 = (boot[:, c] for c in cols)
        ci["rho"] = interval(ratio(ba, bdt))
        ci["tau"] = interval(1.0 + ratio(ba, bd))
        ci["alpha"] = interval(_alpha_of(bd, bdt, ba, bc0, k))
    point = [np.asarray([x], dtype=np.float64) for x in (d, dt, a, c0)]
    alpha = float(_alpha_of(point[0], point[1], point[2], point[3], k)[0])
    return OfflineK(
        k=k,
        num_drafts=float(d),
        draft_acceptance_rate=float(a / dt) if dt > 0 else None,
        draft_acceptance_rate_ci=ci["rho"],
        mean_acceptance_length=1.0 + float(a / d) if d > 0 else None,
        mean_acceptance_length_ci=ci["tau"],
        alpha_iid=None if np.isnan(alpha) else alpha,
        alpha_iid_ci=ci["alpha"],
    )


def _conditional_cis(boot: FloatArray | None, k: int, k_max: int) -> list[Interval | None]:
    """The bootstrap intervals of α_i = c_i ÷ c_{i−1} at K (c_0: the drafts)."""
    if boot is None:
        return [None] * k
    c = boot[:, 4 * k_max : 4 * k_max + k]
    prev = np.concatenate([boot[:, k - 1 : k], c[:, :-1]], axis=1)
    cond = ratio(c, prev)
    return [interval(cond[:, i]) for i in range(k)]


def summarize(
    counts: WalkCounts,
    k: int,
    *,
    prompt_tokens: npt.NDArray[np.int64],
    output_tokens: npt.NDArray[np.int64],
    resamples: int,
    rng: np.random.Generator,
) -> tuple[AcceptanceEstimate, OfflineClass]:
    """The estimate at K (its intervals by bootstrap) and the every-K detail, for these requests."""
    k_max = counts.k_max
    r = counts.drafts.shape[0]
    flat = _columns(counts, k)
    tot = flat.sum(axis=0)
    boot = resampled_sums(flat, resamples, rng) if r > 1 and resamples > 0 else None
    by_k = [_at_k(tot, boot, kk, k_max) for kk in range(1, k_max + 1)]
    at = by_k[k - 1]
    per_pos = [float(x) for x in tot[4 * k_max : 4 * k_max + k]]
    est = estimate(at.num_drafts, tot[k_max + k - 1], tot[2 * k_max + k - 1], per_pos, k=k)
    est = est.model_copy(
        update={
            "draft_acceptance_rate_ci": at.draft_acceptance_rate_ci,
            "mean_acceptance_length_ci": at.mean_acceptance_length_ci,
            "alpha_iid_ci": at.alpha_iid_ci,
            "interval_basis": f"{r} requests (bootstrap)",
            "design_effect": None,
            "alpha_by_pos_ci": _conditional_cis(boot, k, k_max),
        }
    )
    detail = OfflineClass(
        requests=r,
        prompt_tokens=int(prompt_tokens.sum()),
        output_tokens=int(output_tokens.sum()),
        by_k=by_k,
        acceptance_length_histogram=[float(x) for x in counts.histogram[:, k - 1, : k + 1].sum(0)],
    )
    return est, detail


def summarize_trees(
    counts: TreeCounts,
    shapes: tuple[TreeShape, ...],
    by_k: list[OfflineK],
    *,
    resamples: int,
    rng: np.random.Generator,
) -> list[OfflineTree]:
    """Each tree's acceptance over these requests (τ's interval by the same bootstrap), beside
    the chain of its steps from ``by_k``."""
    r, t = counts.passes.shape
    flat = np.concatenate([counts.passes, counts.accepted], axis=1)  # [R, 2T]
    tot = flat.sum(axis=0)
    boot = resampled_sums(flat, resamples, rng) if r > 1 and resamples > 0 else None
    out = []
    for i, shape in enumerate(shapes):
        passes, acc = float(tot[i]), float(tot[t + i])
        chain = by_k[shape.steps - 1].mean_acceptance_length if shape.steps <= len(by_k) else None
        out.append(
            OfflineTree(
                shape=shape,
                verify_passes=passes,
                mean_acceptance_length=1.0 + acc / passes if passes > 0 else None,
                mean_acceptance_length_ci=None
                if boot is None
                else interval(1.0 + ratio(boot[:, t + i], boot[:, i])),
                accept_rate=acc / (passes * shape.draft_nodes) if passes > 0 else None,
                acceptance_length_histogram=[
                    float(x) for x in counts.histogram[:, i, : shape.depth + 1].sum(0)
                ],
                chain_mean_acceptance_length=chain,
            )
        )
    return out
