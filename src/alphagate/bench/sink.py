"""Where a run's finished requests go: numbered, kept, counted against the fault limits, and
handed on at once — to ``sink`` (the CLI appends each to ``requests.jsonl``, so an interrupted run
loses nothing that completed) and to ``on_record`` (the live view)."""

from __future__ import annotations

import itertools
from collections.abc import Callable

from alphagate.bench.limits import FaultLimits
from alphagate.bench.records import RequestRecord

__all__ = ["RecordSink"]


class RecordSink:
    """Every record of one run, in the order they finished; a sink that cannot write (a full
    disk) stops the run cleanly, keeping what was written."""

    def __init__(
        self,
        limits: FaultLimits,
        sink: Callable[[RequestRecord], None] | None = None,
        on_record: Callable[[RequestRecord], None] | None = None,
    ) -> None:
        self.limits = limits
        self.sink = sink
        self.on_record = on_record
        self.records: list[RequestRecord] = []
        self._ids = itertools.count()

    def new_id(self) -> int:
        """The next request number of the run (records are numbered as they finish)."""
        return next(self._ids)

    def take(self, rec: RequestRecord) -> None:
        """A finished request, from this process or a worker."""
        self.records.append(rec)
        self.limits.count(rec)
        if self.sink is not None:
            try:
                self.sink(rec)
            except OSError as exc:  # a full disk: keep what was written, stop cleanly
                self.limits.stop(f"cannot write the records file: {exc.strerror or exc}")
        if self.on_record is not None:
            self.on_record(rec)

    def of(self, target: str, label: str) -> list[RequestRecord]:
        """The records of one target at one level."""
        return [r for r in self.records if r.target == target and r.level == label]
