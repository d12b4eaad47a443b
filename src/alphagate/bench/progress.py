"""The live view of a running bench, updated in O(1) per record.

Running counters for completed, failed and output tokens, and the P99 ITL per token over the
most recent token gaps (a fixed-size ring), so that a refresh costs the same at request 100 and
at request 100,000 — the display must not slow the client it watches.
"""

from __future__ import annotations

import numpy as np

from alphagate.bench.records import RequestRecord

__all__ = ["LiveStats"]


class LiveStats:
    """Counters of the current level, fed one record at a time."""

    def __init__(self, total: int, window: int = 8192) -> None:
        self.total = total
        self._ring = np.zeros(window)
        self._ring_n = 0
        self.reset("", "")

    def reset(self, target: str, level: str) -> None:
        self.target, self.level = target, level
        self.done = self.failed = self.tokens = 0
        self._first_send: float | None = None
        self._last_end = 0.0
        self._ring_n = 0

    def add(self, rec: RequestRecord) -> None:
        if rec.target != self.target or rec.level != self.level:
            self.reset(rec.target, rec.level)
        if not rec.ok:
            self.failed += 1
            return
        self.done += 1
        self.tokens += rec.output_tokens or 0
        if self._first_send is None or rec.send_s < self._first_send:
            self._first_send = rec.send_s
        self._last_end = max(self._last_end, rec.send_s + (rec.e2e_s or 0.0))
        times, toks = rec.chunk_times_s, rec.chunk_tokens
        size = self._ring.size
        for i in range(1, len(times)):
            self._ring[self._ring_n % size] = (times[i] - times[i - 1]) / max(toks[i], 1)
            self._ring_n += 1

    @property
    def tokens_per_s(self) -> float:
        if self._first_send is None:
            return 0.0
        return self.tokens / max(self._last_end - self._first_send, 1e-9)

    @property
    def p99_itl_per_token_ms(self) -> float | None:
        n = min(self._ring_n, self._ring.size)
        return float(np.percentile(self._ring[:n], 99)) * 1e3 if n else None
