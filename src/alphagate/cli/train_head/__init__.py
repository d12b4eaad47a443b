"""``alphagate train-head``: a domain EAGLE-3 head trained on a team's own request log, its α on
held-out requests of that log, and the files ``plan --alpha-from`` and ``gate --measure`` read."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from alphagate.cli._app import JsonOpt, app
from alphagate.cli._check import bounded, config_error, fail
from alphagate.cli._files import sigterm_as_interrupt
from alphagate.cli._groups import takes_groups
from alphagate.cli.measure._replay import ReplayRequests
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
    init: Annotated[
        str | None,
        typer.Option(
            "--init",
            help="The head to start from (vLLM's or the speculators format); default: a new head.",
        ),
    ] = None,
    only_class: Annotated[
        str | None, typer.Option("--class", help="Train on this class's requests only.")
    ] = None,
    steps: Annotated[int, typer.Option("--steps", min=1, help="Optimizer steps.")] = 300,
    lr: Annotated[float, bounded("--lr", lo=1e-8, hi=1.0, help="AdamW learning rate.")] = 1e-3,
    held_out: Annotated[
        float,
        bounded("--held-out", lo=0.01, hi=0.9, help="Share of requests held out (by request)."),
    ] = 0.2,
    k: Annotated[int, typer.Option("--k", min=1, max=16, help="K of the held-out α.")] = 3,
    seed: Annotated[int, typer.Option("--seed", min=0, help="Seeds the split and a new head.")] = 0,
    checkpoint_every: Annotated[
        int, typer.Option("--checkpoint-every", min=1, help="Steps between checkpoints.")
    ] = 50,
    eval_every: Annotated[
        int | None,
        typer.Option("--eval-every", min=1, help="Measure the held-out α every N steps."),
    ] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue the interrupted run in --out.")
    ] = False,
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
        target=target,
        out=out,
        init=init,
        only_class=only_class,
        steps=steps,
        lr=lr,
        held_out=held_out,
        k=k,
        seed=seed,
        checkpoint_every=checkpoint_every,
        eval_every=eval_every,
        resume=resume,
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


def _config(requests: ReplayRequests, **fields: object) -> TrainHeadConfig:
    from pydantic import ValidationError

    from alphagate.train.config import TrainHeadConfig

    r = requests.fields()
    try:
        return TrainHeadConfig(
            logs=r["logs"],
            class_field=r["class_field"],
            class_rules=r["class_rules"],
            sample=r["sample"],
            **fields,
        )
    except ValidationError as exc:
        config_error(exc)
