"""The speculative chain walk over a known trajectory: vLLM's counters, per request, for every K.

A request's output is ``y_0 … y_{n−1}``; the prefill emits ``y_0``, then each engine step starts at
a context of length T (prompt P plus the T − P output tokens so far), drafts k tokens, accepts the
longest prefix the target agrees with (a), and emits a + 1 tokens (the accepted drafts and one
token of the target's own: recovered or bonus). The next step starts at T + a + 1; steps stop once
n tokens are out. vLLM counts, for every step that drafted (``vllm/v1/core/sched/scheduler.py``,
``update_from_output``; ``vllm/v1/spec_decode/metrics.py``): one draft, k draft tokens, a accepted
tokens, and one at each position i < a — a counted *before* the stop check trims the step's
tokens, so the last step may count acceptances past the end of the output.

Greedy (temperature 0): ``run[q]`` — how many of context q's drafts match the trajectory — fixes a,
and the walk is exact. Every request walks at once, for every K, one step per round.

A draft tree (SGLang's EAGLE top-k > 1) walks the same way: each step accepts the tree's
accepted length at its context (:mod:`alphagate.measure.offline.tree`), at most its depth
(:func:`walk_trees`).

Sampling: ``accept[q, i]`` is the probability that draft i + 1 is accepted given drafts 1 … i were;
the walk becomes a distribution over step starts (a forward recursion over T), and the counters
are expectations — exact when the probabilities are.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = [
    "TreeCounts",
    "WalkCounts",
    "greedy_run",
    "walk_expected",
    "walk_greedy",
    "walk_lengths",
    "walk_trees",
]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class WalkCounts:
    """vLLM's spec-decode counters per request, for K = 1 … k_max (index K − 1).

    Sums over requests are the counters of the whole log; they merge by concatenation.
    """

    drafts: FloatArray  # [R, k_max]
    draft_tokens: FloatArray  # [R, k_max]
    accepted: FloatArray  # [R, k_max]
    accepted_per_pos: FloatArray  # [R, k_max, k_max]: [r, K − 1, i] (zero for i ≥ K)
    histogram: FloatArray  # [R, k_max, k_max + 1]: steps accepting exactly j drafts

    @property
    def k_max(self) -> int:
        return int(self.drafts.shape[1])

    @classmethod
    def concat(cls, parts: list[WalkCounts]) -> WalkCounts:
        return cls(
            *(np.concatenate([getattr(p, f) for p in parts]) for f in cls.__dataclass_fields__)
        )

    def take(self, rows: IntArray) -> WalkCounts:
        return WalkCounts(*(getattr(self, f)[rows] for f in self.__dataclass_fields__))


def greedy_run(drafts: IntArray, length: IntArray, target: IntArray) -> IntArray:
    """How many leading drafts equal the target's tokens: ``drafts`` and ``target`` are
    ``[Q, k_max]`` (the target's tokens at the drafted positions), ``length`` ``[Q]``."""
    k_max = drafts.shape[1]
    ok = (drafts == target) & (np.arange(k_max)[None, :] < length[:, None])
    return np.cumprod(ok, axis=1).sum(axis=1).astype(np.int64)  # type: ignore[no-any-return]


def _empty(r_total: int, k_max: int) -> dict[str, FloatArray]:
    return {
        "drafts": np.zeros((r_total, k_max)),
        "draft_tokens": np.zeros((r_total, k_max)),
        "accepted": np.zeros((r_total, k_max)),
        "accepted_per_pos": np.zeros((r_total, k_max, k_max)),
        "histogram": np.zeros((r_total, k_max, k_max + 1)),
    }


def walk_greedy(run: IntArray, length: IntArray, num_contexts: IntArray, k_max: int) -> WalkCounts:
    """The exact greedy walk for every K ≤ k_max. ``run`` and ``length`` are per context
    (``[Q]``, request after request, ``num_contexts[r]`` contexts each, T = P + 1 … P + n − 1).

    Every (request, K) pair walks in lockstep, one step per round: rounds are the longest walk's
    steps, and the work of a round is array code over the pairs still walking."""
    r_total = num_contexts.size
    first = np.cumsum(num_contexts) - num_contexts
    pair_r = np.repeat(np.arange(r_total), k_max)
    pair_k = np.tile(np.arange(1, k_max + 1), r_total)
    live = np.flatnonzero(num_contexts[pair_r] > 0)
    pr, pk = pair_r[live], pair_k[live]
    pos = np.zeros(live.size, dtype=np.int64)
    limit, base = num_contexts[pr], first[pr]
    drafts = np.zeros(r_total * k_max)
    tokens = np.zeros(r_total * k_max)
    hist = np.zeros(r_total * k_max * (k_max + 1))
    while live.size:
        q = base + pos
        kk = np.minimum(length[q], pk)
        a = np.minimum(run[q], kk)
        d = kk > 0
        drafts[live] += d
        tokens[live] += kk
        hist[live * (k_max + 1) + a] += d
        pos += a + 1
        keep = pos < limit
        if not keep.all():
            live, pr, pk, pos, limit, base = (x[keep] for x in (live, pr, pk, pos, limit, base))
    h = hist.reshape(r_total, k_max, k_max + 1)
    # accepted at position i: steps that accepted more than i drafts
    above = np.cumsum(h[:, :, ::-1], axis=2)[:, :, ::-1][:, :, 1:]
    mask = np.arange(k_max)[None, :] < np.arange(1, k_max + 1)[:, None]
    return WalkCounts(
        drafts=drafts.reshape(r_total, k_max),
        draft_tokens=tokens.reshape(r_total, k_max),
        accepted=(h * np.arange(k_max + 1)).sum(axis=2),
        accepted_per_pos=above * mask[None],
        histogram=h,
    )


def walk_expected(
    accept: FloatArray, length: IntArray, num_contexts: IntArray, k_max: int
) -> WalkCounts:
    """The expected counters when draft i + 1 at context q is accepted with probability
    ``accept[q, i]`` given the earlier ones were (``[Q, k_max]``). All requests advance in
    lockstep over their contexts; each carries the probability that a step starts there."""
    r_total = num_contexts.size
    m = int(num_contexts.max(initial=0))
    first = np.cumsum(num_contexts) - num_contexts
    out = _empty(r_total, k_max)
    steps = np.arange(k_max)[None, :]
    for k in range(1, k_max + 1):
        start = np.zeros((r_total, m + k + 2))
        start[num_contexts > 0, 0] = 1.0
        for t in range(m):
            live = np.flatnonzero(num_contexts > t)
            if live.size == 0:
                break
            q = first[live] + t
            p = start[live, t]
            kk = np.minimum(length[q], k)
            prob = np.where(steps[:, :k] < kk[:, None], accept[q, :k], 0.0)
            reach = np.cumprod(prob, axis=1)  # P(accepted > i)
            # exactly j accepted: reach[j − 1] − reach[j], with reach[−1] = 1
            full = np.concatenate(
                [np.ones((live.size, 1)), reach, np.zeros((live.size, 1))], axis=1
            )
            exact = full[:, :-1] - full[:, 1:]  # [live, k + 1]
            drafted = kk > 0
            w = np.where(drafted, p, 0.0)
            out["drafts"][live, k - 1] += w
            out["draft_tokens"][live, k - 1] += w * kk
            out["accepted"][live, k - 1] += w * reach.sum(axis=1)
            out["accepted_per_pos"][live, k - 1, :k] += w[:, None] * reach
            out["histogram"][live, k - 1, : k + 1] += w[:, None] * exact
            # move the probability mass: no draft → one token; else a + 1 tokens
            start[live, t + 1] += np.where(drafted, 0.0, p)
            for j in range(k + 1):
                start[live, t + 1 + j] += w * exact[:, j]
    return WalkCounts(**out)


def walk_lengths(run: IntArray, length: IntArray, num_contexts: IntArray, k: int) -> FloatArray:
    """The greedy walk at one K, step by step: ``[R, K + 1, K + 1]``, the steps of each request
    that drafted L tokens (L = 0: a step without a draft, which vLLM does not count) and accepted
    a of them — the joint counts that variable-length drafts (n-gram, suffix decoding) need:
    ρ, τ, vLLM's counters and α by position conditional on a draft reaching it all follow from
    them (:mod:`alphagate.measure.offline.lengths`)."""
    r_total = num_contexts.size
    first = np.cumsum(num_contexts) - num_contexts
    joint = np.zeros(r_total * (k + 1) * (k + 1))
    live = np.flatnonzero(num_contexts > 0)
    pos = np.zeros(live.size, dtype=np.int64)
    while live.size:
        q = first[live] + pos
        kk = np.minimum(length[q], k)
        a = np.minimum(run[q], kk)
        np.add.at(joint, (live * (k + 1) + kk) * (k + 1) + a, 1.0)
        pos += a + 1
        keep = pos < num_contexts[live]
        live, pos = live[keep], pos[keep]
    return joint.reshape(r_total, k + 1, k + 1)


@dataclass(frozen=True)
class TreeCounts:
    """Per request, for each of T draft trees: verify passes, accepted drafts, and passes that
    accepted exactly j drafts (j = 0 … the deepest tree's depth; zero past a tree's own)."""

    passes: FloatArray  # [R, T]
    accepted: FloatArray  # [R, T]
    histogram: FloatArray  # [R, T, D + 1]

    @classmethod
    def concat(cls, parts: list[TreeCounts]) -> TreeCounts:
        return cls(
            *(np.concatenate([getattr(p, f) for p in parts]) for f in cls.__dataclass_fields__)
        )

    def take(self, rows: IntArray) -> TreeCounts:
        return TreeCounts(*(getattr(self, f)[rows] for f in self.__dataclass_fields__))


def walk_trees(
    runs: IntArray, depths: list[int], length: IntArray, num_contexts: IntArray
) -> TreeCounts:
    """The exact greedy walk of each tree: ``runs`` ``[T, Q]`` its accepted drafts at every
    context (request after request), ``depths`` the most one step accepts, ``length`` ``[Q]``
    the drafts the scheduler allows at each context."""
    r_total, top = num_contexts.size, max(depths, default=0)
    passes = np.zeros((r_total, len(depths)))
    accepted = np.zeros((r_total, len(depths)))
    hist = np.zeros((r_total, len(depths), top + 1))
    for i, depth in enumerate(depths):
        wc = walk_greedy(runs[i], np.minimum(length, depth), num_contexts, depth)
        passes[:, i] = wc.drafts[:, depth - 1]
        accepted[:, i] = wc.accepted[:, depth - 1]
        hist[:, i, : depth + 1] = wc.histogram[:, depth - 1]
    return TreeCounts(passes, accepted, hist)
