"""A run's fault limits — ``max_errors``, ``max_error_rate``, ``max_duration_s`` — and the one
stop reason: when a limit is reached no new request is sent, those in flight finish, and the
reason says why (the first one given is kept)."""

from __future__ import annotations

import time

from alphagate.bench.config import BenchConfig
from alphagate.bench.records import RequestRecord

__all__ = ["FaultLimits"]


class FaultLimits:
    """Counts failures against the limits of ``cfg`` from the run's start ``t0``
    (``time.perf_counter``); the error rate counts the current level's requests only."""

    def __init__(self, cfg: BenchConfig, t0: float) -> None:
        self.max_errors = cfg.max_errors
        self.max_error_rate = cfg.max_error_rate
        self.max_duration_s = cfg.max_duration_s
        self.min_requests_for_rate = cfg.MIN_REQUESTS_FOR_RATE
        #: when ``max_duration_s`` runs out (perf_counter; infinite without it)
        self.end = float("inf") if cfg.max_duration_s is None else t0 + cfg.max_duration_s
        self.reason: str | None = None
        self.errors = 0  # failed requests in the run
        self.level_requests = self.level_errors = 0

    def stop(self, reason: str) -> None:
        """Send no more requests; the first reason given is kept."""
        if self.reason is None:
            self.reason = reason

    def out_of_time(self) -> None:
        """Stop: ``max_duration_s`` is reached."""
        self.stop(f"max duration {self.max_duration_s:g} s reached")

    @property
    def stopping(self) -> bool:
        """A limit has been reached (the duration checked now)."""
        if (
            self.reason is None
            and self.max_duration_s is not None
            and time.perf_counter() > self.end
        ):
            self.out_of_time()
        return self.reason is not None

    def new_level(self) -> None:
        """The error rate counts from here."""
        self.level_requests = self.level_errors = 0

    def count(self, rec: RequestRecord) -> None:
        """A finished request; a failure may reach a limit."""
        self.level_requests += 1
        if rec.ok:
            return
        self.level_errors += 1
        self.errors += 1
        if self.max_errors is not None and self.errors >= self.max_errors:
            self.stop(f"{self.errors} failed requests (--max-errors {self.max_errors})")
        rate = self.max_error_rate
        if (
            rate is not None
            and self.level_requests >= self.min_requests_for_rate
            and self.level_errors / self.level_requests > rate
        ):
            self.stop(
                f"error rate {self.level_errors}/{self.level_requests} above --max-error-rate "
                f"{rate:g}"
            )
