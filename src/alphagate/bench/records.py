"""Per-request records, level summaries and the typed result of ``alphagate bench``.

Latency accounting: TTFT = first chunk carrying choices − send; ITL per chunk = gap between
consecutive chunks (what ``vllm bench serve`` reports); ITL per token = that gap ÷ tokens in the
chunk, one sample per token; TPOT = (E2E − TTFT) ÷ (output tokens − 1) with output tokens from
``usage``. Baseline and candidate are measured by the same rule.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

import numpy as np
import numpy.typing as npt
from pydantic import Field

from alphagate.bench.request_record import RequestRecord, RequestSpecDecode, RequestText, spec_of
from alphagate.bench.slo import SLO, Goodput, goodput_of
from alphagate.bench.sweep import SweepSummary
from alphagate.bench.validity import RunValidity
from alphagate.core.records import Frozen, Results
from alphagate.measure.estimate import AcceptanceEstimate, Interval, estimate_from_requests
from alphagate.measure.prom import SpecAcceptance, merge_acceptance
from alphagate.sim.results import Distribution, LatencyStats, Speedups, ratio, speedups
from alphagate.theory.intervals import ratio_interval

FloatArray = npt.NDArray[np.float64]

__all__ = [
    "BenchResult",
    "Comparison",
    "LevelSummary",
    "RequestAcceptance",
    "RequestRecord",
    "RequestSpecDecode",
    "RequestText",
    "RunSummary",
    "Stats",
    "compare_levels",
    "merge_runs",
    "request_acceptance",
    "spec_of",
    "stats_of",
    "summarize_level",
]


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


def _span_s(records: list[RequestRecord]) -> float:
    """First send to last end of the non-warm-up records (0 without any)."""
    recs = [r for r in records if not r.warmup]
    if not recs:
        return 0.0
    end = max(r.send_s + (r.e2e_s or 0.0) for r in recs)
    return max(end - min(r.send_s for r in recs), 1e-9)


def stats_of(records: Iterable[RequestRecord], duration_s: float | None = None) -> Stats:
    """Statistics of the non-warm-up records; ``duration_s``: the time they were sent over when
    it is not first send to last end (several runs of a level: the sum of the runs')."""
    recs = [r for r in records if not r.warmup]
    ok = [r for r in recs if r.ok]
    failed = Counter(r.error_type or "unknown" for r in recs if not r.ok)
    first_error: dict[str, str] = {}
    for r in recs:
        if not r.ok:
            first_error.setdefault(r.error_type or "unknown", r.error_message or "")
    duration = (_span_s(recs) if duration_s is None else duration_s) if recs else 0.0
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


class RequestAcceptance(Frozen):
    """Acceptance from the server's per-request counts over one level: all of it and per class,
    with intervals cluster-robust over requests."""

    overall: AcceptanceEstimate
    classes: dict[str, AcceptanceEstimate]
    requests_with_counts: int = Field(description="records that carried per-request counts")
    requests: int = Field(description="records of the level")
    problems: int = Field(default=0, description="replies whose counts were inconsistent")


def request_acceptance(records: Iterable[RequestRecord]) -> RequestAcceptance | None:
    """Acceptance from each record's :class:`RequestSpecDecode` (warm-up requests included: the
    server's counters count them too); None when no record carries counts, or when the counts
    of different requests cannot come from one decoder."""
    recs = list(records)
    with_spec = [r for r in recs if r.spec is not None]
    if not with_spec:
        return None

    def one(rs: list[RequestRecord]) -> AcceptanceEstimate:
        specs = [r.spec for r in rs if r.spec is not None]
        ks = {s.k for s in specs if s.k is not None}
        hists = [s.acceptance_histogram for s in specs]
        return estimate_from_requests(
            [(float(s.num_drafts), float(s.num_draft_tokens), float(s.num_accepted_tokens))
             for s in specs],
            [h for h in hists if h is not None] if all(h is not None for h in hists) else None,
            max(ks) if ks else None,
        )  # fmt: skip

    classes = sorted({r.cls for r in with_spec if r.cls is not None})
    try:
        return RequestAcceptance(
            overall=one(with_spec),
            classes={c: one([r for r in with_spec if r.cls == c]) for c in classes},
            requests_with_counts=len(with_spec),
            requests=len(recs),
            problems=sum(r.spec_problem is not None for r in recs),
        )
    except ValueError:  # each record's counts were checked; together they still disagree
        return None


class RunSummary(Frozen):
    """One run of a level (``--repeats``): what a between-run interval is made of."""

    repeat: int
    duration_s: float
    completed: int
    failed: int
    output_tokens: int
    output_tokens_per_s: float
    tpot_mean_ms: float | None
    itl_per_token_p99_ms: float | None
    good_requests_per_s: float | None = None
    acceptance: SpecAcceptance | None = None
    validity: RunValidity | None = None


class LevelSummary(Frozen):
    """One target at one load level: overall and per-class statistics, and measured acceptance.

    With ``--repeats`` the level ran several times: the statistics pool every run's requests
    (throughput over the sum of the runs' durations), ``runs`` keeps each run's own figures and
    ``acceptance`` sums the runs' counter increases."""

    target: str
    url: str
    level: str
    concurrency: int | None
    rate: float | None
    overall: Stats
    classes: dict[str, Stats]
    acceptance: SpecAcceptance | None
    acceptance_problem: str | None = Field(
        default=None,
        description="why the /metrics counters gave no acceptance (counters no decoder produces, "
        "…); None when they did, or were not scraped",
    )
    speculating: bool | None = Field(
        default=None,
        description="from the server's /metrics: true when it shows speculation (vLLM's "
        "spec-decode counters, SGLang's accept length ≥ 1), false when the engine's own "
        "/metrics was read without that (speculation off), null when none was read",
    )
    request_acceptance: RequestAcceptance | None = Field(
        default=None,
        description="from the server's per-request counts (vLLM --per-request-spec-decode-"
        "metrics): per class, cluster-robust over requests",
    )
    goodput: Goodput | None = Field(default=None, description="under the run's SLO, if any")
    time_scale: float | None = Field(
        default=None, description="trace replay: wall seconds per trace second"
    )
    runs: list[RunSummary] = Field(
        default_factory=list, description="each run of the level (one without --repeats)"
    )
    validity: RunValidity | None = Field(
        default=None,
        description="what distorted the measurement (the worst run's figures): a distorted "
        "level is no evidence for a gate",
    )

    @property
    def distorted(self) -> bool:
        return self.validity is not None and self.validity.distorted

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
    repeat: int = 0,
    validity: RunValidity | None = None,
    acceptance_problem: str | None = None,
    speculating: bool | None = None,
) -> LevelSummary:
    """The one place a run's summary is assembled (after a run, or from an interrupted one)."""
    classes = sorted({r.cls for r in records if r.cls is not None})
    overall = stats_of(records)
    goodput = None if slo is None else goodput_of(records, slo, overall.duration_s)
    run = RunSummary(
        repeat=repeat,
        duration_s=overall.duration_s,
        completed=overall.completed,
        failed=overall.failed,
        output_tokens=overall.output_tokens,
        output_tokens_per_s=overall.output_tokens_per_s,
        tpot_mean_ms=overall.tpot_ms.mean,
        itl_per_token_p99_ms=overall.itl_per_token_ms.p99,
        good_requests_per_s=None if goodput is None else goodput.good_requests_per_s,
        acceptance=acceptance,
        validity=validity,
    )
    return LevelSummary(
        target=target,
        url=url,
        level=label,
        concurrency=concurrency,
        rate=rate,
        overall=overall,
        classes={c: stats_of(r for r in records if r.cls == c) for c in classes},
        acceptance=acceptance,
        acceptance_problem=acceptance_problem,
        speculating=speculating,
        request_acceptance=request_acceptance(records),
        goodput=goodput,
        time_scale=time_scale,
        runs=[run],
        validity=validity,
    )


