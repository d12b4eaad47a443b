"""``alphagate train-head``: a domain EAGLE-3 head trained on a team's own request log, its α on
held-out requests of that log, and the files ``plan --alpha-from`` and ``gate --measure`` read."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from alphagate.cli._app import JsonOpt, app
from alphagate.cli._check import config_error, fail
from alphagate.cli._files import sigterm_as_interrupt
from alphagate.cli._groups import takes_groups
from alphagate.cli.measure._replay import ReplayRequests
from alphagate.cli.train_head._flags import CheckpointFlags, SplitFlags, TrainingFlags
from alphagate.cli.train_head._output import finish, interrupted, with_progress

if TYPE_CHECKING:
    from alphagate.train.config import TrainHeadConfig

__all__ = ["train_head"]


@app.command("train-head", short_help="Train an EAGLE-3 head on your traffic; α held out.")
@takes_groups
def train_head(
    requests: ReplayRequests,
    target: Annotated[
        str, typer.Option("--target", help="The target model: a local directory or cached id.")
    ],
    out: Annotated[
        Path,
        typer.Option(
            "--out", "-o", help="The new head's folder (vLLM loads it), with the run's files."
        ),
    ],
    training: TrainingFlags = TrainingFlags(),
    split: SplitFlags = SplitFlags(),
    checkpoints: CheckpointFlags = CheckpointFlags(),
    backend: Annotated[
        Literal["alphagate", "speculators"],
        typer.Option(
            "--backend",
            help="alphagate: train here (CPU or GPU). speculators: capture here, print the "
            "speculators commands that train on a GPU machine.",
        ),
    ] = "alphagate",
    run: Annotated[
        bool, typer.Option("--run", help="--backend speculators: run its commands here.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Train an EAGLE-3 head on your own request log, for a traffic class whose α is below its
    gate, and measure the gain on held-out requests of that log.

    The log (bench --save-text requests.jsonl, OpenAI request/response JSONL, messages JSONL or
    ShareGPT; completions from the current target are on-policy) is split by request into train
    and held-out (seeded). The target's hidden states are captured over the train split in the
    speculators hidden-state layout (resumable), and the head — speculators' EAGLE-3 model,
    trained with its training-time-test loss — is written in the format vLLM serves. measure
    offline then measures the starting head and the new one on the held-out requests, per
    class, with 95% intervals: --out/alpha.json is what `plan --alpha-from` and `gate --measure`
    read. The training loss and teacher-forced agreement are printed as what they are, not as
    α. Ctrl-C keeps the last checkpoint (every --checkpoint-every steps); --resume continues it.
    Needs the offline extra and the speculators library. Exit codes: 0 trained, 2 bad input.
    """
    cfg = _config(
        requests,
        training,
        split,
        checkpoints,
        target=target,
        out=out,
        backend=backend,
        run=run,
    )
    from alphagate.core.errors import ConfigError
    from alphagate.train.run import train_head as run_train

    try:
        with sigterm_as_interrupt():
            result = with_progress(cfg, run_train, quiet=as_json)
    except ConfigError as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        interrupted(cfg)
    finish(cfg, result, as_json=as_json)


def _config(
    requests: ReplayRequests,
    *groups: TrainingFlags | SplitFlags | CheckpointFlags,
    **fields: object,
) -> TrainHeadConfig:
    """The run's config: the log's requests, the groups' fields (named as the config's), and
    ``fields``."""
    from pydantic import ValidationError

    from alphagate.train.config import TrainHeadConfig

    grouped = {k: v for g in groups for k, v in asdict(g).items()}
    try:
        return TrainHeadConfig(**requests.fields(), **grouped, **fields)
    except ValidationError as exc:
        config_error(exc)
