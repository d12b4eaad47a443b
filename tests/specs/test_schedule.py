"""vLLM's batch-size schedule for K: built from K per batch size, validated as vLLM validates it,
and looked up as vLLM's dense lookup does (vllm/v1/spec_decode/dynamic/utils.py)."""

from __future__ import annotations

import pytest

from alphagate.specs.schedule import (
    ScheduleError,
    compress_schedule,
    k_for_batch,
    validate_schedule,
)


def test_runs_of_one_k_become_inclusive_ranges_from_one() -> None:
    assert compress_schedule([3, 3, 2, 0, 0]) == [[1, 2, 3], [3, 3, 2], [4, 5, 0]]
    assert compress_schedule([4]) == [[1, 1, 4]]
    assert compress_schedule([]) == []


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        ([], "empty"),
        ([[2, 4, 1]], "must start at 1"),
        ([[1, 4, 1], [3, 8, 0]], "must not overlap"),
        ([[1, 4, 6]], r"K must be in \[0, 5\]"),
        ([[1, 4, -1]], r"K must be in \[0, 5\]"),
        ([[1, 4]], "3 items"),
        ([[1, 0, 1]], "start <= end"),
        ([[0, 4, 1]], "start <= end"),
    ],
)
def test_schedule_validation_rejects_what_vllm_rejects(bad: list[list[int]], says: str) -> None:
    with pytest.raises(ScheduleError, match=says):
        validate_schedule(bad, 5)


def test_a_schedule_with_a_gap_is_valid() -> None:
    validate_schedule([[1, 16, 3], [32, 128, 2]], 3)


def test_k_is_the_ranges_capped_at_the_configured_k() -> None:
    sched = [[1, 2, 5], [3, 8, 2], [9, 64, 0]]
    assert [k_for_batch(sched, b, 5) for b in (1, 2, 3, 8, 9, 64)] == [5, 5, 2, 2, 0, 0]
    assert k_for_batch(sched, 1, 3) == 3  # capped at num_speculative_tokens


def test_a_gap_or_the_tail_carries_the_k_before_it_forward() -> None:
    """vLLM's dense lookup: [(1, 16, 3), (32, 128, 2)] maps batch sizes 17–31 to K = 3, and the
    sizes past 128 to K = 2."""
    sched = [[1, 16, 3], [32, 128, 2]]
    assert [k_for_batch(sched, b, 4) for b in (16, 17, 31, 32, 128, 129, 4096)] == [
        3, 3, 3, 2, 2, 2, 2,
    ]  # fmt: skip
