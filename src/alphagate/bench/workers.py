"""``alphagate bench --workers N``: one run's load sent from N worker processes.

Each worker has its own event loop and HTTP connections; the coordinator (the calling process) keeps
everything else — model discovery, ``/metrics`` before and after each level, the limits, the sweep,
the records file, the live display and the summaries — so a run with workers is the same run as
one without, sent from more processes.

The schedule is split exactly (:func:`split_level`): an open loop's arrivals (or a trace's) are
drawn once by the coordinator and dealt round-robin, each with its own send time; a closed loop's
concurrency is divided (the first ``C mod N`` workers get one user more) and its requests dealt in
proportion, interleaved so that every worker sends from the whole prompt mix. Finished records
stream back as JSON lines, are numbered in the order they arrive (as in one process: ids count
completions) and go through :meth:`BenchRunner.take`.

Stops: a limit reached in the coordinator drains every worker (no new request; those in flight
finish). Ctrl-C, SIGTERM or SIGHUP aborts: each worker cancels what is in flight, sends what
completed and exits; the coordinator keeps every record it receives. A worker that dies is
reported (with its exit status) and its completed records are kept; the level ends with the
others, and later levels are split over the workers still alive.
"""

from __future__ import annotations

import _thread
import asyncio
import contextlib
import multiprocessing as mp
import os
import signal
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

import numpy as np
import numpy.typing as npt

from alphagate.bench import aio
from alphagate.bench.config import BenchConfig, Level
from alphagate.bench.dataset import Prompt
from alphagate.bench.records import RequestRecord
from alphagate.bench.runner import BenchRunner

__all__ = ["Share", "WorkerPool", "split_level"]

#: how long before a level's start the coordinator sends it (so that every worker starts at once)
_LEAD_S = 0.05
#: how long an aborted worker has to send its records and exit before it is killed
_ABORT_S = 5.0


@dataclass(frozen=True)
class Share:
    """One worker's part of a level: request indices, with send times for an open loop.

    ``users``: a closed loop's users; an open loop's cap on requests in flight (0 = none).
    """

    indices: npt.NDArray[np.int64]  # [n_w]
    times: npt.NDArray[np.float64] | None  # [n_w] seconds after the level starts; None: closed
    users: int


