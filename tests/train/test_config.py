"""What a resumed run must repeat: every setting that changes what is trained or measured, the
first that differs named by its flag."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from alphagate.train.config import TrainHeadConfig, resume_mismatch


def _cfg(**kw: object) -> TrainHeadConfig:
    base = {"logs": (Path("log.jsonl"),), "target": "t", "out": Path("out")}
    return TrainHeadConfig(**(base | kw))  # type: ignore[arg-type]


def test_a_resumed_run_with_other_flags_is_refused_naming_the_flag() -> None:
    saved = _cfg(lr=1e-3, only_class="code").settings()
    assert resume_mismatch(saved, _cfg(lr=1e-3, only_class="code")) is None
    # what does not change the head may change
    assert (
        resume_mismatch(
            saved,
            _cfg(
                lr=1e-3, only_class="code", eval_every=5, resume=True, checkpoint_every=7, threads=2
            ),
        )
        is None
    )
    why = resume_mismatch(saved, _cfg(lr=2e-3, only_class="code"))
    assert why is not None and why.startswith("--lr: the run in out was started with 0.001")
    assert "this one gives 0.002" in why
    assert resume_mismatch(saved, _cfg(only_class="chat")).startswith("--class:")  # type: ignore[union-attr]
    other = _cfg(logs=(Path("other.jsonl"),), only_class="code")
    assert resume_mismatch(saved, other).startswith("--log:")  # type: ignore[union-attr]
    assert resume_mismatch(saved, _cfg(only_class="code", held_out=0.3)).startswith("--held-out:")  # type: ignore[union-attr]


def test_run_needs_the_speculators_backend() -> None:
    with pytest.raises(ValidationError, match="--run executes the speculators commands"):
        _cfg(run=True)
    assert _cfg(run=True, backend="speculators").run