def merge_runs(
    runs: list[LevelSummary], records: list[RequestRecord], *, slo: SLO | None = None
) -> LevelSummary:
    """The runs of one level against one target (``--repeats``) as one summary: statistics over
    every run's ``records``, throughput over the sum of the runs' durations (the other target ran
    in between), counter increases summed, each run's own figures in ``runs``."""
    if len(runs) == 1:
        return runs[0]
    first = runs[0]
    duration = sum(r.overall.duration_s for r in runs)
    overall = stats_of(records, duration)
    classes = sorted({r.cls for r in records if r.cls is not None})
    per_class_duration = {
        c: sum(
            _span_s([rec for rec in records if rec.cls == c and rec.repeat == run.runs[0].repeat])
            for run in runs
        )
        for c in classes
    }
    measured = [r.acceptance for r in runs if r.acceptance is not None]
    worst = [r.validity for r in runs if r.validity is not None]
    distorted = [v for v in worst if v.distorted]
    return first.model_copy(
        update={
            "overall": overall,
            "classes": {
                c: stats_of((r for r in records if r.cls == c), per_class_duration[c])
                for c in classes
            },
            "acceptance": merge_acceptance(measured) if len(measured) == len(runs) else None,
            "acceptance_problem": next(
                (r.acceptance_problem for r in runs if r.acceptance_problem), None
            ),
            "speculating": _any_reading([r.speculating for r in runs]),
            "request_acceptance": request_acceptance(records),
            "goodput": None if slo is None else goodput_of(records, slo, duration),
            "runs": [run for r in runs for run in r.runs],
            "validity": distorted[0] if distorted else worst[0] if worst else None,
        }
    )


