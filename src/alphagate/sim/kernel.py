"""The step kernel shared by the step engine, the closed-loop fast path and the twin.

Three pieces of one engine step, each written once:

- **acceptance**: a sequence accepts ``a`` of its K drafts with P(a ≥ j) = Π_{i≤j} α_i. One
  uniform per sequence decides it: ``a = #{j : U < P(a ≥ j)}`` — exact for i.i.d. and per-position
  α (EAGLE's evaluation code and vLLM's rejection sampler take the first rejection the same way);
- **counting**, with vLLM V1's semantics (``vllm/v1/spec_decode/metrics.py``): per speculative
  step of a sequence, drafts += 1, draft tokens += K, accepted += a, and position i's counter
  += 1 for every i < a — so position counts are unconditional;
- **drafts of variable length** (suffix decoding): one uniform draws a sequence step's drafted
  length L and accepted a from its class's joint (:func:`drafted_and_accepted`); a step that
  drafted nothing is not a draft, and draft tokens += L;
- **prefill allocation**: the token budget left after decoding goes to prefilling sequences first
  come, first served (vLLM V1's chunked prefill), a chunk each; the closed-loop fast path, where
  prefills do not contend, lays every prompt out in whole-budget chunks (:func:`prefill_chunks`).
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

__all__ = [
    "acceptance_histogram",
    "accepted_drafts",
    "accepted_per_position",
    "decode_budget",
    "drafted_and_accepted",
    "prefill_allocation",
    "prefill_chunks",
]


def accepted_drafts(u: FloatArray, thresholds: FloatArray, cls: IntArray) -> IntArray:
    """Accepted drafts per sequence step from one uniform each.

    ``u``: uniforms, shape ``[n]``; ``thresholds``: P(a ≥ j) per class, shape ``[n_classes, K]``,
    non-increasing along K; ``cls``: class row of each draw, shape ``[n]``. Returns ``[n]`` in 0..K.
    """
    k = thresholds.shape[1]
    out = np.empty(u.shape, dtype=np.int64)
    if thresholds.shape[0] == 1:
        return np.asarray(k - np.searchsorted(thresholds[0, ::-1], u, side="right"), np.int64)
    for c in range(thresholds.shape[0]):  # a mask per class row (few); np.unique would sort
        sel = cls == c
        out[sel] = k - np.searchsorted(thresholds[c, ::-1], u[sel], side="right")
    return out


def drafted_and_accepted(
    u: FloatArray, cdf: FloatArray, cls: IntArray
) -> tuple[IntArray, IntArray]:
    """Drafted and accepted tokens per sequence step from one uniform each.

    ``cdf``: per class, the cumulative shares of the step joint flattened row by row (L drafted
    × a accepted, :func:`alphagate.sim.workload.draft_steps_table`), shape ``[n_classes,
    (K + 1)²]``; ``u`` and ``cls`` as :func:`accepted_drafts`. Returns ``(L, a)``, each ``[n]``.
    """
    cells = cdf.shape[1]
    width = math.isqrt(cells)
    idx = np.empty(u.shape, dtype=np.int64)
    for c in range(cdf.shape[0]):
        sel = cls == c
        idx[sel] = np.searchsorted(cdf[c], u[sel], side="right")
    idx = np.minimum(idx, cells - 1)  # a uniform past a last share rounded below 1
    return idx // width, idx % width


def acceptance_histogram(accepted: IntArray, k: int) -> IntArray:
    """Speculative steps that accepted exactly j drafts, j = 0..K (shape ``[K + 1]``)."""
    return np.bincount(np.asarray(accepted, dtype=np.int64), minlength=k + 1)[: k + 1]


def accepted_per_position(histogram: IntArray) -> IntArray:
    """vLLM's per-position counters from a histogram ``[K + 1]``: position i counts steps with a > i."""
    h = np.asarray(histogram, dtype=np.int64)
    return np.asarray(np.cumsum(h[::-1])[::-1][1:], dtype=np.int64)


def decode_tokens(k: int, draft_slots: int = 0) -> int:
    """Of ``max_num_batched_tokens``, what one decoding sequence takes in a step: its K drafts and
    one verify position, plus the drafter's extra input slots when it speculates (vLLM
    ``SpeculativeConfig.max_num_new_slots_for_drafting``: 1 for a draft model, 0 for EAGLE-3,
    MTP and n-gram; the scheduler charges them to its input budget per scheduled request,
    ``vllm/v1/core/sched/scheduler.py``)."""
    return k + 1 + (draft_slots if k > 0 else 0)


def decode_capacity(max_num_batched_tokens: int, k: int, draft_slots: int = 0) -> int:
    """How many decoding sequences one step can carry: vLLM schedules its running requests in
    order, each taking :func:`decode_tokens` of the budget, and leaves the rest waiting for the
    next step once the budget is spent — so K + 1 tokens per sequence cap the batch."""
    return max(1, max_num_batched_tokens // decode_tokens(k, draft_slots))


def decode_budget(max_num_batched_tokens: int, n_decode: int, k: int, draft_slots: int = 0) -> int:
    """Tokens left for prefill after every decoding sequence's share (:func:`decode_tokens`)."""
    return max(0, max_num_batched_tokens - n_decode * decode_tokens(k, draft_slots))


def prefill_allocation(remaining: IntArray, budget: int) -> IntArray:
    """First come, first served: ``remaining`` prompt tokens per prefilling sequence, in admission
    order (shape ``[n]``); each gets ``min(remaining, budget left)``."""
    want = np.asarray(remaining, dtype=np.int64)
    before = np.cumsum(want) - want
    return np.asarray(np.clip(budget - before, 0, want), dtype=np.int64)


def prefill_chunks(
    prompt_len: IntArray, budget: int
) -> tuple[IntArray, IntArray, IntArray, IntArray]:
    """Every prompt split into chunks of at most ``budget`` tokens (one per step, no contention).

    Returns flat arrays over all chunks: request index, chunk index within the request, prompt
    tokens already cached before the chunk, and tokens in the chunk.
    """
    p = np.asarray(prompt_len, dtype=np.int64)
    n_chunks = -(-p // budget)
    req = np.repeat(np.arange(p.size), n_chunks)
    chunk = np.arange(req.size) - np.repeat(np.cumsum(n_chunks) - n_chunks, n_chunks)
    ctx = chunk * budget
    return req, chunk, ctx, np.minimum(budget, p[req] - ctx)