def _divide(total: int, parts: int) -> list[int]:
    """``total`` split into ``parts`` whole numbers that differ by at most one, larger first."""
    return [total // parts + (1 if w < total % parts else 0) for w in range(parts)]


def split_level(
    level: Level,
    n_requests: int,
    timed: tuple[list[int], list[float]] | None,
    workers: int,
) -> list[Share]:
    """The shares of a level over ``workers`` processes (fewer when the concurrency is lower).

    Closed loop (``timed`` None): concurrency C is divided, and the ``n_requests`` requests dealt
    in proportion to each worker's users — by largest remainder, interleaved by each worker's
    virtual time so that each sends a cross-section of the prompts. Open loop: the arrivals of
    ``timed`` (indices, times) dealt round-robin; a concurrency cap is divided like C.
    """
    if timed is None:
        conc = level.concurrency or 1
        users = _divide(conc, min(workers, conc))
        exact = np.asarray(users, dtype=np.float64) * n_requests / conc
        counts = np.floor(exact).astype(np.int64)
        short = n_requests - int(counts.sum())
        counts[np.argsort(-(exact - counts), kind="stable")[:short]] += 1
        # worker w's k-th request sits at virtual time (k + 0.5) / users_w: a merge by that time
        vt = np.concatenate([(np.arange(c) + 0.5) / u for c, u in zip(counts, users, strict=True)])
        owner = np.repeat(np.arange(len(users)), counts)[np.argsort(vt, kind="stable")]
        idx = np.arange(n_requests, dtype=np.int64)
        return [Share(idx[owner == w], None, u) for w, u in enumerate(users)]
    indices, times = np.asarray(timed[0], dtype=np.int64), np.asarray(timed[1], dtype=np.float64)
    cap = level.concurrency
    n = workers if cap is None else min(workers, cap)
    caps = [0] * n if cap is None else _divide(cap, n)
    return [Share(indices[w::n], times[w::n], caps[w]) for w in range(n)]


# ------------------------------------------------------------------------- the coordinator side
@dataclass
class _Worker:
    number: int
    process: BaseProcess
    conn: Connection
    alive: bool = True
    received: int = 0  # records received in the current level
    share: int = 0  # requests in its share of the current level
    busy: bool = False  # its share of the current level is not done
    terminated: bool = False  # it received SIGTERM: it stops, and so does the run


@dataclass
class _Level:
    runner: BenchRunner
    target: str
    label: str
    done: asyncio.Future[None]
    stop_sent: bool = False
    pending: set[int] = field(default_factory=set)


def _context() -> Any:  # a ForkServerContext or SpawnContext (the former POSIX only)
    """forkserver where the platform has it (workers start from a clean, pre-imported process,
    not a fork of a process with threads), else spawn."""
    if "forkserver" in mp.get_all_start_methods():
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(["alphagate.bench.workers"])
        return ctx
    return mp.get_context("spawn")


def _watch(
    loop: asyncio.AbstractEventLoop, conn: Connection, callback: Callable[..., None], *args: Any
) -> None:
    """``loop.add_reader`` for a pipe that is also written with blocking ``send_bytes``.
    uvloop (libuv's ``uv_poll_init``) switches the descriptor to non-blocking, and a full pipe
    would then fail a send with EAGAIN instead of waiting for the reader: it is switched back
    (readiness polling does not need it non-blocking)."""
    loop.add_reader(conn.fileno(), callback, *args)
    os.set_blocking(conn.fileno(), True)


def _exit_status(code: int | None) -> str:
    if code is None:
        return "no exit status (still running; killed)"
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"signal {signal.Signals(-code).name}"
        return f"signal {-code}"
    return f"exit code {code}"


class WorkerPool:
    """N worker processes driven by one :class:`BenchRunner` (``BenchRunner(..., pool=...)``).

    :meth:`start` before the run, :meth:`run_level` per level (called by the runner), and
    :meth:`finish` after it — with ``abort=True`` after Ctrl-C or SIGTERM. ``failures`` says which
    workers died and what their shares lost.
    """

    def __init__(
        self, n: int, cfg: BenchConfig, prompts: list[Prompt], run_id: str, t0_wall: float
    ) -> None:
        if n < 1:
            raise ValueError("a pool needs at least one worker")
        self.n = n
        # limits are the coordinator's (a worker sees only its share); so are metrics and sweeps
        self._cfg = cfg.model_copy(
            update={"max_errors": None, "max_error_rate": None, "sweep": None, "levels": ()}
        )
        self._prompts = prompts
        self._run_id = run_id
        self._t0_wall = t0_wall
        self.workers: list[_Worker] = []
        self.failures: list[str] = []
        self._interrupting = False  # a worker's SIGTERM has interrupted the run
        self._level: _Level | None = None

    # ---------------------------------------------------------------- lifecycle
    def start(self) -> None:
        """Start the worker processes (each then waits for its first level)."""
        ctx = _context()
        for w in range(self.n):
            parent, child = ctx.Pipe(duplex=True)
            proc = ctx.Process(
                target=_worker_main,
                args=(child, self._cfg, self._prompts, self._run_id, self._t0_wall),
                name=f"alphagate-bench-worker-{w}",
                daemon=True,
            )
            proc.start()
            child.close()
            self.workers.append(_Worker(w, proc, parent))

    @property
    def alive(self) -> list[_Worker]:
        return [w for w in self.workers if w.alive]

    def finish(self, runner: BenchRunner | None, *, abort: bool) -> None:
        """End every worker: ``abort`` cancels requests in flight. Records still on their way are
        read (up to a few seconds) and handed to ``runner``; then the processes are joined, or
        killed when they do not exit."""
        deadline = time.monotonic() + _ABORT_S
        self._interrupting = True  # the run is over: a worker's SIGTERM interrupts nothing more
        for w in self.alive:
            with contextlib.suppress(OSError, ValueError):
                w.conn.send(("abort",) if abort else ("exit",))
        for w in self.alive:
            while w.alive and time.monotonic() < deadline:
                try:
                    if w.conn.poll(max(deadline - time.monotonic(), 0.0)):
                        self._message(w, w.conn.recv_bytes(), runner)
                except (EOFError, OSError):
                    w.alive = False
        for w in self.workers:
            w.process.join(max(deadline - time.monotonic(), 0.1))
            if w.process.is_alive():
                w.process.kill()
                w.process.join(1.0)
            with contextlib.suppress(OSError):
                w.conn.close()

    # ---------------------------------------------------------------- one level
    async def run_level(self, runner: BenchRunner, target: str, url: str, level: Level) -> None:
        """Send ``level`` to ``target`` from every live worker; returns when each has finished its
        share or died. Records go to ``runner.take`` as they arrive."""
        alive = self.alive
        if not alive:
            runner.stop("every bench worker has died")
            return
        timed = None
        if level.rate is not None or level.time_scale is not None:
            timed = runner.timed_work(level)
        shares = split_level(level, level.requests or len(runner.prompts), timed, len(alive))
        loop = asyncio.get_running_loop()
        state = _Level(runner, target, level.label, loop.create_future())
        self._level = state
        start_wall = time.time() + _LEAD_S
        for w, share in zip(alive, shares, strict=False):
            w.received, w.share, w.busy = 0, int(share.indices.size), True
            state.pending.add(w.number)
            _watch(loop, w.conn, self._readable, w)
            try:
                w.conn.send(("level", target, url, level, runner.model, share, start_wall))
            except (OSError, ValueError):
                self._died(w)
        try:
            if state.pending:
                await state.done
        finally:
            for w in self.workers:
                with contextlib.suppress(ValueError, OSError):
                    loop.remove_reader(w.conn.fileno())
            self._level = None

    def _readable(self, w: _Worker) -> None:
        state = self._level
        try:
            while w.alive and w.conn.poll():
                self._message(w, w.conn.recv_bytes(), None if state is None else state.runner)
        except (EOFError, OSError):
            self._died(w)
        if state is not None and state.runner.stopping and not state.stop_sent:
            state.stop_sent = True  # a limit: no new request anywhere, those in flight finish
            for other in self.alive:
                with contextlib.suppress(OSError, ValueError):
                    other.conn.send(("stop",))

    def _message(self, w: _Worker, msg: bytes, runner: BenchRunner | None) -> None:
        kind, body = msg[:1], msg[1:]
        if kind == b"R" and runner is not None:
            for line in body.split(b"\n"):
                rec = RequestRecord.model_validate_json(line)
                w.received += 1
                runner.take(rec.model_copy(update={"id": runner.new_id(), "repeat": runner.repeat}))
        elif kind == b"D":
            w.busy = False
            self._settle(w)
        elif kind == b"E":
            self.failures.append(f"worker {w.number} failed: {body.decode(errors='replace')}")
        elif kind == b"T":
            self._terminated(w, runner)

    def _terminated(self, w: _Worker, runner: BenchRunner | None) -> None:
        """SIGTERM reached a worker — most often the whole process group, from ``timeout``,
        a container runtime or a job scheduler, and this process gets it too: the run stops as
        on Ctrl-C (every record kept, the summary marked interrupted), and the worker's end is
        not reported as a death. Off the main thread, where no interrupt can be raised, the run
        stops as on a limit."""
        w.terminated = True
        if self._interrupting:
            return
        self._interrupting = True
        if threading.current_thread() is threading.main_thread():
            _thread.interrupt_main()  # Ctrl-C's path: asyncio cancels the run, then raises
        elif runner is not None:
            runner.stop(f"bench worker {w.number} received SIGTERM")

    def _settle(self, w: _Worker) -> None:
        state = self._level
        if state is not None:
            state.pending.discard(w.number)
            if not state.pending and not state.done.done():
                state.done.set_result(None)

    def _died(self, w: _Worker) -> None:
        if not w.alive:
            return
        w.alive = False
        with contextlib.suppress(ValueError, OSError):
            asyncio.get_running_loop().remove_reader(w.conn.fileno())
        if w.terminated:  # stopped on SIGTERM, its records sent: the run is being interrupted
            self._settle(w)
            return
        w.process.join(1.0)
        state = self._level
        where = "" if state is None else f" during {state.target} {state.label}"
        lost = ""
        if state is not None and w.busy:
            lost = (
                f"; {w.received} completed records of its {w.share} requests are kept, the "
                f"other {w.share - w.received} were not sent or did not finish"
            )
        self.failures.append(
            f"worker {w.number} (pid {w.process.pid}) died{where}: "
            f"{_exit_status(w.process.exitcode)}{lost}"
        )
        self._settle(w)


# ------------------------------------------------------------------------- the worker side
class _Outbox:
    """Finished records, sent to the coordinator once per turn of the event loop (one message
    for every record finished in that turn)."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self._lines: list[bytes] = []
        self._loop = asyncio.get_running_loop()

    def add(self, rec: RequestRecord) -> None:
        if not self._lines:
            self._loop.call_soon(self.flush)
        self._lines.append(rec.model_dump_json().encode())

    def flush(self) -> None:
        if self._lines:
            lines, self._lines = self._lines, []
            self.conn.send_bytes(b"R" + b"\n".join(lines))


def _worker_main(
    conn: Connection, cfg: BenchConfig, prompts: list[Prompt], run_id: str, t0_wall: float
) -> None:
    """A worker process: Ctrl-C is the coordinator's to handle (it reaches the whole process
    group); SIGTERM or the coordinator vanishing aborts, keeping what completed."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    terminated: list[bool] = []
    try:
        aio.run(_serve(conn, cfg, prompts, run_id, t0_wall, terminated))
    except BaseException:
        with contextlib.suppress(OSError, ValueError):
            conn.send_bytes(b"E" + traceback.format_exc(limit=8).encode())
        raise SystemExit(1) from None
    finally:
        conn.close()
    if terminated:  # records sent: now end as SIGTERM says, so the coordinator reports it so
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)


