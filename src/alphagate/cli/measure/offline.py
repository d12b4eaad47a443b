"""``alphagate measure offline``: α of a candidate drafter on logged traffic, replayed through the
target and the drafter."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import typer

from alphagate.cli._app import console, err_console, print_json
from alphagate.cli._check import config_error, fail
from alphagate.cli._files import sigterm_as_interrupt
from alphagate.cli._groups import takes_groups
from alphagate.cli._progress import replay_bar
from alphagate.cli.measure._common import ResultsFlags, measure_app, measure_error
from alphagate.cli.measure._replay import (
    ReplayModels,
    ReplayRequests,
    ReplayRun,
    ReplaySampling,
)

if TYPE_CHECKING:
    from alphagate.measure.offline.config import OfflineConfig
    from alphagate.measure.results import MeasureResult

__all__ = ["offline"]


@measure_app.command("offline", short_help="α of a candidate drafter on logged traffic.")
@takes_groups
def offline(
    requests: ReplayRequests,
    models: ReplayModels,
    sampling: ReplaySampling = ReplaySampling(),
    run: ReplayRun = ReplayRun(),
    results: ResultsFlags = ResultsFlags(),
) -> None:
    """Replay logged requests through the target and a candidate drafter: vLLM's acceptance
    counters (ρ, τ, α by position, acceptance lengths) per class, with 95% bootstrap intervals.

    Greedy (temperature 0) is exact on logs the target wrote at temperature 0: one
    teacher-forced target pass per request, then every engine step is replayed. With
    --temperature the log must be a sample of the target at those settings (--regenerate draws
    one). Models load from local paths or the local Hugging Face cache only. The results JSON is
    what `plan --alpha-from` and `gate --measure` read. With --ray the requests are shared out
    to Ray actors (each loads the models once) on this machine or a cluster. Exit codes: 0
    measured, 2 bad input.
    """
    from alphagate.measure.offline.run import measure_offline
    from alphagate.measure.results import MeasureError
    from alphagate.report.offline import render_offline
    from alphagate.report.reasons import with_offline_notes

    out, checkpoint = results.out, run.checkpoint
    results.check(requests.logs, (checkpoint, "--checkpoint"))
    if out is not None and checkpoint is not None and out.resolve() == checkpoint.resolve():
        fail(f"{out} is also the --checkpoint: give the results another file", "--out")
    cfg = _config(requests, models, sampling, run)
    try:
        with sigterm_as_interrupt():
            if results.as_json or run.no_progress:
                result = measure_offline(cfg)
            else:
                result = _with_progress(cfg, measure_offline)
    except MeasureError as exc:
        measure_error(exc)
    except KeyboardInterrupt:
        hint = f"; run again with --checkpoint {checkpoint} to resume" if checkpoint else ""
        err_console.print(f"[yellow]interrupted{hint}[/yellow]")
        raise typer.Exit(130) from None
    result = with_offline_notes(result)
    results.write(result)
    if results.as_json:
        print_json(result.payload())
        return
    console.print(render_offline(result))
    if out is not None:
        console.print(f"results written to {out}")


def _config(
    requests: ReplayRequests, models: ReplayModels, sampling: ReplaySampling, run: ReplayRun
) -> OfflineConfig:
    from pydantic import ValidationError

    from alphagate.measure.offline.config import OfflineConfig
    from alphagate.measure.results import MeasureError

    try:
        return OfflineConfig(
            **requests.fields(), **models.fields(), **sampling.fields(), **run.fields()
        )
    except MeasureError as exc:
        fail(str(exc), "--drafter")
    except ValidationError as exc:
        config_error(exc)


def _with_progress(cfg: OfflineConfig, run: Callable[..., MeasureResult]) -> MeasureResult:
    """``run(cfg)`` under a progress bar with the requests done, tokens per second and an ETA."""
    with replay_bar("scoring requests") as bar:
        task = bar.add_task("score", total=None, detail="")
        t0 = time.perf_counter()

        def tick(done: int, total: int, tokens: int) -> None:
            rate = tokens / max(time.perf_counter() - t0, 1e-9)
            bar.update(task, completed=done, total=total, detail=f"{rate:,.0f} tok/s")

        return run(cfg, on_progress=tick)
