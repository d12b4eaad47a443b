"""``train-head``'s option groups (:mod:`alphagate.cli._groups`): how the head is trained, which
of the log's requests train it and which measure it, and its checkpoints. Their fields are
:class:`~alphagate.train.config.TrainHeadConfig`'s, by name."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import typer

from alphagate.cli._check import bounded

__all__ = ["CheckpointFlags", "SplitFlags", "TrainingFlags"]


@dataclass(frozen=True)
class TrainingFlags:
    """The head it starts from, and the optimizer's steps and learning rate."""

    init: Annotated[
        str | None,
        typer.Option(
            "--init",
            help="The head to start from (vLLM's or the speculators format); default: a new head.",
        ),
    ] = None
    steps: Annotated[int, typer.Option("--steps", min=1, help="Optimizer steps.")] = 300
    lr: Annotated[float, bounded("--lr", lo=1e-8, hi=1.0, help="AdamW learning rate.")] = 1e-3


@dataclass(frozen=True)
class SplitFlags:
    """Which requests train the head and which are held out, and the α measured on those."""

    only_class: Annotated[
        str | None, typer.Option("--class", help="Train on this class's requests only.")
    ] = None
    held_out: Annotated[
        float,
        bounded("--held-out", lo=0.01, hi=0.9, help="Share of requests held out (by request)."),
    ] = 0.2
    seed: Annotated[int, typer.Option("--seed", min=0, help="Seeds the split and a new head.")] = 0
    k: Annotated[int, typer.Option("--k", min=1, max=16, help="K of the held-out α.")] = 3
    eval_every: Annotated[
        int | None,
        typer.Option("--eval-every", min=1, help="Measure the held-out α every N steps."),
    ] = None


@dataclass(frozen=True)
class CheckpointFlags:
    """How often the run keeps a checkpoint, and whether it continues one."""

    checkpoint_every: Annotated[
        int, typer.Option("--checkpoint-every", min=1, help="Steps between checkpoints.")
    ] = 50
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue the interrupted run in --out.")
    ] = False
