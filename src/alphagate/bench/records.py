"""Per-request records and level summaries for ``alphagate bench``.

Latency accounting (DESIGN.md): TTFT = first chunk carrying choices − send; ITL per chunk = gap
between consecutive chunks; ITL per token = that gap ÷ tokens in the chunk, one sample per token;
TPOT = (E2E − TTFT) ÷ (output tokens − 1) with output tokens from ``usage``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import numpy as np

from alphagate.measure.prom import SpecAcceptance
from alphagate.quantities import Frozen
from alphagate.sim.results import Distribution, ratio

__all__ = ["Comparison", "LevelSummary", "RequestRecord", "Stats", "compare", "stats_of"]


class RequestRecord(Frozen):
    id: int
    target: str
    level: str
    cls: str | None
    prompt_tokens: int | None
    output_tokens: int | None
    send_s: float
    ttft_s: float | None
    chunk_times_s: list[float]
    chunk_tokens: list[int]
    tokens_per_chunk_source: str
    e2e_s: float | None
    error_type: str | None = None
    error_message: str | None = None
    warmup: bool = False

    @property
    def ok(self) -> bool:
        return self.error_type is None


class Stats(Frozen):
    completed: int
    failed: int
    failed_by_type: dict[str, int]
    duration_s: float
    request_throughput: float
    output_tokens: int
    output_tokens_per_s: float
    mean_tokens_per_chunk: float | None
    ttft_ms: Distribution
    tpot_ms: Distribution
    itl_per_chunk_ms: Distribution
    itl_per_token_ms: Distribution
    e2e_ms: Distribution


def stats_of(records: Iterable[RequestRecord]) -> Stats:
    recs = [r for r in records if not r.warmup]
    ok = [r for r in recs if r.ok]
    failed = Counter(r.error_type or "unknown" for r in recs if not r.ok)
    if recs:
        start = min(r.send_s for r in recs)
        end = max(r.send_s + (r.e2e_s or 0.0) for r in recs)
        duration = max(end - start, 1e-9)
    else:
        duration = 0.0
    out_tokens = sum(r.output_tokens or 0 for r in ok)
    chunk_gaps: list[float] = []
    tok_vals: list[float] = []
    tok_w: list[float] = []
    tpots: list[float] = []
    n_chunks = n_chunk_tokens = 0
    for r in ok:
        times = np.asarray(r.chunk_times_s)
        toks = np.asarray(r.chunk_tokens, dtype=np.float64)
        if times.size > 1:
            gaps = np.diff(times)
            chunk_gaps.extend(gaps.tolist())
            per_tok = gaps / np.maximum(toks[1:], 1.0)
            tok_vals.extend(per_tok.tolist())
            tok_w.extend(np.maximum(toks[1:], 1.0).tolist())
            n_chunks += gaps.size
            n_chunk_tokens += int(toks[1:].sum())
        if r.output_tokens and r.output_tokens > 1 and r.ttft_s is not None and r.e2e_s is not None:
            tpots.append((r.e2e_s - r.ttft_s) / (r.output_tokens - 1))
    return Stats(
        completed=len(ok),
        failed=sum(failed.values()),
        failed_by_type=dict(failed),
        duration_s=duration,
        request_throughput=len(ok) / duration if duration > 0 else 0.0,
        output_tokens=out_tokens,
        output_tokens_per_s=out_tokens / duration if duration > 0 else 0.0,
        mean_tokens_per_chunk=n_chunk_tokens / n_chunks if n_chunks else None,
        ttft_ms=Distribution.of([r.ttft_s for r in ok if r.ttft_s is not None]),
        tpot_ms=Distribution.of(tpots),
        itl_per_chunk_ms=Distribution.of(chunk_gaps),
        itl_per_token_ms=Distribution.of(tok_vals, tok_w),
        e2e_ms=Distribution.of([r.e2e_s for r in ok if r.e2e_s is not None]),
    )


class LevelSummary(Frozen):
    target: str
    url: str
    level: str
    concurrency: int | None
    rate: float | None
    overall: Stats
    classes: dict[str, Stats]
    acceptance: SpecAcceptance | None


class Comparison(Frozen):
    """Candidate vs baseline at one level. Throughput: cand ÷ base; latencies: base ÷ cand (> 1 = better)."""

    level: str
    output_throughput: float | None
    tpot_mean: float | None
    ttft_p50: float | None
    itl_per_token_p50: float | None
    itl_per_token_p99: float | None
    itl_per_chunk_p50: float | None
    itl_per_chunk_p99: float | None
    e2e_p50: float | None
    mean_tokens_per_chunk: float | None


def compare(base: LevelSummary, cand: LevelSummary) -> Comparison:
    b, c = base.overall, cand.overall
    return Comparison(
        level=base.level,
        output_throughput=ratio(c.output_tokens_per_s, b.output_tokens_per_s),
        tpot_mean=ratio(b.tpot_ms.mean, c.tpot_ms.mean),
        ttft_p50=ratio(b.ttft_ms.p50, c.ttft_ms.p50),
        itl_per_token_p50=ratio(b.itl_per_token_ms.p50, c.itl_per_token_ms.p50),
        itl_per_token_p99=ratio(b.itl_per_token_ms.p99, c.itl_per_token_ms.p99),
        itl_per_chunk_p50=ratio(b.itl_per_chunk_ms.p50, c.itl_per_chunk_ms.p50),
        itl_per_chunk_p99=ratio(b.itl_per_chunk_ms.p99, c.itl_per_chunk_ms.p99),
        e2e_p50=ratio(b.e2e_ms.p50, c.e2e_ms.p50),
        mean_tokens_per_chunk=c.mean_tokens_per_chunk,
    )