class _Inbox:
    """The coordinator's messages to a worker: levels queued in :attr:`queue`; ``stop`` and
    ``abort`` acted on at once, as is SIGTERM or SIGHUP (an abort, the coordinator told first).
    """

    def __init__(self, conn: Connection, terminated: list[bool]) -> None:
        self.conn = conn
        self.terminated = terminated
        self.queue: asyncio.Queue[tuple[Any, ...]] = asyncio.Queue()
        self.current: list[asyncio.Task[None]] = []  # the level being sent
        self.runner: BenchRunner | None = None

    def listen(self, loop: asyncio.AbstractEventLoop) -> None:
        _watch(loop, self.conn, self.readable)
        loop.add_signal_handler(signal.SIGTERM, self.sigterm)
        # a closed terminal hangs up the whole process group: as SIGTERM (unless nohup ignores it)
        if signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN:
            loop.add_signal_handler(signal.SIGHUP, self.sigterm)

    def abort(self) -> None:
        self.queue.put_nowait(("abort",))
        for task in self.current:
            task.cancel()

    def readable(self) -> None:
        try:
            while self.conn.poll():
                msg = self.conn.recv()
                if msg[0] == "stop" and self.runner is not None:
                    self.runner.stop("stopped by the coordinator")
                elif msg[0] == "abort":
                    self.abort()
                else:
                    self.queue.put_nowait(msg)
        except (EOFError, OSError):
            self.abort()  # the coordinator is gone: send nothing more

    def sigterm(self) -> None:
        self.terminated.append(True)
        with contextlib.suppress(OSError, ValueError):
            self.conn.send_bytes(b"T")  # before the records still in flight, and before EOF
        self.abort()


