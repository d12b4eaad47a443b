"""The replayed requests through the step engine, as the client would have measured them, and the
tail figures of any resample of the requests.

A :class:`Variant` is one configuration of the server (the step-time model, K or its batch-size
schedule, acceptance, the largest batch, prefills in or apart); :func:`replay` runs the level's
requests through it (:func:`alphagate.sim.engine.run_engine`, each run as it was sent, a few
seeds) and keeps every streamed chunk's gap with the request it belongs to, so that a bootstrap
over requests (:func:`resamples`) reweights the same samples instead of simulating again.

Two per-token views of one replay: ``itl`` is each chunk's gap ÷ its tokens (the bench's ITL per
token); ``even`` spreads each request's tokens evenly over its chunks (gap ÷ the request's mean
tokens per chunk) — the same timeline without any step that yielded less than its mean, which is
how :mod:`alphagate.explain.attribution` removes rejection streaks.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from alphagate.bench.records import RequestRecord
from alphagate.explain.replay import LevelReplay, peak_overlap
from alphagate.sim.cost import StepCostModel
from alphagate.sim.engine import RunTrace, Scenario, run_engine

__all__ = [
    "DecodePriced",
    "Samples",
    "Variant",
    "decode_priced",
    "measured_samples",
    "quantiles",
    "replay",
    "resamples",
    "tail_means",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class DecodePriced(StepCostModel):
    """A step-time model that prices every step as a decode step of the same batch and prefill:
    the verify pass over K + 1 tokens per sequence and the drafting cost nothing more."""

    def step_seconds(self, *, k: float, **step: Any) -> float:
        return super().step_seconds(k=0, **step)


def decode_priced(cost: StepCostModel) -> DecodePriced:
    """``cost`` pricing every step as a decode step."""
    return DecodePriced(**{f.name: getattr(cost, f.name) for f in fields(cost)})


@dataclass(frozen=True)
class Variant:
    """One server configuration to replay the requests through."""

    cost: StepCostModel
    k: int
    table: FloatArray  # [n_classes, max(k, 1)]: P(≥ j drafts accepted)
    cap: int  # the largest batch
    prefill_apart: bool = False
    k_by_batch: list[list[int]] | None = None


@dataclass(frozen=True)
class Samples:
    """What the client would have measured of a replay (every run, every seed). Chunk arrays have
    shape ``[n_chunks]``; ``ttft_s`` and ``ttft_request`` ``[n_requests · seeds]``."""

    request: IntArray  # the replayed request (0..n−1) each chunk belongs to
    gap_s: FloatArray  # the chunk's gap since the request's previous chunk (or first token)
    tokens: FloatArray  # tokens in the chunk
    mean_tokens: FloatArray  # the request's mean tokens per chunk
    ttft_s: FloatArray
    ttft_request: IntArray
    output_tokens: float
    span_s: float  # the runs' durations, summed
    peak_streams: int = 0  # the most requests streaming at once (first token to last), any run

    @property
    def throughput(self) -> float:
        """Output tokens per second over the runs."""
        return self.output_tokens / self.span_s if self.span_s > 0 else 0.0

    @property
    def chunk_rate(self) -> float:
        """Streamed chunks per second over the runs: how busy the client reading them was."""
        return self.request.size / self.span_s if self.span_s > 0 else 0.0


def _chunks(trace: RunTrace, ids: IntArray) -> tuple[IntArray, FloatArray, FloatArray, FloatArray]:
    """(request, gap, tokens, request's mean tokens per chunk) of every decode chunk of a trace;
    a request's first gap is from its first token (the prefill's)."""
    order = np.argsort(trace.chunk_request, kind="stable")
    req = trace.chunk_request[order]
    at = trace.step_end_s[trace.chunk_step[order]]
    tok = trace.chunk_tokens[order].astype(np.float64)
    first = np.ones(req.size, dtype=bool)
    first[1:] = req[1:] != req[:-1]
    before = np.empty_like(at)
    before[1:] = at[:-1]
    before[first] = trace.first_token_s[req[first]]
    n = trace.first_token_s.size
    mean = np.bincount(req, weights=tok, minlength=n) / np.maximum(np.bincount(req, minlength=n), 1)
    return ids[req], at - before, tok, mean[req]


def replay(plan: LevelReplay, variant: Variant, *, seeds: int = 2, seed: int = 0) -> Samples:
    """Every run of ``plan`` through ``variant``, ``seeds`` times each (the same seeds for every
    variant); chunks keep the index of their request among all of the level's."""
    parts: list[tuple[IntArray, FloatArray, FloatArray, FloatArray]] = []
    ttft, ttft_req = [], []
    out_tokens = span = 0.0
    peak = 0
    for run, (reqs, arrivals, ids) in enumerate(
        zip(plan.runs, plan.arrivals, plan.ids, strict=True)
    ):
        scenario = Scenario(
            k=variant.k, arrivals=arrivals, requests=reqs, unconditional=variant.table,
            max_num_seqs=variant.cap, prefill_apart=variant.prefill_apart,
            k_by_batch=variant.k_by_batch,
        )  # fmt: skip
        for s in range(seeds):
            rng = np.random.default_rng([seed, run, s])
            trace = run_engine(variant.cost, scenario, rng, record_chunks=True)
            parts.append(_chunks(trace, ids))
            ttft.append(trace.first_token_s - _sent(trace))
            ttft_req.append(ids)
            out_tokens += float(reqs.output_len.sum())
            span += float(np.nanmax(trace.finish_s) - np.nanmin(_sent(trace)))
            peak = max(peak, peak_overlap(trace.first_token_s, trace.finish_s))
    return Samples(
        request=np.concatenate([p[0] for p in parts]),
        gap_s=np.concatenate([p[1] for p in parts]),
        tokens=np.concatenate([p[2] for p in parts]),
        mean_tokens=np.concatenate([p[3] for p in parts]),
        ttft_s=np.concatenate(ttft),
        ttft_request=np.concatenate(ttft_req),
        output_tokens=out_tokens,
        span_s=span,
        peak_streams=peak,
    )


