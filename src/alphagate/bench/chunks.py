"""What a run's streamed chunks measure, from the client side: the per-token ITL samples, and
acceptance counted from the chunks' sizes (one chunk per engine step)."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import numpy.typing as npt

from alphagate.bench.records import RequestRecord
from alphagate.measure.estimate import AcceptanceEstimate, estimate

__all__ = ["chunk_acceptance", "itl_per_token_samples"]


def itl_per_token_samples(
    records: Iterable[RequestRecord],
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """(gap ÷ tokens, tokens) per streamed chunk after the first, over finished requests: the
    per-token ITL samples and their weights (:meth:`RequestRecord.itl_per_token_s`)."""
    vals, weights = [], []
    for r in records:
        if r.warmup or not r.ok or len(r.chunk_times_s) < 2:
            continue
        v, w = r.itl_per_token_s()  # [n_chunks - 1] each
        vals.append(v)
        weights.append(w)
    if not vals:
        return np.zeros(0), np.zeros(0)
    return np.concatenate(vals), np.concatenate(weights)


def chunk_acceptance(records: Iterable[RequestRecord], k: int) -> tuple[AcceptanceEstimate, int]:
    """Acceptance counted from the client side — the sizes of the streamed chunks — and how many
    chunks were left out.

    Assumes one streamed chunk per engine step, so a chunk of j tokens is a step that accepted
    j − 1 drafts. The first chunk (the prefill's token) and the last (cut by max_tokens or a stop)
    are not steps of that kind and are skipped; so is any chunk with more than K + 1 tokens (the
    server merged steps for a slow reader).
    """
    sizes: list[int] = []
    skipped = 0
    for r in records:
        if r.warmup or not r.ok:
            continue
        inner = r.chunk_tokens[1:-1]
        sizes += [t for t in inner if 1 <= t <= k + 1]
        skipped += sum(1 for t in inner if not 1 <= t <= k + 1)
    n = np.asarray(sizes, dtype=np.int64)  # [steps]
    per_pos = [float(np.count_nonzero(n > i)) for i in range(1, k + 1)]  # ≥ i drafts accepted
    est = estimate(float(n.size), float(k * n.size), float((n - 1).sum()), per_pos, k=k)
    return est, skipped
