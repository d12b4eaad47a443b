"""vLLM's batch-size schedule for K (``num_speculative_tokens_per_batch_size``): inclusive
``[start, end, K]`` ranges of the number of requests a step schedules, validated as
``vllm/v1/spec_decode/dynamic/utils.py`` does, and looked up as vLLM's scheduler does
(``vllm/v1/core/sched/scheduler.py``: K for the step's ``len(num_scheduled_tokens)``)."""

from __future__ import annotations

__all__ = ["ScheduleError", "compress_schedule", "k_for_batch", "validate_schedule"]


class ScheduleError(ValueError):
    """A batch-size schedule that vLLM's validation would reject."""


def compress_schedule(k_by_batch: list[int]) -> list[list[int]]:
    """``k_by_batch[b - 1]`` = K at batch size b → sorted inclusive ``[lo, hi, K]`` ranges from 1."""
    out: list[list[int]] = []
    for b, k in enumerate(k_by_batch, start=1):
        if out and out[-1][2] == k:
            out[-1][1] = b
        else:
            out.append([b, b, k])
    return out


def validate_schedule(schedule: list[list[int]], num_speculative_tokens: int) -> None:
    """vLLM's rules (``vllm/v1/spec_decode/dynamic/utils.py``): non-empty 3-item entries, positive
    sorted non-overlapping ranges starting at 1, start ≤ end, 0 ≤ K ≤ num_speculative_tokens."""
    if not schedule:
        raise ScheduleError("the schedule is empty")
    prev_end = 0
    for i, entry in enumerate(schedule):
        if len(entry) != 3:
            raise ScheduleError(f"entry {entry} does not have 3 items")
        lo, hi, k = entry
        if lo < 1 or hi < lo:
            raise ScheduleError(f"entry {entry}: need 1 <= start <= end")
        if i == 0 and lo != 1:
            raise ScheduleError(f"entry {entry}: the first range must start at 1")
        if i > 0 and lo <= prev_end:
            raise ScheduleError(f"entry {entry}: ranges must be sorted and must not overlap")
        if not 0 <= k <= num_speculative_tokens:
            raise ScheduleError(f"entry {entry}: K must be in [0, {num_speculative_tokens}]")
        prev_end = hi


def k_for_batch(schedule: list[list[int]], batch: int, num_speculative_tokens: int) -> int:
    """K for a step that schedules ``batch`` requests: the range's K, capped at
    ``num_speculative_tokens``; in a gap between ranges, or past the last, the K of the range
    before it (vLLM's ``build_dynamic_sd_schedule_lookup`` carries it forward)."""
    k = schedule[0][2]
    for lo, _hi, range_k in schedule:
        if batch < lo:
            break
        k = range_k
    return min(k, num_speculative_tokens)
