"""``--workers``: the schedule split exactly, and a worker killed mid-run (its records kept)."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from alphagate.bench.config import BenchConfig, Level
from alphagate.bench.dataset import load_prompts
from alphagate.bench.records import RequestRecord
from alphagate.bench.run import run_bench
from alphagate.bench.workers import split_level
from alphagate.specs import DeploymentConfig
from alphagate.twin.config import TwinConfig
from tests.servers import twin


@pytest.mark.parametrize(
    ("conc", "n", "workers"), [(7, 100, 3), (2, 9, 4), (64, 1000, 8), (5, 3, 2)]
)
def test_closed_loop_split_divides_users_and_requests(conc: int, n: int, workers: int) -> None:
    shares = split_level(Level(label="c", concurrency=conc), n, None, workers)
    assert len(shares) == min(conc, workers)
    users = [s.users for s in shares]
    assert sum(users) == conc and max(users) - min(users) <= 1
    got = np.sort(np.concatenate([s.indices for s in shares]))
    np.testing.assert_array_equal(got, np.arange(n))  # every request exactly once
    for s in shares:  # requests in proportion to users, to within one
        assert abs(s.indices.size - n * s.users / conc) < 1
        assert s.times is None


def test_closed_loop_split_interleaves_the_prompts() -> None:
    a, b = split_level(Level(label="c", concurrency=4), 40, None, 2)
    assert a.indices.tolist() == list(range(0, 40, 2)) and b.indices.tolist() == list(
        range(1, 40, 2)
    )


@pytest.mark.parametrize(("cap", "workers"), [(None, 3), (5, 2), (2, 4)])
def test_open_loop_split_deals_the_arrivals_once(cap: int | None, workers: int) -> None:
    times = sorted(np.random.default_rng(0).uniform(0, 10, 50).tolist())
    shares = split_level(
        Level(label="r", rate=5.0, concurrency=cap), 50, (list(range(50)), times), workers
    )
    assert len(shares) == (workers if cap is None else min(cap, workers))
    idx = np.concatenate([s.indices for s in shares])
    np.testing.assert_array_equal(np.sort(idx), np.arange(50))
    for s in shares:
        assert s.times is not None
        np.testing.assert_array_equal(s.times, np.asarray(times)[s.indices])  # its own send times
    assert sum(s.users for s in shares) == (0 if cap is None else cap)


SLOW = TwinConfig(
    deployment=DeploymentConfig(model="llama-3.3-70b", weight_dtype="fp8"), k=2, time_scale=1.0
)


def _worker_pids() -> list[int]:
    """This process's bench workers: the children of its multiprocessing forkserver."""
    me = os.getpid()
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    servers = [p for p, pp in parents.items() if pp == me]
    return sorted(p for p, pp in parents.items() if pp in servers)


def _signal_a_worker(sig: signal.Signals) -> tuple[Any, list[RequestRecord], int]:
    """40 requests at concurrency 4 from 2 workers on a slow twin; ``sig`` goes to the first
    worker once 3 records are in. (result, every record handed to the sink, the worker's pid)."""
    prompts, _ = load_prompts("synthetic:in=8,out=24", 40, 0)
    got: list[RequestRecord] = []
    victims: list[int] = []

    def sink(rec: RequestRecord) -> None:
        got.append(rec)
        if len(got) == 3:
            victims.append(_worker_pids()[0])
            os.kill(victims[0], sig)

    with twin(SLOW) as (url, _):
        cfg = BenchConfig(
            targets=(("default", url),),
            levels=(Level(label="c4", concurrency=4),),
            num_prompts=40,
            scrape_metrics=False,
        )
        result = run_bench(cfg, prompts, run_id=sig.name, sink=sink, workers=2)
    assert victims
    return result, got, victims[0]


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="finds the workers in /proc")
def test_a_killed_worker_is_reported_and_its_records_kept() -> None:
    result, got, killed = _signal_a_worker(signal.SIGKILL)
    assert len(result.worker_failures) == 1, result.worker_failures
    why = result.worker_failures[0]
    assert f"pid {killed}" in why and "SIGKILL" in why and "c4" in why
    level = result.levels[0]
    assert level.overall.completed + level.overall.failed == len(got)  # every record summarised
    assert 3 <= len(got) < 40  # the other worker finished its share; the killed one's rest is lost
    assert len({r.id for r in got}) == len(got) and all(r.ok for r in got)
    assert result.failure(0.05) is not None  # the run says the load was not sent as asked


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="finds the workers in /proc")
def test_sigterm_to_one_worker_interrupts_the_run_and_keeps_every_record() -> None:
    """SIGTERM is a request to stop, not a death: the run ends as on Ctrl-C (interrupted,
    nothing reported as a failure), with every completed record summarised."""
    result, got, _ = _signal_a_worker(signal.SIGTERM)
    assert result.interrupted and result.stop_reason == "interrupted"
    assert result.worker_failures == []
    assert 3 <= len(got) < 40 and all(r.ok for r in got)
    assert result.levels[0].overall.completed == len(got)


def test_a_watched_pipe_stays_blocking_for_its_sends() -> None:
    """The worker pipe is read by the loop and written with blocking sends; uvloop's add_reader
    makes it non-blocking, and a record message larger than the pipe's buffer then failed with
    EAGAIN (every worker lost at 1,000 streams). A 1 MB message must get through whole."""
    import multiprocessing as mp
    import threading

    from alphagate.bench import aio
    from alphagate.bench.workers import _watch

    a, b = mp.Pipe()
    big = b"R" + b"x" * (1 << 20)
    got: list[bytes] = []

    async def go() -> bool:
        loop = asyncio.get_running_loop()
        _watch(loop, a, lambda: None)
        reader = threading.Thread(target=lambda: (time.sleep(0.2), got.append(b.recv_bytes())))
        reader.start()
        a.send_bytes(big)  # blocks until the reader has taken it all
        await asyncio.to_thread(reader.join)
        loop.remove_reader(a.fileno())
        return os.get_blocking(a.fileno())

    assert aio.run(go()) is True
    assert got == [big]
    a.close()
    b.close()
