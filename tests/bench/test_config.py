"""The rules of a bench run, in the layer that owns them (the CLI and the Python API share them):
one load shape, the targets, the largest sweep, the warmup, a trace replay's length and the
workers that have work. Each refusal names the field, and so the flag, at fault."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from alphagate.bench.config import (
    MAX_REPLAY_S,
    BenchConfig,
    Level,
    check_load_shape,
    check_replay,
    check_sweep,
    check_warmup,
    levels_for,
    targets_for,
    useful_workers,
)
from alphagate.bench.dataset import Prompt
from alphagate.bench.slo import parse_slo
from alphagate.bench.sweep import parse_sweep
from alphagate.core.errors import ConfigError

SHAPE = dict(trace=False, dataset=False, rate=False, sweep=False, concurrency=False, slo=False)


def test_one_load_shape_per_run() -> None:
    check_load_shape(**SHAPE)
    check_load_shape(**{**SHAPE, "rate": True, "concurrency": True})  # a capped rate
    check_load_shape(**{**SHAPE, "sweep": True, "slo": True})
    for given, field, words in (
        ({"trace": True, "dataset": True}, "trace", "drop --dataset"),
        ({"trace": True, "rate": True}, "trace", "drop --rate"),
        ({"sweep": True}, "sweep", "give --slo"),
        ({"sweep": True, "slo": True, "concurrency": True}, "sweep", "drop --concurrency"),
    ):
        with pytest.raises(ConfigError, match=words) as err:
            check_load_shape(**{**SHAPE, **given})
        assert err.value.field == field


def test_the_targets_are_one_endpoint_or_a_baseline_and_a_candidate() -> None:
    assert targets_for("http://a", None, None) == (("default", "http://a"),)
    assert targets_for(None, "http://b", "http://c") == (
        ("baseline", "http://b"),
        ("candidate", "http://c"),
    )
    for args in (("http://a", "http://b", None), (None, "http://b", None), (None, None, None)):
        with pytest.raises(ConfigError) as err:
            targets_for(*args)
        assert err.value.field == "url"


def test_a_concurrency_sweep_stays_within_the_largest_concurrency() -> None:
    check_sweep(parse_sweep("concurrency:1..100000"))
    check_sweep(parse_sweep("rate:1..1e6"))  # a rate is not a number of users
    with pytest.raises(ConfigError, match="above the largest concurrency, 100,000") as err:
        check_sweep(parse_sweep("concurrency:1..100001"))
    assert err.value.field == "sweep"
    with pytest.raises(ValidationError, match="largest concurrency"):  # the Python API too
        BenchConfig(
            targets=(("default", "http://a"),),
            levels=(),
            slo=parse_slo("ttft_ms=500", 0.99),
            sweep=parse_sweep("concurrency:1..200000"),
        )


def test_a_warmup_leaves_requests_to_measure() -> None:
    check_warmup(9, 10)
    with pytest.raises(ConfigError, match="--warmup 10 leaves no request of the 10") as err:
        check_warmup(10, 10)
    assert err.value.field == "warmup"
    with pytest.raises(ValidationError, match="leaves no request"):
        BenchConfig(targets=(("default", "http://a"),), levels=levels_for([1], None), warmup=5,
                    num_prompts=5)  # fmt: skip


def _trace(last_s: float) -> list[Prompt]:
    return [
        Prompt(prompt=t, messages=None, cls=None, max_tokens=4, arrival_s=at)
        for t, at in (("a", 0.0), ("b", last_s))
    ]


def test_a_replay_past_a_day_is_refused_unless_a_limit_ends_it() -> None:
    assert check_replay(_trace(100.0), 0.5) == (50.0, float("inf"))
    with pytest.raises(ConfigError, match="24 h") as err:
        check_replay(_trace(2 * MAX_REPLAY_S), 1.0)
    assert err.value.field == "trace"
    span, limit = check_replay(_trace(2 * MAX_REPLAY_S), 1.0, max_duration_s=60.0, duration_s=90.0)
    assert (span, limit) == (2 * MAX_REPLAY_S, 60.0)
    assert check_replay(_trace(2 * MAX_REPLAY_S), 0.1).span_s == pytest.approx(0.2 * MAX_REPLAY_S)


def _cfg(levels: tuple[Level, ...]) -> BenchConfig:
    return BenchConfig(targets=(("default", "http://a"),), levels=levels)


def test_only_the_workers_that_have_work_are_started() -> None:
    assert useful_workers(1, _cfg(levels_for([1], None)), 10) == (1, "")
    assert useful_workers(8, _cfg(levels_for([64], None)), 5) == (5, "5 requests per level")
    assert useful_workers(8, _cfg(levels_for([1, 2], None)), 100) == (
        2,
        "at most 2 requests in flight",
    )
    assert useful_workers(8, _cfg(levels_for(None, 5.0)), 100) == (8, "")  # open loop: uncapped
    assert useful_workers(8, _cfg(levels_for([4], 5.0)), 100).processes == 4  # a capped rate
