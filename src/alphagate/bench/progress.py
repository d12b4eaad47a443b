"""The live view of a running bench: O(1) per record, O(new records) per refresh.

A record only bumps running counters and is queued (:meth:`LiveStats.add`); the display reads a
:meth:`LiveStats.snapshot` a few times a second, which folds the queued records' ITL-per-token
values into a log-binned histogram (bins 1% wide, so the P99 it reports is within 1% of the exact
weighted P99 over every token of the level). Neither call looks at a record twice, so a refresh
costs the same at request 100 and at request 100,000 — the display must not slow the client it
watches. The display runs in its own thread: both calls take a lock.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from alphagate.bench.records import RequestRecord

__all__ = ["LiveSnapshot", "LiveStats", "LogHistogram"]


class LogHistogram:
    """A weighted streaming quantile sketch: log-spaced bins of relative width ``rel``.

    Values below ``lo`` fall in the first bin and above ``hi`` in the last; a quantile is the
    geometric centre of the bin where the cumulative weight crosses it (relative error ≤ rel/2).
    """

    def __init__(self, lo: float = 1e-6, hi: float = 1e4, rel: float = 0.01) -> None:
        self.lo = lo
        self._log_step = math.log1p(rel)
        self._n_bins = math.ceil(math.log(hi / lo) / self._log_step) + 1
        self.counts: npt.NDArray[np.float64] = np.zeros(self._n_bins)  # [n_bins]

    def add(self, values: npt.NDArray[np.float64], weights: npt.NDArray[np.float64]) -> None:
        """Add ``values`` (shape ``[n]``) with their ``weights`` (shape ``[n]``)."""
        if values.size == 0:
            return
        idx = np.floor(np.log(np.maximum(values, self.lo) / self.lo) / self._log_step)
        idx = np.clip(idx, 0, self._n_bins - 1).astype(np.int64)
        self.counts += np.bincount(idx, weights=weights, minlength=self._n_bins)

    def quantile(self, q: float) -> float | None:
        """The ``q``-quantile (0..1) of everything added, or None when empty."""
        cum = np.cumsum(self.counts)
        if cum[-1] <= 0:
            return None
        i = int(np.searchsorted(cum, q * cum[-1], side="left"))
        return self.lo * math.exp((i + 0.5) * self._log_step)


@dataclass(frozen=True)
class LiveSnapshot:
    """What the live line shows, read at one instant."""

    target: str
    level: str
    done: int
    failed: int
    tokens_per_s: float
    p99_itl_per_token_ms: float | None


class LiveStats:
    """Counters of the current level, fed one record at a time (from any thread)."""

    def __init__(self, total: int) -> None:
        self.total = total
        self._lock = threading.Lock()
        self._reset("", "")

    def _reset(self, target: str, level: str) -> None:
        self.target, self.level = target, level
        self.done = self.failed = self.tokens = 0
        self._first_send: float | None = None
        self._last_end = 0.0
        self._pending: list[RequestRecord] = []
        self._itl = LogHistogram()

    def add(self, rec: RequestRecord) -> None:
        """O(1): counters and a queue; the record's chunk gaps are binned at the next snapshot."""
        with self._lock:
            if rec.target != self.target or rec.level != self.level:
                self._reset(rec.target, rec.level)
            if not rec.ok:
                self.failed += 1
                return
            self.done += 1
            self.tokens += rec.output_tokens or 0
            if self._first_send is None or rec.send_s < self._first_send:
                self._first_send = rec.send_s
            self._last_end = max(self._last_end, rec.send_s + (rec.e2e_s or 0.0))
            if (
                len(rec.chunk_times_s) > 1
                and len(rec.chunk_tokens) >= len(rec.chunk_times_s)
                and not rec.warmup
            ):
                self._pending.append(rec)

    def snapshot(self) -> LiveSnapshot:
        """The current figures; bins the records added since the last snapshot."""
        with self._lock:
            pending, self._pending = self._pending, []
            if pending:
                n = [len(r.chunk_times_s) for r in pending]
                times = np.fromiter(
                    (t for r in pending for t in r.chunk_times_s), np.float64, sum(n)
                )
                toks = np.fromiter(
                    (k for r, m in zip(pending, n, strict=True) for k in r.chunk_tokens[:m]),
                    np.float64,
                    sum(n),
                )
                first = np.cumsum(n) - np.asarray(n)  # the first chunk of each record has no gap
                gaps = np.diff(times)
                keep = np.ones(gaps.size, dtype=bool)
                keep[first[1:] - 1] = (
                    False  # the "gap" from one record's last chunk to the next's first
                )
                w = np.maximum(toks[1:][keep], 1.0)
                self._itl.add(gaps[keep] / w, w)  # ITL per token, one sample per token
            p99 = self._itl.quantile(0.99)
            span = self._last_end - (self._first_send or 0.0)
            return LiveSnapshot(
                target=self.target,
                level=self.level,
                done=self.done,
                failed=self.failed,
                tokens_per_s=0.0 if self._first_send is None else self.tokens / max(span, 1e-9),
                p99_itl_per_token_ms=None if p99 is None else p99 * 1e3,
            )
