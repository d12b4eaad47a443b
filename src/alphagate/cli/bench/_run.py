"""One bench run from the terminal: each finished request appended to ``requests.jsonl`` at once,
a live line of progress, and what stopped the run said on stderr."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from alphagate.cli._app import console, err_console
from alphagate.cli._files import RecordsFile, sigterm_as_interrupt

if TYPE_CHECKING:
    from rich.table import Table

    from alphagate.bench.config import BenchConfig
    from alphagate.bench.dataset import Prompt
    from alphagate.bench.records import BenchResult, RequestRecord

__all__ = ["Run", "run"]


class Run(NamedTuple):
    """A finished run: its result (naming its records file), the records kept in memory, and
    why the metrics source could not be read (empty when it could)."""

    result: BenchResult
    records: list[RequestRecord]
    metrics_problems: list[str]


def _say_problems(notes: list[str], problems: list[str]) -> None:
    for note in notes:
        err_console.print(f"[yellow]{note}[/yellow]")
    for p in problems[:20]:  # on stderr with --json too: a skipped line changes the load
        err_console.print(f"[yellow]skipped:[/yellow] {p}")
    if len(problems) > 20:
        err_console.print(
            f"[yellow]skipped: {len(problems) - 20} more (summary.json lists all)[/yellow]"
        )


def run(
    cfg: BenchConfig,
    prompts: list[Prompt],
    *,
    run_id: str,
    out_dir: Path,
    problems: list[str],
    keep: bool,
    quiet: bool,
    workers: int,
) -> Run:
    """Run ``cfg`` on ``prompts``, appending each record to ``out_dir``/requests.jsonl (and
    keeping them in memory when ``keep``); Ctrl-C or SIGTERM ends it with what completed."""
    from alphagate.bench.run import run_bench

    records = RecordsFile(out_dir / "requests.jsonl", "--out")
    _say_problems(records.notes, problems)
    kept: list[RequestRecord] = []

    def sink(rec: RequestRecord) -> None:
        records.append(rec)
        if keep:
            kept.append(rec)

    metrics_problems: list[str] = []
    with records, sigterm_as_interrupt(), _progress(cfg, prompts, quiet=quiet) as on_record:
        result = run_bench(
            cfg,
            prompts,
            run_id=run_id,
            sink=sink,
            on_record=on_record,
            dataset_problems=problems,
            workers=workers,
            metrics_problems=metrics_problems,
        )
    _say_stop(result)
    return Run(
        result.model_copy(update={"records_file": str(records.path)}), kept, metrics_problems
    )


@contextmanager
def _progress(
    cfg: BenchConfig, prompts: list[Prompt], *, quiet: bool
) -> Iterator[Callable[[RequestRecord], None] | None]:
    """A live progress line while the run lasts (nothing when ``quiet``); yields what counts
    each record into it."""
    if quiet:
        yield None
        return
    from rich.live import Live

    from alphagate.bench.progress import LiveStats
    from alphagate.report.bench import progress_line

    total = None if cfg.sweep is not None else len(prompts)  # a sweep's levels differ in size
    stats = LiveStats(len(prompts))

    def line() -> Table:  # called by the display's thread at each refresh, not per record
        now = stats.snapshot()
        return progress_line(
            now.level, now.target, now.done, now.failed, now.tokens_per_s,
            now.p99_itl_per_token_ms, total,
        )  # fmt: skip

    with Live(console=console, refresh_per_second=4, transient=True, get_renderable=line):
        yield stats.add


def _say_stop(result: BenchResult) -> None:
    """Why the run stopped, when it stopped before its end, and workers that failed."""
    for why in result.worker_failures:
        err_console.print(f"[red]bench worker: {why}[/red]")
    total, _ = result.requests
    if result.interrupted:
        err_console.print(
            f"[yellow]interrupted: the summary covers the {total} requests that completed[/yellow]"
        )
    elif result.stop_reason:
        err_console.print(f"[yellow]stopped early: {result.stop_reason}[/yellow]")
