"""One ``alphagate bench`` run from start to :class:`~alphagate.bench.records.BenchResult`.

:func:`run_bench` owns the event loop, runs every level (or the knee search
of a sweep) through :class:`~alphagate.bench.runner.BenchRunner`, and turns Ctrl-C (``KeyboardInterrupt``) into a
result marked ``interrupted`` whose levels include the unfinished one, summarised from every record
that completed. It writes nothing itself: each finished record goes to ``sink`` (the CLI appends it
to ``requests.jsonl``) and to ``on_record`` (the live display).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from alphagate.bench import aio
from alphagate.bench.config import BenchConfig
from alphagate.bench.dataset import Prompt
from alphagate.bench.records import BenchResult, RequestRecord, compare_levels
from alphagate.bench.runner import BenchRunner
from alphagate.net.transport import Transport

if TYPE_CHECKING:
    from alphagate.bench.workers import WorkerPool

__all__ = ["redacted_config", "run_bench"]


def redacted_config(cfg: BenchConfig) -> dict[str, Any]:
    """The configuration as recorded in results: no key, no header value, no URL password."""
    from alphagate.bench.secrets import redact_headers, redact_url

    data = cfg.model_dump(mode="json")
    data["targets"] = [[name, redact_url(url)] for name, url in cfg.targets]
    data["headers"] = redact_headers(cfg.headers)
    if cfg.metrics_urls:
        data["metrics_urls"] = [redact_url(u) for u in cfg.metrics_urls]
    data["api_key"] = None if cfg.api_key is None else "<redacted>"
    return data


def run_bench(
    cfg: BenchConfig,
    prompts: list[Prompt],
    *,
    run_id: str,
    sink: Callable[[RequestRecord], None] | None = None,
    on_record: Callable[[RequestRecord], None] | None = None,
    dataset_problems: list[str] | None = None,
    workers: int = 1,
    metrics_problems: list[str] | None = None,
    transport: Transport | None = None,
) -> BenchResult:
    """Run every level against every target; Ctrl-C keeps every completed record.

    ``workers`` > 1 sends the load from that many processes (:mod:`alphagate.bench.workers`);
    this process coordinates them, and its ``sink`` and ``on_record`` see every record.
    ``metrics_problems`` gets one line per level whose ``/metrics`` counters no decoder could
    produce (accepted above drafted, …): that level's acceptance is left out of the result.
    ``transport``: what this process's requests go through (None: the llhttp client; a test
    passes a ``MockTransport``); workers send through clients of their own.
    """
    t0, t0_wall = time.perf_counter(), time.time()
    pool = None
    if workers > 1:
        from alphagate.bench.workers import WorkerPool

        pool = WorkerPool(workers, cfg, prompts, run_id, t0_wall)

    def runner_now() -> BenchRunner:
        return BenchRunner(
            cfg, prompts, sink=sink, on_record=on_record, run_id=run_id, pool=pool, t0=t0,
            transport=transport,
        )  # fmt: skip

    runner, interrupted = _drive(runner_now, pool)
    levels = [] if runner is None else list(runner.levels)
    if interrupted and runner is not None:
        levels += runner.unfinished_levels()
    if runner is not None and metrics_problems is not None:
        metrics_problems.extend(runner.metrics_problems)
    stop = runner.stop_reason if runner is not None else None
    knees = runner.knees if runner is not None else None
    return BenchResult(
        run_id=run_id,
        started_at=t0_wall,
        ended_at=time.time(),
        config=redacted_config(cfg),
        served_model=runner.model if runner is not None else cfg.model,
        served_model_root=runner.model_root if runner is not None else None,
        levels=levels,
        comparisons=compare_levels(levels),
        dataset_problems=dataset_problems or [],
        interrupted=interrupted,
        stop_reason="interrupted" if interrupted else stop,
        slo=cfg.slo,
        sweep=None if knees is None else knees.summary(),
        worker_failures=[] if pool is None else pool.failures,
    )


def _drive(
    runner_now: Callable[[], BenchRunner], pool: WorkerPool | None
) -> tuple[BenchRunner | None, bool]:
    """Run a runner made inside the event loop, with the pool's workers around it; returns it
    (None when Ctrl-C came before it was made) and whether Ctrl-C interrupted the run."""
    state: dict[str, BenchRunner] = {}

    async def main() -> None:
        state["runner"] = runner_now()
        await state["runner"].run()

    interrupted = False
    try:
        if pool is not None:
            pool.start()
        aio.run(main())
    except KeyboardInterrupt:
        interrupted = True
    finally:
        if pool is not None:  # every worker ends; records still on their way are kept
            pool.finish(state.get("runner"), abort=interrupted)
    return state.get("runner"), interrupted
