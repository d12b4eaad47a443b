"""Candidate vs baseline with intervals that can see the variation between runs.

A wall-clock A/B varies from run to run far more than within one run: the other work on the
machine, the server's caches, the client's own timing all move between runs, and a long run of
equal requests resampled inside itself has an interval of zero width. So an A/B is repeated
(``bench --repeats N``), alternating the sides (baseline, candidate, candidate, baseline, …: a
drift of the machine falls on both), and:

- **throughput, TPOT and goodput ratios** are one ratio per pair of runs (the r-th run of each
  side); their interval is Student's t on the log ratios with R − 1 degrees of freedom, the value
  their geometric mean;
- **P99 ITL per token** likewise: each run's own P99 (one sample per token), one ratio per pair,
  Student's t on their logs — a run's tail is a handful of chunks, and its sampling error is part
  of the spread between the pairs (a bootstrap over a few runs is cruder: with three, a quarter
  of its resamples draw one run three times);
- **one run** gets the within-run interval only (requests resampled; P99: blocks of consecutive
  requests resampled, its tail being clustered in time), marked ``single_run``: it cannot see the
  run-to-run variation, and a gate does not decide on it unless told to.

Runs are paired by their repeat index; a run without its partner (an interrupted A/B) is left
out. Failed and warm-up requests never count as measurements of speed (a gate judges the error
rate on its own).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from alphagate.bench.records import RequestRecord, paired_ratio
from alphagate.bench.slo import SLO, missed_bounds
from alphagate.measure.estimate import Interval, wilson
from alphagate.theory.intervals import ratio_interval

__all__ = ["AB_METRICS", "BLOCKS", "BOOTSTRAP", "ABValue", "ab_value"]

#: resamples of every bootstrap (seeded: the same records give the same interval)
BOOTSTRAP = 400
#: blocks of consecutive requests per run for the P99 bootstrap
BLOCKS = 10
AB_METRICS = (
    "throughput_speedup",
    "tpot_speedup",
    "itl_per_token_p99_speedup",
    "goodput_speedup",
    "error_rate",
    "itl_per_token_p99_ms",
)
FloatArray = npt.NDArray[np.float64]
#: one side's records by the run (repeat) they were sent in
Runs = dict[int, list[RequestRecord]]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class ABValue:
    """A candidate-vs-baseline figure, its 95% interval, and what the interval can see."""

    value: float | None
    interval: Interval | None
    requests: float  # requests per side behind it (the smaller side)
    runs: int  # paired runs
    basis: str
    single_run: bool
    missing: str = ""


def _runs(records: list[RequestRecord]) -> Runs:
    out: dict[int, list[RequestRecord]] = {}
    for r in records:
        if not r.warmup:
            out.setdefault(r.repeat, []).append(r)
    return out


def _span_s(recs: list[RequestRecord]) -> float:
    end = max(r.send_s + (r.e2e_s or 0.0) for r in recs)
    return max(end - min(r.send_s for r in recs), 1e-9)


def _throughput(recs: list[RequestRecord]) -> float:
    return sum(r.output_tokens or 0 for r in recs if r.ok) / _span_s(recs)


def _tpot(recs: list[RequestRecord]) -> float:
    vals = [r.tpot_s for r in recs if r.ok and r.tpot_s is not None]
    return float(np.mean(vals)) if vals else math.nan


def _goodput(slo: SLO) -> Callable[[list[RequestRecord]], float]:
    def rate(recs: list[RequestRecord]) -> float:
        return sum(missed_bounds(r, slo) == [] for r in recs) / _span_s(recs)

    return rate


def _percentile_interval(boots: FloatArray) -> Interval | None:
    """The 95% percentile interval of the finite bootstrap replicates (None without any)."""
    finite = boots[np.isfinite(boots)]
    if not finite.size:
        return None
    return Interval(low=float(np.quantile(finite, 0.025)), high=float(np.quantile(finite, 0.975)))


def _within_run(
    stat: Callable[[list[RequestRecord]], float],
    base: list[RequestRecord],
    cand: list[RequestRecord],
    inverse: bool,
    fixed_span: bool,
) -> tuple[float | None, Interval | None]:
    """One run: requests resampled (the run's span kept for rates — what one run can show)."""
    rng = np.random.default_rng(0)
    span_b, span_c = _span_s(base), _span_s(cand)

    def ratio(bi: IntArray, ci: IntArray) -> float:
        bs, cs = [base[i] for i in bi], [cand[i] for i in ci]
        if fixed_span:
            b = stat(bs) * _span_s(bs) / span_b
            c = stat(cs) * _span_s(cs) / span_c
        else:
            b, c = stat(bs), stat(cs)
        num, den = (b, c) if inverse else (c, b)
        return num / den if den > 0 else math.nan

    point = ratio(np.arange(len(base)), np.arange(len(cand)))
    boots = np.asarray(
        [
            ratio(rng.integers(0, len(base), len(base)), rng.integers(0, len(cand), len(cand)))
            for _ in range(BOOTSTRAP)
        ]
    )
    interval = _percentile_interval(boots)
    return (point if math.isfinite(point) else None), interval


# ---------------------------------------------------------------- P99 ITL per token
@dataclass(frozen=True)
class _Tail:
    """One side's per-token ITL values, by run and by block of consecutive requests."""

    blocks: list[list[tuple[FloatArray, FloatArray]]]  # [run][block] -> (values, weights)

    @classmethod
    def of(cls, runs: dict[int, list[RequestRecord]], pairs: list[int]) -> _Tail:
        out = []
        for r in pairs:
            recs = sorted((x for x in runs[r] if x.ok), key=lambda x: x.send_s)
            parts = [
                p for p in np.array_split(np.arange(len(recs)), min(BLOCKS, len(recs))) if p.size
            ]
            run = []
            for part in parts:
                vw = [recs[i].itl_per_token_s() for i in part]
                v = np.concatenate([x[0] for x in vw]) if vw else np.zeros(0)
                w = np.concatenate([x[1] for x in vw]) if vw else np.zeros(0)
                run.append((v, w))
            out.append(run)
        return cls(out)

    def p99(self, picks: list[tuple[int, IntArray]]) -> float:
        vs = [self.blocks[r][b][0] for r, bs in picks for b in bs]
        ws = [self.blocks[r][b][1] for r, bs in picks for b in bs]
        v = np.concatenate(vs) if vs else np.zeros(0)
        if v.size == 0:
            return math.nan
        w = np.concatenate(ws)
        order = np.argsort(v)
        cw = np.cumsum(w[order])
        return float(v[order][min(int(np.searchsorted(cw, 0.99 * cw[-1])), v.size - 1)])

    def everything(self) -> list[tuple[int, IntArray]]:
        return [(r, np.arange(len(run))) for r, run in enumerate(self.blocks)]

    def resample(self, rng: np.random.Generator) -> list[tuple[int, IntArray]]:
        n = len(self.blocks)
        runs = rng.integers(0, n, n) if n > 1 else np.zeros(1, dtype=np.int64)
        return [(int(r), rng.integers(0, len(self.blocks[r]), len(self.blocks[r]))) for r in runs]


def _p99_ratio(
    base: dict[int, list[RequestRecord]], cand: dict[int, list[RequestRecord]], pairs: list[int]
) -> tuple[float | None, Interval | None, str]:
    """Baseline ÷ candidate P99: per pair of runs with the t interval, or within one run."""
    tb, tc = _Tail.of(base, pairs), _Tail.of(cand, pairs)
    if len(pairs) > 1:
        b = [tb.p99([(i, np.arange(len(tb.blocks[i])))]) for i in range(len(pairs))]
        c = [tc.p99([(i, np.arange(len(tc.blocks[i])))]) for i in range(len(pairs))]
        return paired_ratio(b, c, inverse=True)
    point = tb.p99(tb.everything()) / tc.p99(tc.everything())
    rng = np.random.default_rng(0)
    boots = np.asarray(
        [tb.p99(tb.resample(rng)) / tc.p99(tc.resample(rng)) for _ in range(BOOTSTRAP)]
    )
    interval = _percentile_interval(boots)
    return (point if math.isfinite(point) else None), interval, ""


def _p99_ms(
    cand: dict[int, list[RequestRecord]], runs: list[int]
) -> tuple[float | None, Interval | None]:
    """The candidate's own P99 ITL per token (ms): per run with the t interval, or within one."""
    tail = _Tail.of(cand, runs)
    if len(runs) > 1:
        per = [tail.p99([(i, np.arange(len(tail.blocks[i])))]) * 1e3 for i in range(len(runs))]
        if not all(math.isfinite(x) and x > 0 for x in per):
            return None, None
        value, low, high = ratio_interval(per)
        return value, Interval(low=low, high=high)
    point = tail.p99(tail.everything()) * 1e3
    rng = np.random.default_rng(0)
    boots = np.asarray([tail.p99(tail.resample(rng)) * 1e3 for _ in range(BOOTSTRAP)])
    interval = _percentile_interval(boots)
    return (point if math.isfinite(point) else None), interval


# ---------------------------------------------------------------- the one entry point
class _Ratio(NamedTuple):
    """A speed figure of one side's records, and how two sides' values make a speedup."""

    stat: Callable[[list[RequestRecord]], float]
    inverse: bool  # a time: baseline ÷ candidate
    rate: bool  # per second of the run's span (kept fixed when requests are resampled)


def _ratio_of(metric: str, slo: SLO | None) -> _Ratio:
    if metric == "throughput_speedup":
        return _Ratio(_throughput, False, True)
    if metric == "tpot_speedup":
        return _Ratio(_tpot, True, False)
    if metric == "goodput_speedup" and slo is not None:
        return _Ratio(_goodput(slo), False, True)
    raise ValueError(f"unknown A/B metric {metric!r}")


def _error_rate(c_runs: Runs) -> ABValue:
    """The candidate's failed share of requests, with Wilson's interval."""
    recs = [r for rs in c_runs.values() for r in rs]
    failed = float(sum(not r.ok for r in recs))
    n = float(len(recs))
    return ABValue(
        failed / n if n else None,
        wilson(failed, n),
        n,
        len(c_runs),
        "failed ÷ requests (Wilson)",
        False,
    )


class _Sides(NamedTuple):
    """Both sides' runs by repeat, the repeats that completed a request on both, and the
    requests per side behind them (the smaller side)."""

    base: Runs
    cand: Runs
    pairs: list[int]
    n: float


def _sides(b_runs: Runs, c_runs: Runs) -> _Sides:
    pairs = sorted(set(b_runs) & set(c_runs))
    pairs = [r for r in pairs if any(x.ok for x in b_runs[r]) and any(x.ok for x in c_runs[r])]
    n = float(
        min((sum(len(b_runs[r]) for r in pairs), sum(len(c_runs[r]) for r in pairs)), default=0)
    )
    return _Sides(b_runs, c_runs, pairs, n)


def _tail(metric: str, s: _Sides) -> ABValue:
    """P99 ITL per token: the candidate's own (ms), or baseline ÷ candidate."""
    if metric == "itl_per_token_p99_ms":
        value, interval = _p99_ms(s.cand, sorted(s.cand))
        basis = (
            f"{len(s.cand)} runs (Student's t on the logs of their P99s)"
            if len(s.cand) > 1
            else "one run: blocks of requests resampled (within the run only)"
        )
        return ABValue(value, interval, s.n, len(s.cand), basis, len(s.cand) == 1)
    single = len(s.pairs) == 1
    value, interval, why = _p99_ratio(s.base, s.cand, s.pairs)
    basis = (
        f"{len(s.pairs)} alternated runs (Student's t on the log ratios of their P99s)"
        if not single
        else "one run: blocks of requests resampled (within the run only)"
    )
    return ABValue(value, interval, s.n, len(s.pairs), basis, single, why)


def _speedup(ratio: _Ratio, s: _Sides) -> ABValue:
    """One ratio per pair of runs with the t interval, or within the one run."""
    if len(s.pairs) == 1:
        r = s.pairs[0]
        value, interval = _within_run(ratio.stat, s.base[r], s.cand[r], ratio.inverse, ratio.rate)
        return ABValue(
            value, interval, s.n, 1, "one run: requests resampled (within the run only)", True
        )
    value, interval, why = paired_ratio(
        [ratio.stat(s.base[r]) for r in s.pairs],
        [ratio.stat(s.cand[r]) for r in s.pairs],
        inverse=ratio.inverse,
    )
    if value is None:
        return ABValue(None, None, s.n, len(s.pairs), "", False, why)
    basis = f"{len(s.pairs)} alternated runs (Student's t on the log ratios)"
    return ABValue(value, interval, s.n, len(s.pairs), basis, False)


def ab_value(
    metric: str, base: list[RequestRecord], cand: list[RequestRecord], slo: SLO | None = None
) -> ABValue:
    """Candidate vs baseline on ``metric`` (one of :data:`AB_METRICS`) from the two sides'
    records, with the interval the runs allow."""
    b_runs, c_runs = _runs(base), _runs(cand)
    if metric == "error_rate":
        return _error_rate(c_runs)
    s = _sides(b_runs, c_runs)
    if not s.pairs:
        return ABValue(None, None, 0.0, 0, "", True, "no run completed a request on both sides")
    if metric in ("itl_per_token_p99_ms", "itl_per_token_p99_speedup"):
        return _tail(metric, s)
    single = len(s.pairs) == 1
    if metric == "goodput_speedup" and slo is None:
        why = "the bench runs had no --slo: goodput needs one"
        return ABValue(None, None, s.n, len(s.pairs), "", single, why)
    ratio = _ratio_of(metric, slo)
    if metric == "goodput_speedup" and all(ratio.stat(b_runs[r]) == 0 for r in s.pairs):
        why = "no baseline request met the SLO: the ratio is unbounded"
        return ABValue(None, None, s.n, len(s.pairs), "", single, why)
    return _speedup(ratio, s)
