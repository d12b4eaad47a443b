"""The worst requests of a speculative run, as the client measured them: each chunk's arrival and
tokens, which steps yielded one token (every draft rejected), and which gaps held another
request's first token — a prefill chunk that shared the step (chunked prefill: the new request's
first token comes out of the step that finished its prompt)."""

from __future__ import annotations

import numpy as np

from alphagate.bench.records import RequestRecord
from alphagate.explain.lateness import first_tokens, stalled_gaps
from alphagate.explain.records import Timeline, TimelineChunk

__all__ = ["worst_timelines"]


def _timeline(r: RequestRecord, index: int, firsts: np.ndarray, k: int) -> Timeline:
    times = np.asarray(r.chunk_times_s, dtype=np.float64)
    stalls = stalled_gaps(r, firsts)
    chunks = []
    for i, (t, tokens) in enumerate(zip(times, r.chunk_tokens, strict=False)):
        gap = None if i == 0 else float(t - times[i - 1])
        stall = bool(i > 0 and stalls[i - 1])
        chunks.append(
            TimelineChunk(
                at_ms=float(t) * 1e3,
                tokens=int(tokens),
                gap_ms=None if gap is None else gap * 1e3,
                rejected=bool(i > 0 and k > 0 and tokens == 1 and i < len(times) - 1),
                prefill_stall=stall,
            )
        )
    per_token, _ = r.itl_per_token_s()
    return Timeline(
        request=index,
        run=r.repeat,
        cls=r.cls,
        worst_itl_per_token_ms=float(per_token.max()) * 1e3 if per_token.size else 0.0,
        chunks=chunks,
    )


def worst_timelines(records: list[RequestRecord], k: int, n: int = 3) -> list[Timeline]:
    """The ``n`` requests with the longest ITL per token, worst first (``records``: one side
    of a level, in replay order)."""
    firsts = first_tokens(records)
    worst = []
    for i, r in enumerate(records):
        per_token, _ = r.itl_per_token_s()
        if per_token.size and not r.warmup:
            worst.append((float(per_token.max()), i))
    worst.sort(reverse=True)
    return [
        _timeline(records[i], i, firsts.get(records[i].repeat, np.zeros(0)), k)
        for _, i in worst[:n]
    ]
