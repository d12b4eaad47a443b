"""Is a run a measurement of the server, or of a client (or twin) that fell behind?

A wall-clock A/B measures the server only while the client reads each chunk as it arrives and the
server keeps to its own clock. On a loaded machine neither holds: the client's event loop wakes
late, reads several chunks in one go and stamps them with one time (gaps near zero, then one long
gap), and a twin whose loop falls behind its modelled clock streams its steps late. Each run
measures what would distort it:

- **client loop lag**: a timer every :data:`TICK_S` on the loop that reads the replies; its lateness
  is the time a chunk can wait before it is read;
- **bunched reads**: the share of chunk gaps shorter than a tenth of the run's median gap — chunks
  of one stream are at least one engine step apart when sent, so gaps near zero were read late,
  together;
- **send lag** (open loop and traces): how far sends fell behind their schedule;
- **server lag** (the twin, from its ``alphagate:twin_*`` counters on ``/metrics``): how far its
  steps ended after their modelled time, and how often it fell so far behind that it gave the time
  up (a resynchronisation).

A run is ``distorted`` when any of these exceeds its bound, stated in :data:`BOUNDS` as a fraction
of the median gap the run measures; the figures are kept either way.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
from pydantic import Field

from alphagate.core.records import Frozen
from alphagate.measure.prom import SpecCounters
from alphagate.sim.results import Distribution

if TYPE_CHECKING:
    from alphagate.bench.request_record import RequestRecord

__all__ = ["BOUNDS", "TICK_S", "LoopLag", "RunValidity", "ServerLag", "run_validity", "twin_lag"]

#: the lag monitor's period
TICK_S = 0.005
#: a chunk gap below this fraction of the run's median gap was read late, with the one before it
BUNCHED_GAP = 0.1
#: the bounds beyond which a run is distorted (fractions of the median chunk gap, or shares)
BOUNDS = {
    "bunched_share": 0.05,  # share of chunk gaps that are bunched reads
    "client_lag_p99": 2.0,  # client loop lag P99 ÷ median chunk gap: two steps late
    "send_lag_p99": 2.0,  # open-loop send lag P99 ÷ median chunk gap
    "server_lag_mean": 0.5,  # twin: mean step lateness ÷ median chunk gap
}


class RunValidity(Frozen):
    """What distorted one run, and whether it did beyond :data:`BOUNDS`."""

    median_gap_ms: float | None = Field(description="the run's median chunk gap: the yardstick")
    bunched_share: float | None = Field(
        description=f"chunk gaps under {BUNCHED_GAP:g} × the median gap (reads taken late)"
    )
    client_lag_ms: Distribution | None = Field(
        description="the client event loop's lateness (None: sent from worker processes)"
    )
    send_lag_ms: Distribution | None = Field(description="open loop: send − schedule")
    server_lag_ms: float | None = Field(
        default=None, description="the twin's mean step lateness behind its modelled clock"
    )
    server_resyncs: int | None = Field(
        default=None, description="times the twin fell so far behind that it gave the time up"
    )
    distorted: bool
    reasons: list[str] = Field(default_factory=list)


@dataclass
class LoopLag:
    """Samples the running loop's lateness every :data:`TICK_S` until :meth:`stop`."""

    samples: list[float] = field(default_factory=list)
    task: asyncio.Task[None] | None = None

    @classmethod
    def start(cls) -> LoopLag:
        lag = cls()
        lag.task = asyncio.get_running_loop().create_task(lag._tick())
        return lag

    async def _tick(self) -> None:
        while True:
            t = time.perf_counter()
            await asyncio.sleep(TICK_S)
            self.samples.append(max(0.0, time.perf_counter() - t - TICK_S))

    def stop(self) -> list[float]:
        """The lateness samples in ms (the monitor is cancelled)."""
        if self.task is not None:
            self.task.cancel()
            self.task = None
        return [x * 1e3 for x in self.samples]


