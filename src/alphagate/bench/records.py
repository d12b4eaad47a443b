"""Per-request records, level summaries and the typed result of ``alphagate bench``.

Latency accounting: TTFT = first chunk carrying choices − send; ITL per chunk = gap between
consecutive chunks (what ``vllm bench serve`` reports); ITL per token = that gap ÷ tokens in the
chunk, one sample per token; TPOT = (E2E − TTFT) ÷ (output tokens − 1) with output tokens from
``usage``. Baseline and candidate are measured by the same rule.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Literal

import numpy as np
from pydantic import Field

from alphagate.core.records import Frozen, Results
from alphagate.measure.prom import SpecAcceptance
from alphagate.sim.results import Distribution, LatencyStats, Speedups, speedups

__all__ = [
    "BenchResult",
    "Comparison",
    "LevelSummary",
    "RequestRecord",
    "Stats",
    "compare_levels",
    "stats_of",
    "summarize_level",
]


class RequestRecord(Frozen):
    """One request as ``requests.jsonl`` stores it (one JSON object per line)."""

    run_id: str = Field(description="the run this record belongs to (a re-run appends a new id)")
    id: int = Field(description="request number within the run")
    target: str = Field(description="default, baseline or candidate")
    level: str = Field(description="the load level's label, e.g. c16 or r4")
    cls: str | None = Field(description="traffic class from the dataset, if any")
    prompt_tokens: int | None = Field(description="from the server's usage")
    output_tokens: int | None = Field(description="from the server's usage")
    send_s: float = Field(description="send time, seconds since the run started")
    ttft_s: float | None
    chunk_times_s: list[float] = Field(description="arrival of each content chunk, since send")
    chunk_tokens: list[int] = Field(description="tokens in each chunk")
    tokens_per_chunk_source: str = Field(description="usage (exact) or apportioned (by text)")
    e2e_s: float | None
    error_type: str | None = None
    error_message: str | None = None
    warmup: bool = False

    @property
    def ok(self) -> bool:
        return self.error_type is None


class Stats(LatencyStats):
    """Throughput and latency of a set of requests (one level, or one class of a level)."""

    completed: int
    failed: int
    failed_by_type: dict[str, int]
    first_error_by_type: dict[str, str] = Field(
        default_factory=dict, description="the first message seen of each error type"
    )
    duration_s: float
    request_throughput: float
    output_tokens: int


def stats_of(records: Iterable[RequestRecord]) -> Stats:
    """Statistics of the non-warm-up records."""
    recs = [r for r in records if not r.warmup]
    ok = [r for r in recs if r.ok]
    failed = Counter(r.error_type or "unknown" for r in recs if not r.ok)
    first_error: dict[str, str] = {}
    for r in recs:
        if not r.ok:
            first_error.setdefault(r.error_type or "unknown", r.error_message or "")
    if recs:
        start = min(r.send_s for r in recs)
        end = max(r.send_s + (r.e2e_s or 0.0) for r in recs)
        duration = max(end - start, 1e-9)
    else:
        duration = 0.0
    out_tokens = sum(r.output_tokens or 0 for r in ok)
    gaps, tok_vals, tok_w, tpots = [], [], [], []
    n_chunks = n_chunk_tokens = 0
    for r in ok:
        times = np.asarray(r.chunk_times_s)
        toks = np.asarray(r.chunk_tokens, dtype=np.float64)
        if times.size > 1:
            g = np.diff(times)
            w = np.maximum(toks[1:], 1.0)
            gaps.append(g)
            tok_vals.append(g / w)
            tok_w.append(w)
            n_chunks += g.size
            n_chunk_tokens += int(toks[1:].sum())
        if r.output_tokens and r.output_tokens > 1 and r.ttft_s is not None and r.e2e_s is not None:
            tpots.append((r.e2e_s - r.ttft_s) / (r.output_tokens - 1))

    def cat(xs: list[np.ndarray]) -> np.ndarray:
        return np.concatenate(xs) if xs else np.zeros(0)

    return Stats(
        completed=len(ok),
        failed=sum(failed.values()),
        failed_by_type=dict(failed),
        first_error_by_type=first_error,
        duration_s=duration,
        request_throughput=len(ok) / duration if duration > 0 else 0.0,
        output_tokens=out_tokens,
        output_tokens_per_s=out_tokens / duration if duration > 0 else 0.0,
        mean_tokens_per_chunk=n_chunk_tokens / n_chunks if n_chunks else None,
        ttft_ms=Distribution.of([r.ttft_s for r in ok if r.ttft_s is not None]),
        tpot_ms=Distribution.of(tpots),
        itl_per_chunk_ms=Distribution.of(cat(gaps)),
        itl_per_token_ms=Distribution.of(cat(tok_vals), cat(tok_w)),
        e2e_ms=Distribution.of([r.e2e_s for r in ok if r.e2e_s is not None]),
    )


class LevelSummary(Frozen):
    """One target at one load level: overall and per-class statistics, and measured acceptance."""

    target: str
    url: str
    level: str
    concurrency: int | None
    rate: float | None
    overall: Stats
    classes: dict[str, Stats]
    acceptance: SpecAcceptance | None


def summarize_level(
    target: str,
    url: str,
    label: str,
    concurrency: int | None,
    rate: float | None,
    records: list[RequestRecord],
    acceptance: SpecAcceptance | None,
) -> LevelSummary:
    """The one place a level's summary is assembled (after a run, or from an interrupted one)."""
    classes = sorted({r.cls for r in records if r.cls is not None})
    return LevelSummary(
        target=target,
        url=url,
        level=label,
        concurrency=concurrency,
        rate=rate,
        overall=stats_of(records),
        classes={c: stats_of(r for r in records if r.cls == c) for c in classes},
        acceptance=acceptance,
    )


