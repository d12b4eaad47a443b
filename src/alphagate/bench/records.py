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
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from pydantic import Field, ValidationError, model_validator

from alphagate.bench.slo import SLO, Goodput, goodput_of
from alphagate.bench.sweep import SweepSummary
from alphagate.bench.validity import RunValidity
from alphagate.core.errors import validation_problem
from alphagate.core.records import Frozen, Results
from alphagate.measure.engines import from_meta_keys
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


class RequestSpecDecode(Frozen):
    """The server's own speculative-decoding counts for one request.

    vLLM (``--per-request-spec-decode-metrics summary|detailed``, 0.32+) sends them on the final
    usage chunk as ``metrics.speculative_decoding`` (``SpeculativeDecodingMetrics`` in
    ``vllm/entrypoints/generate/base/protocol.py``), counted by the scheduler where it counts its
    ``vllm:spec_decode_*`` counters (``vllm/v1/core/sched/scheduler.py``): the requests of a
    window sum to the counters' increase. SGLang reports ``meta_info`` counts (``spec_verify_ct``,
    ``spec_num_correct_drafts`` / ``spec_accepted_drafts``, ``spec_num_proposed_drafts`` /
    ``spec_proposed_drafts``)."""

    num_drafts: int = Field(ge=0, description="verify steps with drafts (vLLM num_spec_steps)")
    num_draft_tokens: int = Field(ge=0)
    num_accepted_tokens: int = Field(ge=0, description="accepted draft tokens, bonus excluded")
    acceptance_histogram: list[int] | None = Field(
        default=None, description="steps that accepted exactly j drafts, j = 0..K"
    )
    k: int | None = Field(default=None, description="num_speculative_tokens (the largest K)")
    source: Literal["vllm", "sglang"] = "vllm"
    version: str | None = Field(
        default=None,
        exclude_if=lambda v: v is None,
        description="the engine versions the reply's key names date it to (SGLang's meta_info: "
        "≤ 0.5.10, 0.5.11, ≥ 0.5.12; alphagate.measure.engines)",
    )

    @property
    def definition(self) -> str:
        """What ρ of these counts means (:func:`alphagate.measure.engines.definition`): SGLang
        proposes ``num_draft_tokens − 1`` nodes per pass; more than the histogram's depth
        (the steps) is a draft tree's."""
        if self.source == "vllm":
            return "drafts"
        h = self.acceptance_histogram
        if not h or self.num_drafts == 0:
            return "unknown"
        nodes = self.num_draft_tokens / self.num_drafts
        return "tree nodes" if nodes > len(h) - 1 + 1e-9 else "drafts"

    @model_validator(mode="after")
    def _consistent(self) -> RequestSpecDecode:
        if self.num_accepted_tokens > self.num_draft_tokens:
            raise ValueError(
                f"{self.num_accepted_tokens} accepted draft tokens exceed the "
                f"{self.num_draft_tokens} drafted"
            )
        if self.num_drafts > self.num_draft_tokens:
            raise ValueError(f"{self.num_drafts} steps but {self.num_draft_tokens} draft tokens")
        h = self.acceptance_histogram
        if h is not None:
            if any(x < 0 for x in h) or sum(h) != self.num_drafts:
                raise ValueError(
                    f"the acceptance histogram {h} does not sum to the {self.num_drafts} steps"
                )
            if sum(j * x for j, x in enumerate(h)) != self.num_accepted_tokens:
                raise ValueError(
                    f"the acceptance histogram {h} does not give the "
                    f"{self.num_accepted_tokens} accepted tokens"
                )
        return self

    def accepted_per_pos(self) -> list[int]:
        """vLLM's per-position counts c_i (steps accepting more than i drafts), from the
        histogram; empty without one."""
        h = self.acceptance_histogram or []
        return [sum(h[i + 1 :]) for i in range(max(len(h) - 1, 0))]


def _first_int(raw: dict[str, Any], *keys: str) -> int | None:
    for key in keys:
        v = raw.get(key)
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    return None


def spec_of(raw: dict[str, Any] | None) -> tuple[RequestSpecDecode | None, str | None]:
    """A reply's per-request spec-decode counts as :class:`RequestSpecDecode`, or why they
    cannot be used (None, None: the server sent none).

    SGLang's key names changed twice with the same counts behind them (accepted drafts, no
    bonus; verify passes × (num_draft_tokens − 1) proposed): ``spec_accept_token_num`` /
    ``spec_draft_token_num`` up to 0.5.10, ``spec_accepted_drafts`` / ``spec_proposed_drafts``
    in 0.5.11 (PR #23530), ``spec_num_correct_drafts`` / ``spec_num_proposed_drafts`` /
    ``spec_correct_drafts_histogram`` from 0.5.12 (PR #24081); all are read, and the record
    keeps the versions its keys date it to."""
    if raw is None:
        return None, None
    version = None
    if raw.get("source") == "sglang":
        fields = {
            "num_drafts": _first_int(raw, "spec_verify_ct"),
            "num_accepted_tokens": _first_int(
                raw, "spec_num_correct_drafts", "spec_accepted_drafts", "spec_accept_token_num"
            ),
            "num_draft_tokens": _first_int(
                raw, "spec_num_proposed_drafts", "spec_proposed_drafts", "spec_draft_token_num"
            ),
        }
        hist = raw.get("spec_correct_drafts_histogram", raw.get("spec_accept_histogram"))
        source = "sglang"
        dated = from_meta_keys(raw)
        version = None if dated is None else dated.version
    else:
        fields = {
            "num_drafts": _first_int(raw, "num_spec_steps"),
            "num_accepted_tokens": _first_int(raw, "num_accepted_draft_tokens"),
            "num_draft_tokens": _first_int(raw, "num_draft_tokens"),
        }
        hist = raw.get("acceptance_histogram")
        source = "vllm"
    missing = [k for k, v in fields.items() if v is None]
    if missing:
        return None, f"{source} per-request counts without {', '.join(missing)}: {str(raw)[:200]}"
    k = _first_int(raw, "num_spec_tokens")
    try:
        return (
            RequestSpecDecode(
                **fields,
                acceptance_histogram=hist if isinstance(hist, list) else None,
                k=k if k is not None else (len(hist) - 1 if isinstance(hist, list) else None),
                source=source,
                version=version,
            ),
            None,
        )
    except ValidationError as exc:
        return None, f"{source} per-request counts rejected: {validation_problem(exc)}"


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
    repeat: int = Field(
        default=0,
        ge=0,
        exclude_if=lambda v: v == 0,
        description="--repeats: which run of its level this request was sent in (from 0)",
    )
    text: RequestText | None = Field(
        default=None,
        exclude_if=lambda v: v is None,
        description="--save-text: the prompt and the output, as text and token ids",
    )
    spec: RequestSpecDecode | None = Field(
        default=None,
        exclude_if=lambda v: v is None,
        description="the server's speculative-decoding counts for this request, where it "
        "returns them (vLLM --per-request-spec-decode-metrics, SGLang meta_info)",
    )
    spec_problem: str | None = Field(
        default=None,
        exclude_if=lambda v: v is None,
        description="the server sent per-request counts that cannot be right (they are not kept)",
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
            "request_acceptance": request_acceptance(records),
            "goodput": None if slo is None else goodput_of(records, slo, duration),
            "runs": [run for r in runs for run in r.runs],
            "validity": distorted[0] if distorted else worst[0] if worst else None,
        }
    )


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
