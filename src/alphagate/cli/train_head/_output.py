"""What ``train-head`` shows and writes: the progress bar, the files ``plan --alpha-from`` and
``gate --measure`` read, the result, the ``speculators`` commands (run with ``--run``), and what to
type after an interruption."""

from __future__ import annotations

import shlex
import subprocess
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, NoReturn

import typer

from alphagate.cli import _app
from alphagate.cli._app import console, err_console, json_dumps, print_json
from alphagate.cli._check import fail
from alphagate.cli._files import atomic_write_text
from alphagate.cli._progress import replay_bar

if TYPE_CHECKING:
    from alphagate.train.config import TrainHeadConfig
    from alphagate.train.results import TrainResult
    from alphagate.train.run import Progress, Tick

__all__ = ["finish", "interrupted", "with_progress"]

_PHASES = {"capture": "capturing hidden states", "train": "training", "measure": "measuring α"}


def with_progress(
    cfg: TrainHeadConfig, run: Callable[..., TrainResult], *, quiet: bool
) -> TrainResult:
    """``run(cfg)`` under a progress bar: the phase, how far, loss and agreement, tokens/s."""
    if quiet:
        return run(cfg)
    with replay_bar("{task.description}") as bar:
        return run(cfg, on_progress=_ticker(bar))


def _ticker(bar: object) -> Progress:
    """The progress callback: one bar per phase, its rate since the phase began."""
    tasks: dict[str, int] = {}
    started: dict[str, tuple[float, int]] = {}
    tokens: dict[str, int] = {}

    def tick(t: Tick) -> None:
        now = time.perf_counter()
        if t.phase not in tasks or t.done < 1:
            tasks[t.phase] = bar.add_task(_PHASES[t.phase], total=t.total, detail="")  # type: ignore[attr-defined]
            started[t.phase] = (now, t.done)
            tokens[t.phase] = 0
        tokens[t.phase] = tokens[t.phase] + t.tokens if t.phase == "train" else t.tokens
        t0, _ = started[t.phase]
        rate = f"{tokens[t.phase] / max(now - t0, 1e-9):,.0f} tok/s"
        detail = (
            rate if t.loss is None else f"loss {t.loss:.3f} · agreement {t.agreement:.2f} · {rate}"
        )
        bar.update(tasks[t.phase], completed=t.done, total=t.total, detail=detail)  # type: ignore[attr-defined]

    return tick


def interrupted(cfg: TrainHeadConfig) -> NoReturn:
    """Ctrl-C: what was kept, and the command that continues the run."""
    from alphagate.train.run import checkpoint_step

    step = checkpoint_step(cfg)
    kept = (
        f"the checkpoint of step {step} is kept in {cfg.work / 'checkpoint'}"
        if step is not None
        else "no checkpoint yet (the hidden states captured are kept)"
    )
    args = list(_app.COMMAND_LINE or [])
    again = shlex.join(["alphagate", *args, *([] if "--resume" in args else ["--resume"])])
    err_console.print(
        f"[yellow]interrupted: {kept}; continue with: {again}[/yellow]", soft_wrap=True
    )
    raise typer.Exit(130)


def _run_gpu(cfg: TrainHeadConfig, result: TrainResult) -> TrainResult:
    """``--run``: the ``speculators train`` command, then the head it wrote measured here."""
    from alphagate.train.run import measure_head

    argv = shlex.split(result.commands[0])
    try:
        rc = subprocess.run(argv, check=False).returncode
    except FileNotFoundError:
        fail(f"{argv[0]} is not on PATH: install speculators where --run runs", "--run")
    if rc != 0:
        err_console.print(
            f"[red]{argv[0]} {argv[1]} exited {rc}; the data and start head are in "
            f"{cfg.work} (its trainer needs a CUDA GPU)[/red]"
        )
        raise typer.Exit(1)
    return measure_head(cfg, result.head, result)


def _worded(result: TrainResult) -> TrainResult:
    from alphagate.report.reasons import with_offline_notes

    update = {k: with_offline_notes(m) for k in ("before", "after") if (m := getattr(result, k))}
    return result.model_copy(update=update)


def finish(cfg: TrainHeadConfig, result: TrainResult, *, as_json: bool) -> None:
    """Run the GPU commands (``--run``), write the result files, print the result."""
    if cfg.run:
        result = _run_gpu(cfg, result)
    result = _worded(result)
    files = [(cfg.out / "train.json", result.payload())]
    if result.before is not None:
        files.append((cfg.out / "alpha-start.json", result.before.payload()))
    if result.after is not None:
        files.append((cfg.out / "alpha.json", result.after.payload()))
    for path, payload in files:
        atomic_write_text(path, json_dumps(payload) + "\n", "--out")
    if as_json:
        print_json(result.payload())
        return
    from alphagate.report.train import render_train

    console.print(render_train(result))
    if result.commands and not cfg.run:
        console.print("On a GPU machine, train with speculators and measure the head it writes:")
        for c in result.commands:
            console.print(c, soft_wrap=True, markup=False, highlight=False)
    console.print(f"written: {', '.join(str(p) for p, _ in files)}", soft_wrap=True)