@dataclass(frozen=True)
class ServerLag:
    """The twin's lag counters over one level (``alphagate:twin_*`` deltas)."""

    steps: float
    lag_s: float
    resyncs: float


def twin_lag(before: list[SpecCounters], after: list[SpecCounters]) -> ServerLag | None:
    """The increase of the twins' lag counters between two scrapes; None for another server."""
    pairs = list(zip(before, after, strict=True))
    if not pairs or any(b.twin_steps is None or a.twin_steps is None for b, a in pairs):
        return None
    steps = lag = resyncs = 0.0
    for b, a in pairs:
        b_steps, a_steps = b.twin_steps or 0.0, a.twin_steps or 0.0
        if a_steps < b_steps:  # restarted: count from zero
            b, b_steps = SpecCounters(twin_steps=0.0, twin_lag_s=0.0, twin_resyncs=0.0), 0.0
        steps += a_steps - b_steps
        lag += (a.twin_lag_s or 0.0) - (b.twin_lag_s or 0.0)
        resyncs += (a.twin_resyncs or 0.0) - (b.twin_resyncs or 0.0)
    return ServerLag(steps, lag, resyncs)


def _gaps_ms(records: list[RequestRecord]) -> npt.NDArray[np.float64]:
    gaps = [r.chunk_gaps_s() for r in records if r.ok and not r.warmup]
    return np.concatenate(gaps) * 1e3 if gaps else np.zeros(0)


def run_validity(
    records: list[RequestRecord],
    client_lag_ms: list[float] | None,
    server: ServerLag | None,
    *,
    workers: bool = False,
) -> RunValidity:
    """The distortion figures of one run (its records, the loop-lag samples, the twin's
    counters), and whether any exceeds its bound."""
    gaps = _gaps_ms(records)
    median = float(np.median(gaps)) if gaps.size else None
    # a median of 0: most chunks arrived in the same read as the one before them
    bunched: float | None = None
    if gaps.size:
        bunched = float((gaps < BUNCHED_GAP * median).mean() if median else (gaps <= 0).mean())
    lag = Distribution.of(np.asarray(client_lag_ms) / 1e3) if client_lag_ms else None
    sends = [r.send_s - r.scheduled_s for r in records if r.scheduled_s is not None]
    send = Distribution.of(sends) if sends else None
    server_ms = 1e3 * server.lag_s / server.steps if server and server.steps > 0 else None
    reasons = []
    if median == 0.0:
        reasons.append(
            f"{bunched:.0%} of chunk gaps are 0 ms: the client read most chunks late, together "
            "with the one before them"
        )
    if median:
        if bunched is not None and bunched > BOUNDS["bunched_share"]:
            reasons.append(
                f"{bunched:.0%} of chunk gaps are under {BUNCHED_GAP:g} × the median gap "
                f"({median:.2f} ms): the client read them late, together"
            )
        if lag is not None and lag.p99 is not None and lag.p99 > BOUNDS["client_lag_p99"] * median:
            reasons.append(
                f"the client's event loop ran {lag.p99:.2f} ms late (P99), "
                f"{lag.p99 / median:.0%} of the median gap {median:.2f} ms"
            )
        if send is not None and send.p99 is not None and send.p99 > BOUNDS["send_lag_p99"] * median:
            reasons.append(f"sends fell {send.p99:.2f} ms behind their schedule (P99)")
        if server_ms is not None and server_ms > BOUNDS["server_lag_mean"] * median:
            reasons.append(
                f"the server's steps ended {server_ms:.2f} ms after their modelled time on "
                f"average, {server_ms / median:.0%} of the median gap"
            )
    if server is not None and server.resyncs > 0:
        reasons.append(
            f"the server fell behind its clock and gave the time up {server.resyncs:.0f}×"
        )
    return RunValidity(
        median_gap_ms=median,
        bunched_share=bunched,
        client_lag_ms=None if workers else lag,
        send_lag_ms=send,
        server_lag_ms=server_ms,
        server_resyncs=None if server is None else int(server.resyncs),
        distorted=bool(reasons),
        reasons=reasons,
    )
