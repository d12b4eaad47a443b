"""What bench writes and prints, as an option group (:mod:`alphagate.cli._groups`): the results
folder (records, summaries, CSV), the figures, and what the terminal shows."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from alphagate.cli._app import console, err_console, json_dumps, print_json
from alphagate.cli._check import fail
from alphagate.cli._files import replace_file
from alphagate.cli._paths import check_no_overwrite, check_output_path

if TYPE_CHECKING:
    from alphagate.bench.records import BenchResult, RequestRecord
    from alphagate.cli.bench._prompts import PromptFlags

__all__ = ["OutputFlags", "exit_code"]

_OUT_HELP = (
    "Folder for requests.jsonl and summary.json (default results/bench-TIME). A re-run into the "
    "same folder appends its records under a new run id; summary.json describes the newest run and "
    "summary-RUN_ID.json keeps each run's own."
)


@dataclass(frozen=True)
class OutputFlags:
    """The results folder, the figures, and the format of what is printed."""

    out: Annotated[Path | None, typer.Option("--out", "-o", "--result-dir", help=_OUT_HELP)] = None
    fmt: Annotated[
        Literal["table", "json", "csv"],
        typer.Option(
            "--format",
            help="What to print: tables, one JSON object (= --json), or CSV (one row per level; "
            "requests.csv and levels.csv are written beside summary.json).",
        ),
    ] = "table"
    no_progress: Annotated[
        bool, typer.Option("--no-progress", help="No live display (CI logs).")
    ] = False
    plot: Annotated[
        Path | None,
        typer.Option(
            "--plot",
            help="Write PNG figures here: speedup, P50/P99 ITL, the ITL CDF, α by position and "
            "acceptance length measured, and goodput against load (with --slo).",
        ),
    ] = None
    save_result: Annotated[
        bool,
        typer.Option(
            "--save-result", hidden=True, help="Accepted for vLLM habits; results are always saved."
        ),
    ] = False

    def as_json(self, json_flag: bool) -> bool:
        """Whether one JSON object is printed (``--json`` or ``--format json``)."""
        if json_flag and self.fmt not in ("table", "json"):
            fail("give --json or --format csv, not both", "--format")
        return json_flag or self.fmt == "json"

    @property
    def keeps_records(self) -> bool:
        """Whether the records are kept in memory for the CSV or the figures."""
        return self.fmt == "csv" or self.plot is not None

    def folder(self, prompts: PromptFlags) -> Path:
        """The results folder, checked writable before any work (and that it overwrites no
        input)."""
        out_dir = self.out or Path("results") / time.strftime("bench-%Y%m%d-%H%M%S")
        for path, flag in ((out_dir, "--out"), (self.plot, "--plot"), (prompts.trace, "--trace")):
            _check_utf8_path(path, flag)
        _check_utf8_path(prompts.dataset_file, "--dataset")
        check_output_path(out_dir, "--out", directory=True)
        if self.plot is not None:
            check_output_path(self.plot, "--plot", directory=True)
        check_no_overwrite(
            [(out_dir, "--out", True), (self.plot, "--plot", True)],
            [prompts.dataset_file, prompts.trace],
        )
        return out_dir

    def write(self, result: BenchResult, records: list[RequestRecord], out_dir: Path) -> bool:
        """The summaries, the CSV files and the figures; False when one could not be written."""
        written = _write_summaries(result, out_dir)
        if self.fmt == "csv":
            written = _write_csv(result, records, out_dir) and written
        if self.plot is not None:
            _plots(result, self.plot, records, quiet=self.fmt != "table")
        return written

    def show(self, result: BenchResult, out_dir: Path, *, as_json: bool) -> None:
        """The result on the terminal: one JSON object, CSV, or the tables and where the
        records are."""
        if as_json:
            print_json(result.payload())
        elif self.fmt == "csv":
            from alphagate.bench.export import level_rows, to_csv

            typer.echo(to_csv(level_rows(result)), nl=False)
        else:
            from alphagate.report.bench import render_bench

            console.print(render_bench(result))
            console.print(
                f"records: {result.records_file}   summary: {out_dir / 'summary.json'}   "
                f"run: {result.run_id}"
            )


def _check_utf8_path(path: Path | None, flag: str) -> None:
    """Results name their files in UTF-8 JSON: a path whose bytes are not UTF-8 is refused before
    any work (it would make summary.json unwritable after the run)."""
    if path is None:
        return
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        shown = os.fsencode(path).decode("utf-8", "backslashreplace")
        fail(f"the path '{shown}' is not valid UTF-8; use a UTF-8 path", flag)


def _write_summaries(result: BenchResult, out_dir: Path) -> bool:
    """summary-RUN.json and summary.json; on a full disk, say so and keep going (the records
    written so far are whole, and the summary is still printed)."""
    text = json_dumps(result.payload()) + "\n"
    try:
        replace_file(out_dir / f"summary-{result.run_id}.json", text)
        replace_file(out_dir / "summary.json", text)
    except OSError as exc:
        err_console.print(
            f"[red]cannot write the summary in {out_dir}: {exc.strerror or exc}[/red]"
        )
        return False
    return True


def _write_csv(result: BenchResult, records: list[RequestRecord], out_dir: Path) -> bool:
    """requests.csv and levels.csv of this run (atomically, as summary.json)."""
    from alphagate.bench.export import level_rows, request_rows, to_csv

    try:
        replace_file(out_dir / "requests.csv", to_csv(request_rows(records, result.slo)))
        replace_file(out_dir / "levels.csv", to_csv(level_rows(result)))
    except OSError as exc:
        err_console.print(
            f"[red]cannot write the CSV files in {out_dir}: {exc.strerror or exc}[/red]"
        )
        return False
    return True


def _plots(result: BenchResult, folder: Path, records: list[RequestRecord], *, quiet: bool) -> None:
    from alphagate.report.bench_plots import bench_figures
    from alphagate.report.charts import bench_charts
    from alphagate.report.plots import draw, figure_png

    figures = {f"{c.key}.png": draw(c) for c in bench_charts(result, records)}
    figures.update(bench_figures(result))
    if not figures:
        err_console.print("[yellow]--plot: nothing to draw (no request completed)[/yellow]")
        return
    for name, fig in figures.items():
        path = folder / name
        try:
            folder.mkdir(parents=True, exist_ok=True)
            path.write_bytes(figure_png(fig))
        except OSError as exc:
            fail(f"cannot write {path}: {exc.strerror or exc}", "--plot")
        if not quiet:
            err_console.print(f"plot: {path}")


def exit_code(
    result: BenchResult, max_error_rate: float, *, written: bool, bad_source: bool
) -> int:
    """130 interrupted; 2 a wrong metrics source (though every record and the summary are
    kept); 1 too many failures, or a file not written; else 0."""
    if result.interrupted:
        return 130
    why = result.failure(max_error_rate)
    if why is not None:
        err_console.print(f"[red]{why}[/red]")
    if bad_source:
        return 2
    return 1 if why is not None or not written else 0
