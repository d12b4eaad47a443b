"""A twin's configuration: one K or vLLM's batch-size schedule of K (validated as vLLM validates
it, looked up as vLLM looks it up), and a served name that cannot be taken for NAME:CLASS."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from alphagate.twin.config import TwinConfig


def test_one_k_at_every_batch_and_none_is_no_speculation() -> None:
    assert [TwinConfig(k=3).k_at(b) for b in (1, 64, 4096)] == [3, 3, 3]
    assert TwinConfig(k=3).speculative and not TwinConfig(k=0).speculative


def test_a_schedule_gives_k_by_the_steps_batch_with_gaps_carried_forward() -> None:
    cfg = TwinConfig(k=4, k_by_batch_size=[[1, 4, 4], [5, 16, 2], [32, 64, 1]])
    assert [cfg.k_at(b) for b in (1, 4, 5, 16, 17, 31, 32, 64, 65)] == [4, 4, 2, 2, 2, 2, 1, 1, 1]
    assert cfg.k_at(0) == 4  # no request scheduled: the configured K


@pytest.mark.parametrize(
    ("schedule", "says"),
    [
        ([[1, 4, 5]], r"k_by_batch_size: entry \[1, 4, 5\]: K must be in \[0, 4\]"),
        ([[2, 4, 1]], "k_by_batch_size: .* must start at 1"),
        ([], "k_by_batch_size: the schedule is empty"),
    ],
)
def test_a_schedule_vllm_rejects_is_refused(schedule: list[list[int]], says: str) -> None:
    with pytest.raises(ValidationError, match=says):
        TwinConfig(k=4, k_by_batch_size=schedule)


def test_a_served_name_cannot_hold_the_class_separator() -> None:
    with pytest.raises(ValidationError, match="':' separates a traffic class"):
        TwinConfig(served_model_name="team:chat")
    with pytest.raises(ValidationError):
        TwinConfig(k=65)
