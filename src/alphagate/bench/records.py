"""Per-request records, level summaries and the typed result of ``alphagate bench``.

Latency accounting: TTFT = first chunk carrying choices − send; ITL per chunk = gap between
consecutive chunks (what ``vllm bench serve`` reports); ITL per token = that gap ÷ tokens in the
chunk, one sample per token; TPOT = (E2E − TTFT) ÷ (output tokens − 1) with output tokens from
``usage``. Baseline and candidate are measured by the same rule.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from pydantic import Field

from alphagate.bench.slo import SLO, Goodput, goodput_of
from alphagate.bench.sweep import SweepSummary
from alphagate.core.records import Frozen, Results
from alphagate.measure.prom import SpecAcceptance
from alphagate.sim.results import Distribution, LatencyStats, Speedups, ratio, speedups

FloatArray = npt.NDArray[np.float64]

__all__ = [
    "BenchResult",
    "Comparison",
    "LevelSummary",
    "RequestRecord",
    "RequestText",
    "Stats",
    "compare_levels",
    "stats_of",
    "summarize_level",
]


class RequestText(Frozen):
    """What was asked and answered (``--save-text``): a bench run against the baseline server is
    then a request log for ``alphagate measure offline``. Token ids come from vLLM's
    ``return_token_ids`` (other servers send text only)."""

    prompt: str | None = None
    messages: list[dict[str, Any]] | None = None
    prompt_token_ids: list[int] | None = None
    output: str
    output_token_ids: list[int] | None = None
    finish_reason: str | None = None
    temperature: float


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
    scheduled_s: float | None = Field(
        default=None,
        description="open loop and trace replay: when the schedule said to send it, seconds "
        "since the run started",
    )
    ttft_s: float | None
    chunk_times_s: list[float] = Field(description="arrival of each content chunk, since send")
    chunk_tokens: list[int] = Field(description="tokens in each chunk")
    tokens_per_chunk_source: str = Field(description="usage (exact) or apportioned (by text)")
    e2e_s: float | None
    error_type: str | None = None
    error_message: str | None = None
    warmup: bool = False
    text: RequestText | None = Field(
        default=None,
        exclude_if=lambda v: v is None,
        description="--save-text: the prompt and the output, as text and token ids",
    )
    delivery_s: list[float] | None = Field(
        default=None,
        exclude_if=lambda v: v is None,
        description="--probe-send-time against a twin run with --emit-send-time: each content "
        "chunk's receipt − the server's send time (wall clock), the latency the client adds",
    )

    @property
    def ok(self) -> bool:
        return self.error_type is None

    def chunk_gaps_s(self) -> FloatArray:
        """ITL per chunk: the gap before each chunk after the first, shape ``[n_chunks - 1]``."""
        times = np.asarray(self.chunk_times_s, dtype=np.float64)
        return np.diff(times) if times.size > 1 else np.zeros(0)

    def itl_per_token_s(self) -> tuple[FloatArray, FloatArray]:
        """ITL per token: each chunk gap ÷ tokens in the chunk after it, and those token counts
        (the weight of each value: one sample per token). Both of shape ``[n_chunks - 1]``."""
        g = self.chunk_gaps_s()
        w = np.maximum(np.asarray(self.chunk_tokens[1 : g.size + 1], dtype=np.float64), 1.0)
        return g / w, w

    @property
    def tpot_s(self) -> float | None:
        """(E2E − TTFT) ÷ (output tokens − 1); None for one output token or a failed request."""
        n = self.output_tokens
        if not n or n <= 1 or self.ttft_s is None or self.e2e_s is None:
            return None
        return (self.e2e_s - self.ttft_s) / (n - 1)


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
    send_lag_ms: Distribution | None = Field(
        default=None,
        description="open loop and trace replay: actual − scheduled send time of each request",
    )


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
        per_token, w = r.itl_per_token_s()
        if per_token.size:
            gaps.append(r.chunk_gaps_s())
            tok_vals.append(per_token)
            tok_w.append(w)
            n_chunks += per_token.size
            n_chunk_tokens += sum(r.chunk_tokens[1:])
        tpot = r.tpot_s
        if tpot is not None:
            tpots.append(tpot)
    lags = [r.send_s - r.scheduled_s for r in recs if r.scheduled_s is not None]

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
        send_lag_ms=Distribution.of(lags) if lags else None,
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
    goodput: Goodput | None = Field(default=None, description="under the run's SLO, if any")
    time_scale: float | None = Field(
        default=None, description="trace replay: wall seconds per trace second"
    )

    @property
    def load(self) -> float | None:
        """The level's load: its rate when open loop, else its concurrency (None: a trace)."""
        if self.time_scale is not None:
            return None
        return self.rate if self.rate is not None else self.concurrency


