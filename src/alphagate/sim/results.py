"""Summaries of simulator traces: throughput, latency distributions, realised acceptance, speedups.

A streamed chunk may carry several tokens, so both **ITL per chunk**
(the gap before each streamed chunk; what ``vllm bench serve`` reports) and **ITL per token** (the
chunk gap ÷ tokens in the chunk, one sample per token) are reported; TPOT = (E2E − TTFT) ÷
(output tokens − 1). Realised acceptance uses vLLM's counter semantics: ρ = accepted ÷ drafted,
τ = 1 + accepted ÷ drafts, per-position rate = accepted at position i ÷ drafts (unconditional).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
from pydantic import Field, model_validator

from alphagate.core.records import Frozen
from alphagate.sim.engine import RunTrace, Scenario
from alphagate.sim.workload import ClosedLoop
from alphagate.theory.acceptance import conditional_from_unconditional

FloatArray = npt.NDArray[np.float64]

__all__ = [
    "CDF_LEVELS",
    "PERCENTILES",
    "Distribution",
    "LatencyStats",
    "SimSummary",
    "Speedups",
    "ratio",
    "speedups",
    "summarize",
    "weighted_quantiles",
]

PERCENTILES = (50.0, 90.0, 99.0, 99.9)


def weighted_quantiles(
    values: npt.ArrayLike, weights: npt.ArrayLike, qs: npt.ArrayLike
) -> FloatArray:
    """Quantiles (``qs`` in [0, 1]) of a weighted sample: the smallest value whose cumulative
    weight reaches q (inverted CDF, as numpy's ``method='inverted_cdf'`` for unit weights)."""
    v = np.asarray(values, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    q = np.asarray(qs, dtype=np.float64)
    keep = w > 0
    v, w = v[keep], w[keep]
    if v.size == 0:
        return np.full(q.shape, np.nan)
    order = np.argsort(v, kind="stable")
    v, cw = v[order], np.cumsum(w[order])
    idx = np.searchsorted(cw, q * cw[-1], side="left")
    return np.asarray(v[np.minimum(idx, v.size - 1)])


class Distribution(Frozen):
    """Mean and percentiles of one latency, in milliseconds (None when there are no samples)."""

    mean: float | None
    p50: float | None
    p90: float | None
    p99: float | None
    p99_9: float | None
    samples: float

    @classmethod
    def of(cls, values_s: npt.ArrayLike, weights: npt.ArrayLike | None = None) -> Distribution:
        v = np.asarray(values_s, dtype=np.float64) * 1e3
        w = np.ones_like(v) if weights is None else np.asarray(weights, dtype=np.float64)
        ok = np.isfinite(v) & (w > 0)
        v, w = v[ok], w[ok]
        if v.size == 0:
            return cls(mean=None, p50=None, p90=None, p99=None, p99_9=None, samples=0.0)
        q = weighted_quantiles(v, w, np.asarray(PERCENTILES) / 100.0)
        return cls(
            mean=float((v * w).sum() / w.sum()),
            p50=float(q[0]),
            p90=float(q[1]),
            p99=float(q[2]),
            p99_9=float(q[3]),
            samples=float(w.sum()),
        )


class LatencyStats(Frozen):
    """Throughput and latency of one run: what a simulator summary and a bench level share."""

    output_tokens_per_s: float
    mean_tokens_per_chunk: float | None
    ttft_ms: Distribution
    tpot_ms: Distribution
    itl_per_chunk_ms: Distribution
    itl_per_token_ms: Distribution
    e2e_ms: Distribution


class SimSummary(LatencyStats):
    """Aggregate result of one simulated scenario."""

    label: str
    k: int
    load: str
    completed: int
    duration_s: float
    output_tokens: int
    request_throughput: float
    mean_batch: float = Field(
        description="running sequences, time-averaged over the whole run (ramp-up and drain "
        "included): how close the run came to its concurrency"
    )
    step_ms: Distribution
    num_drafts: int
    num_draft_tokens: int
    num_accepted_tokens: int
    num_accepted_per_pos: list[int] | None = Field(
        default=None,
        description="drafts accepted at each position, counted as vLLM counts "
        "spec_decode_num_accepted_tokens_per_pos (None without speculation)",
    )
    draft_acceptance_rate: float | None
    mean_acceptance_length: float | None
    per_position_acceptance: list[float] | None
    implied_alpha_by_pos: list[float | None] | None
    itl_per_token_cdf_ms: list[float]  # quantiles at CDF_LEVELS, for plotting

    @model_validator(mode="before")
    @classmethod
    def _counts_of_older_files(cls, data: Any) -> Any:
        """A result written before ``num_accepted_per_pos``: the counts from the rates it kept
        (each rate is a count over ``num_drafts``, so the product is that count)."""
        if isinstance(data, dict) and data.get("num_accepted_per_pos") is None:
            rates, drafts = data.get("per_position_acceptance"), data.get("num_drafts")
            if rates and isinstance(drafts, int) and drafts > 0:
                data = {**data, "num_accepted_per_pos": [round(x * drafts) for x in rates]}
        return data


CDF_LEVELS = tuple(i / 100.0 for i in range(101))


def _steady_window(trace: RunTrace) -> npt.NDArray[np.bool_]:
    """Closed loop: the steps until the last request was sent — every user has a request in
    flight (or is sending its next one) — excluding the drain; all steps otherwise."""
    arr = trace.scenario.arrivals
    if isinstance(arr, ClosedLoop) and np.isfinite(trace.arrival_s).any():
        window = trace.step_end_s <= np.nanmax(trace.arrival_s)
        if window.sum() >= max(10, 0.2 * trace.n_steps):
            return np.asarray(window)
    return np.ones(trace.n_steps, dtype=bool)


class _ItlSamples(NamedTuple):
    """A trace's inter-token latency samples: each step's gap once per chunk it streamed, and
    the gap ÷ the tokens of a chunk once per token."""

    chunks: FloatArray  # [n_steps] chunks each step streamed
    token_gap_s: FloatArray  # [n_steps · (k_max + 1)] gap ÷ j for a j-token chunk
    tokens: FloatArray  # [n_steps · (k_max + 1)] the weight of each: j · chunks of j tokens


def _itl_samples(trace: RunTrace) -> _ItlSamples:
    hist = trace.step_chunk_hist  # [n_steps, k_max + 2]
    j = np.arange(hist.shape[1], dtype=np.float64)
    return _ItlSamples(
        chunks=hist[:, 1:].sum(1),
        token_gap_s=(trace.step_dt_s[:, None] / np.maximum(j[None, 1:], 1.0)).ravel(),
        tokens=(hist[:, 1:] * j[None, 1:]).ravel(),
    )


def _steady_throughput(trace: RunTrace) -> float:
    """Output tokens per second inside the steady window (:func:`_steady_window`)."""
    window = _steady_window(trace)
    window_time = float(trace.step_dt_s[window].sum())
    return float(trace.step_tokens[window].sum() / window_time) if window_time > 0 else 0.0


class _Acceptance(NamedTuple):
    """Realised acceptance in vLLM's counter semantics (all None without drafts)."""

    draft_acceptance_rate: float | None = None  # ρ
    mean_acceptance_length: float | None = None  # τ
    per_position_acceptance: list[float] | None = None
    num_accepted_per_pos: list[int] | None = None
    implied_alpha_by_pos: list[float | None] | None = None


def _acceptance(trace: RunTrace) -> _Acceptance:
    if trace.num_drafts <= 0 or trace.num_draft_tokens <= 0:
        return _Acceptance()
    rates = trace.accepted_per_pos / trace.num_drafts
    return _Acceptance(
        draft_acceptance_rate=trace.num_accepted_tokens / trace.num_draft_tokens,
        mean_acceptance_length=1.0 + trace.num_accepted_tokens / trace.num_drafts,
        per_position_acceptance=[float(x) for x in rates],
        num_accepted_per_pos=[int(x) for x in trace.accepted_per_pos],
        implied_alpha_by_pos=[
            None if np.isnan(x) else float(x) for x in conditional_from_unconditional(rates)
        ],
    )


def _load(sc: Scenario) -> str:
    if isinstance(sc.arrivals, ClosedLoop):
        return f"closed loop, {sc.arrivals.users} users"
    return f"open loop, {sc.arrivals.rate:g} req/s (burstiness {sc.arrivals.burstiness:g})"


def summarize(trace: RunTrace) -> SimSummary:
    """Reduce a :class:`RunTrace` to throughput, latency distributions and realised acceptance."""
    sc = trace.scenario
    out_len = sc.requests.output_len
    done = np.isfinite(trace.finish_s)
    multi = done & (out_len > 1)
    tpot = np.where(
        multi, (trace.finish_s - trace.first_token_s) / np.maximum(out_len - 1, 1), np.nan
    )
    duration = float(np.nanmax(trace.finish_s) - np.nanmin(trace.arrival_s)) if done.any() else 0.0
    dt = trace.step_dt_s
    itl = _itl_samples(trace)
    acceptance = _acceptance(trace)
    return SimSummary(
        label=sc.label,
        k=sc.k,
        load=_load(sc),
        completed=int(done.sum()),
        duration_s=duration,
        output_tokens=int(out_len[done].sum()),
        output_tokens_per_s=_steady_throughput(trace),
        request_throughput=float(done.sum() / duration) if duration > 0 else 0.0,
        mean_batch=float((trace.step_n_running * dt).sum() / dt.sum()) if dt.sum() > 0 else 0.0,
        mean_tokens_per_chunk=(
            float(itl.tokens.sum() / itl.chunks.sum()) if itl.chunks.sum() > 0 else None
        ),
        ttft_ms=Distribution.of((trace.first_token_s - trace.arrival_s)[done]),
        e2e_ms=Distribution.of((trace.finish_s - trace.arrival_s)[done]),
        tpot_ms=Distribution.of(tpot[multi]),
        itl_per_chunk_ms=Distribution.of(dt, itl.chunks),
        itl_per_token_ms=Distribution.of(itl.token_gap_s, itl.tokens),
        step_ms=Distribution.of(dt),
        num_drafts=trace.num_drafts,
        num_draft_tokens=trace.num_draft_tokens,
        num_accepted_tokens=trace.num_accepted_tokens,
        num_accepted_per_pos=acceptance.num_accepted_per_pos,
        draft_acceptance_rate=acceptance.draft_acceptance_rate,
        mean_acceptance_length=acceptance.mean_acceptance_length,
        per_position_acceptance=acceptance.per_position_acceptance,
        implied_alpha_by_pos=acceptance.implied_alpha_by_pos,
        itl_per_token_cdf_ms=[
            float(x) * 1e3 for x in weighted_quantiles(itl.token_gap_s, itl.tokens, CDF_LEVELS)
        ],
    )


class Speedups(Frozen):
    """How many times better the candidate (speculative) run is than the baseline, per metric.

    Throughput: candidate ÷ baseline. Latencies: baseline ÷ candidate. So > 1 always means
    "speculation helps" and < 1 "speculation hurts" (a 0.88× P99 ITL speedup is a 1.14× higher
    P99). None where either side has no samples.
    """

    throughput_speedup: float | None
    tpot_mean_speedup: float | None
    ttft_p50_speedup: float | None
    ttft_p99_speedup: float | None
    e2e_p50_speedup: float | None
    e2e_p99_speedup: float | None
    itl_per_token_mean_speedup: float | None
    itl_per_token_p50_speedup: float | None
    itl_per_token_p99_speedup: float | None
    itl_per_chunk_p50_speedup: float | None
    itl_per_chunk_p99_speedup: float | None
    candidate_tokens_per_chunk: float | None


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """numerator ÷ denominator, or None when either is missing or the denominator is not positive."""
    if numerator is None or denominator is None or denominator <= 0:
        return None
    return numerator / denominator


def speedups(candidate: LatencyStats, baseline: LatencyStats) -> Speedups:
    """Candidate vs baseline on every shared metric (see :class:`Speedups`)."""
    c, b = candidate, baseline
    return Speedups(
        throughput_speedup=ratio(c.output_tokens_per_s, b.output_tokens_per_s),
        tpot_mean_speedup=ratio(b.tpot_ms.mean, c.tpot_ms.mean),
        ttft_p50_speedup=ratio(b.ttft_ms.p50, c.ttft_ms.p50),
        ttft_p99_speedup=ratio(b.ttft_ms.p99, c.ttft_ms.p99),
        e2e_p50_speedup=ratio(b.e2e_ms.p50, c.e2e_ms.p50),
        e2e_p99_speedup=ratio(b.e2e_ms.p99, c.e2e_ms.p99),
        itl_per_token_mean_speedup=ratio(b.itl_per_token_ms.mean, c.itl_per_token_ms.mean),
        itl_per_token_p50_speedup=ratio(b.itl_per_token_ms.p50, c.itl_per_token_ms.p50),
        itl_per_token_p99_speedup=ratio(b.itl_per_token_ms.p99, c.itl_per_token_ms.p99),
        itl_per_chunk_p50_speedup=ratio(b.itl_per_chunk_ms.p50, c.itl_per_chunk_ms.p50),
        itl_per_chunk_p99_speedup=ratio(b.itl_per_chunk_ms.p99, c.itl_per_chunk_ms.p99),
        candidate_tokens_per_chunk=c.mean_tokens_per_chunk,
    )
