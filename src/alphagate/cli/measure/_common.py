"""What the ``measure`` sub-verbs share: their Typer group, the ``--k`` option, and the results
they all write and print (an option group, :mod:`alphagate.cli._groups`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from alphagate.cli._app import JsonOpt, app, console, err_console, json_dumps, print_json
from alphagate.cli._check import fail
from alphagate.cli._files import atomic_write_text
from alphagate.cli._paths import check_outputs

if TYPE_CHECKING:
    from alphagate.measure.results import MeasureResult

__all__ = ["KOpt", "ResultsFlags", "measure_app", "measure_error"]

measure_app = typer.Typer(
    help="Measure acceptance: from live /metrics, a Prometheus server, server logs, or offline "
    "from request logs with the target and a candidate drafter. Every "
    "source writes the same results JSON (alphagate.results/v1), which `plan --alpha-from` and "
    "`gate --measure` read.",
    no_args_is_help=True,
)
app.add_typer(
    measure_app, name="measure", short_help="α, ρ, τ from servers, Prometheus, logs or offline."
)

KOpt = Annotated[
    int | None, typer.Option("--k", min=1, max=64, help="K, when the source does not show it.")
]


@dataclass(frozen=True)
class ResultsFlags:
    """Where the results JSON goes, and whether it is printed instead of tables."""

    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write the results JSON here.")
    ] = None
    as_json: JsonOpt = False

    def check(self, inputs: list[Path], *others: tuple[Path | None, str]) -> None:
        """``--out`` (and ``others``: more output files and their flags) writable, and none
        of them an input."""
        outputs = [(self.out, "--out", False), *((p, flag, False) for p, flag in others)]
        check_outputs(outputs, inputs)

    def write(self, result: MeasureResult) -> None:
        if self.out is not None:
            atomic_write_text(self.out, json_dumps(result.payload()) + "\n", "--out")

    def finish(self, result: MeasureResult, min_drafts: int | None = None) -> None:
        """Write and print the result; exit 3 when it has fewer than ``min_drafts`` drafts."""
        from alphagate.report.measure import promql_lines, render_measure

        self.write(result)
        if self.as_json:
            print_json(result.payload())
        else:
            console.print(render_measure(result))
            for line in promql_lines(result):
                console.print(line, soft_wrap=True, markup=False, highlight=False)
            if self.out is not None:
                console.print(f"results written to {self.out}")
        drafts = result.overall.num_drafts if result.overall else 0.0
        if min_drafts is not None and drafts < min_drafts:
            err_console.print(
                f"[yellow]{drafts:,.0f} drafts < --min-drafts {min_drafts:,}: not enough "
                "evidence yet[/yellow]"
            )
            raise typer.Exit(3)


def measure_error(exc: Exception) -> NoReturn:
    """A source that failed: exit 2 (a bad input, naming no flag) or its own exit code (3: it
    works but has not seen enough yet) with the message."""
    code = getattr(exc, "exit_code", 2)
    if code == 2:
        fail(str(exc))
    err_console.print(f"[yellow]{exc}[/yellow]")
    raise typer.Exit(code)
