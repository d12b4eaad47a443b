"""A run's records: numbered as they finish, kept, counted against the limits, handed on at once,
and a sink that cannot write stops the run, keeping every record."""

from __future__ import annotations

import errno

from alphagate.bench.config import BenchConfig, Level
from alphagate.bench.limits import FaultLimits
from alphagate.bench.records import RequestRecord
from alphagate.bench.sink import RecordSink
from tests.records import streamed


def _limits() -> FaultLimits:
    cfg = BenchConfig(
        targets=(("default", "http://127.0.0.1:9"),),
        levels=(Level(label="c1", concurrency=1),),
        num_prompts=4,
        max_errors=2,
    )
    return FaultLimits(cfg, t0=0.0)


def test_records_are_kept_counted_and_handed_on_in_order() -> None:
    written: list[RequestRecord] = []
    seen: list[int] = []
    sink = RecordSink(_limits(), written.append, lambda r: seen.append(r.id))
    assert [sink.new_id() for _ in range(3)] == [0, 1, 2]
    recs = [
        streamed([0.1], id=0, target="a", level="c1"),
        streamed([0.1], id=1, target="b", level="c1"),
        streamed([], id=2, target="a", level="c1", error_type="http_500"),
        streamed([0.2], id=3, target="a", level="c4"),
    ]
    for r in recs:
        sink.take(r)
    assert sink.records == written == recs and seen == [0, 1, 2, 3]
    assert [r.id for r in sink.of("a", "c1")] == [0, 2]
    assert sink.limits.errors == 1


def test_a_full_disk_stops_the_run_and_keeps_the_records() -> None:
    def full(rec: RequestRecord) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    sink = RecordSink(_limits(), full)
    sink.take(streamed([0.1]))
    sink.take(streamed([0.1], id=1))
    assert len(sink.records) == 2
    assert sink.limits.reason == "cannot write the records file: No space left on device"
