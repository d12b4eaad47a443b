"""What ``train-head`` writes and prints (``alphagate.results/v1``, verb ``train-head``).

Two kinds of figure, kept apart: the training's own (the loss, and the teacher-forced top-1
agreement of the head's drafts with the target's argmax on the train split — what a training
run can see, and not what serving accepts), and acceptance measured by ``measure offline`` on the
held-out requests (α, ρ, τ with their intervals), for the head the run started from and for the
new one. Only the second is α.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from alphagate.core.records import Frozen, Results
from alphagate.measure.estimate import Interval
from alphagate.measure.results import MeasureResult

__all__ = ["CaptureStats", "ClassGain", "EvalPoint", "TrainResult", "TrainingStats", "gains"]


class CaptureStats(Frozen):
    """The target's hidden states over the train split."""

    requests: int
    tokens: int
    captured_here: int = Field(description="requests captured by this run (the rest resumed)")
    seconds: float
    tokens_per_s: float | None
    folder: str


class TrainingStats(Frozen):
    """The optimizer steps: their loss and teacher-forced agreement (not α)."""

    steps: int
    steps_run: int = Field(description="steps run by this process (the rest resumed)")
    ttt_steps: int
    tokens_per_step: int
    seconds: float
    tokens: int
    tokens_per_s: float | None
    loss_first: float | None = Field(description="KL to the target, summed over TTT steps")
    loss_last: float | None
    agreement: list[float] = Field(
        description="teacher-forced top-1 agreement with the target at each TTT step (drafts of "
        "steps 0…j all the target's argmax), over the last steps run"
    )


class EvalPoint(Frozen):
    """α of a checkpoint on the held-out requests (``--eval-every``)."""

    step: int
    alpha: dict[str, float | None]
    alpha_ci: dict[str, Interval | None]


class ClassGain(Frozen):
    """One class on the held-out requests: α (i.i.d., from ρ at K) with the starting head and
    with the new one."""

    name: str
    alpha_start: float | None
    alpha_start_ci: Interval | None
    alpha: float | None
    alpha_ci: Interval | None
    ratio: float | None = Field(description="α new ÷ α start")


class TrainResult(Results):
    """One ``train-head`` run."""

    verb: Literal["train-head"] = "train-head"
    target: str
    start: str = Field(description="the head the run started from, or 'new'")
    head: str = Field(description="the folder of the trained head (vLLM loads it)")
    backend: Literal["alphagate", "speculators"]
    classes: list[str] = Field(description="the classes trained on")
    k: int
    requests_train: int
    requests_held_out: int
    held_out_log: str
    skipped: dict[str, int] = Field(default_factory=dict, description="reason → requests")
    capture: CaptureStats | None = None
    training: TrainingStats | None = None
    evals: list[EvalPoint] = Field(default_factory=list)
    gains: list[ClassGain] = Field(default_factory=list)
    before: MeasureResult | None = Field(default=None, description="the start head, held out")
    after: MeasureResult | None = Field(default=None, description="the new head, held out")
    commands: list[str] = Field(default_factory=list, description="--backend speculators")
    notes: list[str] = Field(default_factory=list)


def _alpha(m: MeasureResult | None, name: str | None) -> tuple[float | None, Interval | None]:
    if m is None:
        return None, None
    e = m.overall if name is None else m.classes.get(name)
    return (None, None) if e is None else (e.alpha_iid, e.alpha_iid_ci)


def gains(before: MeasureResult | None, after: MeasureResult) -> list[ClassGain]:
    """Per class (and over all held-out requests, named ``all``): α before and after."""
    names: list[str | None] = [*sorted(after.classes), None]
    out = []
    for name in names:
        a0, ci0 = _alpha(before, name)
        a1, ci1 = _alpha(after, name)
        ratio = a1 / a0 if a0 and a1 is not None else None
        out.append(
            ClassGain(
                name=name or "all",
                alpha_start=a0,
                alpha_start_ci=ci0,
                alpha=a1,
                alpha_ci=ci1,
                ratio=ratio,
            )
        )
    return out