class Comparison(Frozen):
    """Candidate vs baseline at one level (see :class:`~alphagate.sim.results.Speedups`)."""

    level: str
    speedups: Speedups


def compare_levels(levels: list[LevelSummary]) -> list[Comparison]:
    """Candidate vs baseline at every level where both ran, in level order."""
    by = {(lv.target, lv.level): lv for lv in levels}
    order = list(dict.fromkeys(lv.level for lv in levels))
    out = []
    for label in order:
        b, c = by.get(("baseline", label)), by.get(("candidate", label))
        if b is not None and c is not None:
            out.append(Comparison(level=label, speedups=speedups(c.overall, b.overall)))
    return out


class BenchResult(Results):
    """What ``alphagate bench`` writes to ``summary.json`` (and prints with ``--json``)."""

    verb: Literal["bench"] = "bench"
    run_id: str
    config: dict[str, object] = Field(description="the run's configuration, secrets redacted")
    levels: list[LevelSummary]
    comparisons: list[Comparison]
    dataset_problems: list[str] = Field(default_factory=list)
    interrupted: bool = False
    stop_reason: str | None = Field(
        default=None, description="why the run ended early (interrupted, error rate, ...)"
    )
    records_file: str | None = None

    @property
    def requests(self) -> tuple[int, int]:
        """(requests finished, of which failed) over every level."""
        total = sum(lv.overall.completed + lv.overall.failed for lv in self.levels)
        return total, sum(lv.overall.failed for lv in self.levels)

    def failure(self, max_error_rate: float) -> str | None:
        """Why this run should not count as a measurement, or None."""
        total, failed = self.requests
        if total and failed == total:
            return f"every request failed ({failed}/{total})"
        if total and failed / total > max_error_rate:
            return f"error rate {failed}/{total} is above --max-error-rate {max_error_rate:g}"
        if self.stop_reason and self.stop_reason.startswith("cannot write"):
            return self.stop_reason
        return None