def _sent(trace: RunTrace) -> FloatArray:
    """When each request was sent (closed loop: when its user sent it)."""
    return trace.arrival_s


def measured_samples(records: list[RequestRecord], runs: int = 1) -> Samples:
    """The same figures from what the client measured (``records`` in replay order)."""
    req, gap, tok, mean, ttft = [], [], [], [], []
    span: dict[int, tuple[float, float]] = {}
    for i, r in enumerate(records):
        g = r.chunk_gaps_s()
        t = np.asarray(r.chunk_tokens[1 : g.size + 1], dtype=np.float64)
        req.append(np.full(g.size, i, dtype=np.int64))
        gap.append(g)
        tok.append(t)
        mean.append(np.full(g.size, t.mean() if t.size else 1.0))
        ttft.append(r.ttft_s or 0.0)
        lo, hi = span.get(r.repeat, (np.inf, -np.inf))
        span[r.repeat] = (min(lo, r.send_s), max(hi, r.send_s + (r.e2e_s or 0.0)))
    return Samples(
        request=np.concatenate(req),
        gap_s=np.concatenate(gap),
        tokens=np.concatenate(tok),
        mean_tokens=np.concatenate(mean),
        ttft_s=np.asarray(ttft, dtype=np.float64),
        ttft_request=np.arange(len(records), dtype=np.int64),
        output_tokens=float(sum(r.output_tokens or 0 for r in records)),
        span_s=sum(hi - lo for lo, hi in span.values()),
    )


def resamples(measured: npt.NDArray[np.bool_], n_boot: int, rng: np.random.Generator) -> FloatArray:
    """How many times each request is drawn in each resample: row 0 the data as they are (one
    each), then ``n_boot`` bootstrap draws with replacement — of the requests ``measured`` marks
    (the others, warm-up, count 0). Shape ``[n_boot + 1, n_requests]``."""
    pool = np.nonzero(measured)[0]
    draws = pool[rng.integers(0, pool.size, size=(n_boot, pool.size))]
    counts = np.zeros((n_boot + 1, measured.size))
    counts[0] = measured
    np.add.at(counts, (np.repeat(np.arange(1, n_boot + 1), pool.size), draws.ravel()), 1.0)
    return counts


class _Top(NamedTuple):
    """The top of the sorted values, weighed in every resample."""

    values: FloatArray  # [size], ascending
    cum: FloatArray  # [n_resamples, size]: cumulative weight over the top, per resample
    head: FloatArray  # [n_resamples, 1]: the weight below the top
    total: FloatArray  # [n_resamples, 1]
    start: int  # where the top begins among all the values


def _top(
    values: FloatArray, weights: FloatArray, request: IntArray, counts: FloatArray, share: float
) -> _Top:
    """The sorted values' top, large enough to hold ``share`` of the weight in every resample
    (everything below it counts whole: the full ``[n_resamples, n_samples]`` weights are never
    formed)."""
    order = np.argsort(values, kind="stable")
    v, w_s, req = values[order], weights[order], request[order]
    total = counts @ np.bincount(request, weights=weights, minlength=counts.shape[1])
    need = share * total[:, None]
    size = min(v.size, max(64, int(4 * share * v.size)))
    while True:
        start = v.size - size
        cum = np.cumsum(counts[:, req[start:]] * w_s[start:], axis=1)  # [n_resamples, size]
        if start == 0 or (cum[:, -1:] > need).all():
            break
        size = min(v.size, size * 4)
    head = total[:, None] - cum[:, -1:]
    return _Top(v[start:], cum, head, total[:, None], start)


def quantiles(
    values: FloatArray, weights: FloatArray, request: IntArray, counts: FloatArray, qs: list[float]
) -> FloatArray:
    """Weighted quantiles (:func:`alphagate.sim.results.weighted_quantiles`' rule) of ``values``
    in every resample (``counts``, from :func:`resamples`): shape ``[len(qs), n_resamples]``.
    Only the top of the sorted values that holds ``1 − min(qs)`` of the weight is weighed."""
    top = _top(values, weights, request, counts, 1.0 - min(qs))
    out = np.empty((len(qs), counts.shape[0]))
    for i, q in enumerate(qs):
        idx = (top.head + top.cum < q * top.total).sum(axis=1)
        out[i] = top.values[np.minimum(idx, top.values.size - 1)]
    return out


def tail_means(
    values: FloatArray, weights: FloatArray, request: IntArray, counts: FloatArray, q: float
) -> FloatArray:
    """The weighted mean of ``values`` above their ``q`` quantile in every resample (the
    boundary value weighed by its part above the quantile): shape ``[n_resamples]``. Unlike a
    high quantile, it moves smoothly with the data — a P99 that falls where the distribution
    jumps (steps with a prefill chunk and steps without) moves by the size of the jump when a
    few samples cross it."""
    top = _top(values, weights, request, counts, 1.0 - q)
    above = top.head + top.cum - q * top.total  # weight above the quantile, cumulative
    w = np.diff(np.maximum(above, 0.0), axis=1, prepend=0.0)
    # a value of weight 0 (a chunk of no tokens: its gap per token is infinite) counts nothing
    weighted = np.multiply(w, top.values, out=np.zeros_like(w), where=w > 0.0)
    return np.asarray(weighted.sum(axis=1) / np.maximum(w.sum(axis=1), 1e-300))
