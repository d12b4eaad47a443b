"""The twin's periodic ``SpecDecoding metrics`` log line, in vLLM's format.

vLLM's ``SpecDecodingLogging.log`` (``vllm/v1/spec_decode/metrics.py``) writes, every
``VLLM_LOG_STATS_INTERVAL`` seconds and over that interval only, the mean acceptance length (two
decimals), accepted and drafted throughput, accepted and drafted token counts, the per-position
acceptance rates (three decimals, each ÷ the interval's drafts) and the draft acceptance rate (one
decimal, percent). The twin writes the same line from its own counters, so ``alphagate measure
logs`` reads a twin's log as it reads vLLM's.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from dataclasses import dataclass, field
from typing import TextIO

__all__ = ["IntervalStats", "format_line", "log_forever"]


@dataclass
class IntervalStats:
    """Spec-decode counts since the last log line."""

    drafts: int = 0
    draft_tokens: int = 0
    accepted: int = 0
    per_pos: list[int] = field(default_factory=list)
    since: float = field(default_factory=time.monotonic)

    def add(self, drafts: int, draft_tokens: int, accepted: int, per_pos: list[int]) -> None:
        self.drafts += drafts
        self.draft_tokens += draft_tokens
        self.accepted += accepted
        if len(self.per_pos) < len(per_pos):
            self.per_pos += [0] * (len(per_pos) - len(self.per_pos))
        for i, c in enumerate(per_pos):
            self.per_pos[i] += c


def format_line(s: IntervalStats, elapsed_s: float, now: float | None = None) -> str:
    """One log line for an interval with drafts (vLLM's wording and precision)."""
    stamp = time.strftime("%m-%d %H:%M:%S", time.localtime(now))
    rate = s.accepted / s.draft_tokens * 100 if s.draft_tokens else float("nan")
    per_pos = ", ".join(f"{c / s.drafts:.3f}" for c in s.per_pos)
    el = max(elapsed_s, 1e-9)
    return (
        f"(APIServer pid={os.getpid()}) INFO {stamp} [statslog.py] SpecDecoding metrics: "
        f"Mean acceptance length: {1 + s.accepted / s.drafts:.2f}, "
        f"Accepted throughput: {s.accepted / el:.2f} tokens/s, "
        f"Drafted throughput: {s.draft_tokens / el:.2f} tokens/s, "
        f"Accepted: {s.accepted} tokens, Drafted: {s.draft_tokens} tokens, "
        f"Per-position acceptance rate: {per_pos}, Avg Draft acceptance rate: {rate:.1f}%"
    )


async def log_forever(get: object, interval_s: float, out: TextIO | None = None) -> None:
    """Every ``interval_s``: take the interval's stats (``get()`` returns them and starts a new
    interval) and, if anything was drafted, write the line to ``out`` (stderr)."""
    assert callable(get)
    stream = out if out is not None else sys.stderr
    while True:
        await asyncio.sleep(interval_s)
        stats: IntervalStats = get()
        if stats.drafts:
            print(format_line(stats, time.monotonic() - stats.since), file=stream, flush=True)
