"""A run's fault limits: failures counted against --max-errors, the error rate per level from its
minimum count, --max-duration, and the first stop reason kept."""

from __future__ import annotations

import time
from typing import Any

from alphagate.bench.config import BenchConfig, Level
from alphagate.bench.limits import FaultLimits
from tests.records import streamed

OK = streamed([0.1], target="t", level="l")
BAD = OK.model_copy(update={"error_type": "http_500", "error_message": "x"})


def _config(**kw: Any) -> BenchConfig:
    return BenchConfig(
        targets=(("default", "http://127.0.0.1:9"),),
        levels=(Level(label="c2", concurrency=2),),
        num_prompts=6,
        **kw,
    )


def test_no_limit_never_stops() -> None:
    limits = FaultLimits(_config(), t0=0.0)
    for rec in [BAD] * 50:
        limits.count(rec)
    assert not limits.stopping and limits.reason is None and limits.errors == 50


def test_max_errors_counts_failures_over_the_whole_run() -> None:
    limits = FaultLimits(_config(max_errors=3), t0=0.0)
    for rec in (OK, BAD, OK, BAD):
        limits.count(rec)
    limits.new_level()  # the count of errors is the run's, not the level's
    assert limits.reason is None
    limits.count(BAD)
    assert limits.stopping and limits.reason == "3 failed requests (--max-errors 3)"


def test_the_error_rate_counts_the_level_from_its_minimum_requests() -> None:
    cfg = _config(max_error_rate=0.5)
    limits = FaultLimits(cfg, t0=0.0)
    for rec in [BAD] * (cfg.MIN_REQUESTS_FOR_RATE - 1):
        limits.count(rec)
    assert limits.reason is None  # every request failed, but too few to judge a rate
    limits.new_level()
    for rec in [OK, BAD] * (cfg.MIN_REQUESTS_FOR_RATE // 2) + [BAD]:
        limits.count(rec)
    assert limits.reason == (
        f"error rate {cfg.MIN_REQUESTS_FOR_RATE // 2 + 1}/{cfg.MIN_REQUESTS_FOR_RATE + 1} above "
        "--max-error-rate 0.5"
    )


def test_the_duration_runs_from_the_start_given() -> None:
    spent = FaultLimits(_config(max_duration_s=1.0), t0=time.perf_counter() - 2.0)
    assert spent.stopping and spent.reason == "max duration 1 s reached"
    # an hour ahead: the check cannot be reached by a slow machine
    fresh = FaultLimits(_config(max_duration_s=3600.0), t0=time.perf_counter())
    assert not fresh.stopping and fresh.end < float("inf")


def test_the_first_reason_is_kept() -> None:
    limits = FaultLimits(_config(max_errors=1), t0=0.0)
    limits.stop("interrupted")
    limits.count(BAD)
    assert limits.reason == "interrupted"