def summarize_level(
    target: str,
    url: str,
    label: str,
    concurrency: int | None,
    rate: float | None,
    records: list[RequestRecord],
    acceptance: SpecAcceptance | None,
    *,
    slo: SLO | None = None,
    time_scale: float | None = None,
) -> LevelSummary:
    """The one place a level's summary is assembled (after a run, or from an interrupted one)."""
    classes = sorted({r.cls for r in records if r.cls is not None})
    overall = stats_of(records)
    return LevelSummary(
        target=target,
        url=url,
        level=label,
        concurrency=concurrency,
        rate=rate,
        overall=overall,
        classes={c: stats_of(r for r in records if r.cls == c) for c in classes},
        acceptance=acceptance,
        goodput=None if slo is None else goodput_of(records, slo, overall.duration_s),
        time_scale=time_scale,
    )


class Comparison(Frozen):
    """Candidate vs baseline at one level (see :class:`~alphagate.sim.results.Speedups`)."""

    level: str
    speedups: Speedups
    goodput_ratio: float | None = Field(
        default=None, description="good requests/s, candidate ÷ baseline (None: no SLO, or 0/0)"
    )
    output_goodput_ratio: float | None = Field(
        default=None, description="good requests' output tokens/s, candidate ÷ baseline"
    )


def compare_levels(levels: list[LevelSummary]) -> list[Comparison]:
    """Candidate vs baseline at every level where both ran, in level order."""
    by = {(lv.target, lv.level): lv for lv in levels}
    order = list(dict.fromkeys(lv.level for lv in levels))
    out = []
    for label in order:
        b, c = by.get(("baseline", label)), by.get(("candidate", label))
        if b is not None and c is not None:
            gb, gc = b.goodput, c.goodput
            out.append(
                Comparison(
                    level=label,
                    speedups=speedups(c.overall, b.overall),
                    goodput_ratio=None
                    if gb is None or gc is None
                    else ratio(gc.good_requests_per_s, gb.good_requests_per_s),
                    output_goodput_ratio=None
                    if gb is None or gc is None
                    else ratio(gc.good_output_tokens_per_s, gb.good_output_tokens_per_s),
                )
            )
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
    slo: SLO | None = Field(default=None, description="the latency SLO goodput is counted under")
    sweep: SweepSummary | None = Field(
        default=None, description="--sweep: the knee of each target and their ratio"
    )
    worker_failures: list[str] = Field(
        default_factory=list,
        description="--workers: each worker that died, and what its share of the load lost",
    )

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
        if self.worker_failures:
            return f"the load was not sent as asked: {self.worker_failures[0]}"
        return None

    def records_path(self, summary: Path) -> tuple[Path | None, list[Path]]:
        """This run's ``requests.jsonl``: beside ``summary`` (under the name the summary records),
        else at the recorded path. Returns the one found (or None) and every place looked at."""
        named = Path(self.records_file) if self.records_file else Path("requests.jsonl")
        looked = list(dict.fromkeys([summary.parent / named.name, named]))
        return next((p for p in looked if p.is_file()), None), looked