def _any_reading(states: list[bool | None]) -> bool | None:
    """Whether the server speculates over several runs: yes if any run read so, else no if any
    run read so, else unknown."""
    return True if True in states else False if False in states else None


def paired_ratio(
    base: list[float], cand: list[float], *, inverse: bool
) -> tuple[float | None, Interval | None, str]:
    """The candidate-vs-baseline ratio of a figure measured once per run (``inverse``: a time,
    baseline ÷ candidate), paired by run: the geometric mean of the pairs' ratios and its
    Student's t interval (:func:`~alphagate.theory.intervals.ratio_interval`), or why not."""
    ratios = []
    for i, (b, c) in enumerate(zip(base, cand, strict=True)):
        num, den = (b, c) if inverse else (c, b)
        if not (math.isfinite(num) and math.isfinite(den)) or num <= 0 or den <= 0:
            return None, None, f"run {i}: the figure is zero or undefined on one side"
        ratios.append(num / den)
    if len(ratios) < 2:
        return None, None, "one run: no interval between runs"
    value, low, high = ratio_interval(ratios)
    return value, Interval(low=low, high=high), ""


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
    runs: int = Field(default=1, description="paired runs of the level (--repeats)")
    throughput_interval: Interval | None = Field(
        default=None, description="between runs (≥ 2 paired runs): Student's t on log ratios"
    )
    tpot_interval: Interval | None = None
    goodput_interval: Interval | None = None
    distorted: bool = Field(
        default=False, description="a run of either side was distorted (bench.validity)"
    )


def _between_runs(
    b: LevelSummary, c: LevelSummary, figure: str, *, inverse: bool
) -> Interval | None:
    rb = {r.repeat: getattr(r, figure) for r in b.runs}
    rc = {r.repeat: getattr(r, figure) for r in c.runs}
    pairs = sorted(set(rb) & set(rc))
    if len(pairs) < 2 or any(rb[p] is None or rc[p] is None for p in pairs):
        return None
    _, interval, _ = paired_ratio([rb[p] for p in pairs], [rc[p] for p in pairs], inverse=inverse)
    return interval


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
                    runs=len({r.repeat for r in b.runs} & {r.repeat for r in c.runs}),
                    throughput_interval=_between_runs(b, c, "output_tokens_per_s", inverse=False),
                    tpot_interval=_between_runs(b, c, "tpot_mean_ms", inverse=True),
                    goodput_interval=_between_runs(b, c, "good_requests_per_s", inverse=False),
                    distorted=b.distorted or c.distorted,
                )
            )
    return out


class BenchResult(Results):
    """What ``alphagate bench`` writes to ``summary.json`` (and prints with ``--json``)."""

    verb: Literal["bench"] = "bench"
    run_id: str
    started_at: float | None = Field(default=None, description="Unix time the run started")
    ended_at: float | None = Field(default=None, description="Unix time the run ended")
    config: dict[str, object] = Field(description="the run's configuration, secrets redacted")
    served_model: str | None = Field(
        default=None,
        description="the model name the requests carried: --model, or the first the server "
        "listed at /v1/models (None: neither)",
    )
    served_model_root: str | None = Field(
        default=None,
        description="the checkpoint behind the served name, as the server's /v1/models "
        "reports it (vLLM's root); None when it reports none",
    )
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

    @property
    def model(self) -> str | None:
        """The model the run measured: what its requests named (older results: --model)."""
        m = self.served_model or self.config.get("model")
        return m if isinstance(m, str) else None

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