async def _serve(
    conn: Connection,
    cfg: BenchConfig,
    prompts: list[Prompt],
    run_id: str,
    t0_wall: float,
    terminated: list[bool],
) -> None:
    loop = asyncio.get_running_loop()
    inbox = _Inbox(conn, terminated)
    inbox.listen(loop)
    outbox = _Outbox(conn)
    t0 = time.perf_counter() - (time.time() - t0_wall)  # the coordinator's run start, here
    runner = inbox.runner = BenchRunner(cfg, prompts, sink=outbox.add, run_id=run_id, t0=t0)
    while True:
        msg = await inbox.queue.get()
        if msg[0] != "level":
            break
        _, target, url, level, model, share, start_wall = msg
        runner.model = model
        task = loop.create_task(_run_share(runner, target, url, level, share, start_wall))
        inbox.current.append(task)
        with contextlib.suppress(asyncio.CancelledError):
            await task
        inbox.current.clear()
        outbox.flush()
        if task.cancelled():
            break
        conn.send_bytes(b"D")
    await runner.aclose()
    outbox.flush()


async def _run_share(
    runner: BenchRunner, target: str, url: str, level: Level, share: Share, start_wall: float
) -> None:
    start = time.perf_counter() + (start_wall - time.time())
    indices = share.indices.tolist()
    if share.times is None:
        delay = start - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        await runner.closed_loop(target, url, level, indices, share.users, start)
    else:
        times = share.times.tolist()
        await runner.open_loop(target, url, level, indices, times, share.users or None, start)
