"""``alphagate report``: any alphagate results files → one self-contained HTML page.

Reads every file first and refuses bad input with one message per file (exit 2): a file of
another schema or version, truncated JSON, a bench summary whose ``requests.jsonl`` is missing, an
empty sweep. ``--partial`` renders what can be read instead, and the page lists what is missing.
A path whose bytes are not UTF-8 is shown with those bytes escaped (``\\xff``), and the command
that reproduces the page quotes it for the shell (``$'\\xff'``).
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from alphagate.cli._app import JsonOpt, app, console, show
from alphagate.cli._check import fail
from alphagate.cli._files import atomic_write_text
from alphagate.cli._paths import check_outputs
from alphagate.core.records import Frozen

if TYPE_CHECKING:
    from rich.console import RenderableType

    from alphagate.report.inputs import Input, ReportInputs

__all__ = ["ReportWritten", "load_inputs", "report_cmd"]

_RESULTS_HELP = (
    "Results files: simulate/plan/model/measure/gate --json output, a bench summary.json (its "
    "requests.jsonl is read from beside it)."
)


class ReportWritten(Frozen):
    """What ``alphagate report`` wrote (printed with ``--json``)."""

    out: str
    inputs: list[str]
    sections: list[str]
    empty_sections: list[str]
    missing: list[str]


def _shown(path: Path) -> str:
    """``path`` as text: bytes that are not UTF-8 escaped (``\\xff``), never a surrogate that no
    page, JSON or terminal can encode."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def _quoted(path: Path) -> str:
    """``path`` quoted for a POSIX shell; one whose bytes are not UTF-8 as bash's ``$'…'``."""
    raw = os.fsencode(path)
    try:
        return shlex.quote(raw.decode("utf-8"))
    except UnicodeDecodeError:
        plain = (chr(b) if 32 <= b < 127 and b not in b"'\\" else f"\\x{b:02x}" for b in raw)
        return "$'" + "".join(plain) + "'"


def _read(path: Path) -> str:
    from alphagate.core.errors import ConfigError

    shown = _shown(path)
    if not path.is_file():
        raise ConfigError(f"{shown}: not found (or not a file)")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{shown}: not a UTF-8 text file") from None
    except OSError as exc:
        raise ConfigError(f"{shown}: cannot be read ({exc.strerror or exc})") from None


def _with_records(item: Input, path: Path, partial: bool, notes: list[str]) -> Input:
    from alphagate.core.errors import ConfigError
    from alphagate.report.inputs import BenchInput, parse_records

    if not isinstance(item, BenchInput):
        return item
    found, looked = item.result.records_path(path)
    if found is None:
        where = " or ".join(_shown(p) for p in looked)
        raise ConfigError(
            f"{_shown(path)}: its requests.jsonl is missing (looked for {where}); the ITL "
            "distribution and the per-class acceptance need it"
        )
    source = _shown(found)
    records, skipped = parse_records(source, _read(found), item.result.run_id, partial=partial)
    notes += skipped
    return item.model_copy(update={"records": records, "records_source": source})


def load_inputs(
    paths: list[Path], *, partial: bool, command: str | None = None
) -> tuple[ReportInputs, list[str]]:
    """Read and check every file. Returns the inputs and the problems found: with ``partial`` a
    file (or a bench's records) that cannot be read is left out and listed in the inputs'
    ``missing``; without it the problems are for the caller to refuse."""
    from alphagate.core.errors import ConfigError
    from alphagate.report.inputs import BenchInput, ReportInputs, parse_results

    items: list[Input] = []
    problems: list[str] = []
    notes: list[str] = []
    for path in paths:
        try:
            item = parse_results(_shown(path), _read(path))
        except ConfigError as exc:
            problems.append(str(exc))
            continue
        try:
            item = _with_records(item, path, partial, notes)
        except ConfigError as exc:
            problems.append(str(exc))
            if not partial or not isinstance(item, BenchInput):
                continue
        items.append(item)
    inputs = ReportInputs(
        inputs=items, missing=problems + notes if partial else [], command=command
    )
    return inputs, problems


def _command(results: list[Path], out: Path, partial: bool) -> str:
    args = " ".join(_quoted(p) for p in results)
    return f"alphagate report {args} --out {_quoted(out)}" + (" --partial" if partial else "")


def write_report(inputs: ReportInputs, out: Path, flag: str) -> ReportWritten:
    """Render and write the page; what was written, section by section."""
    from alphagate.report.html import render_html
    from alphagate.report.page import build_page

    page = build_page(inputs)
    atomic_write_text(out, render_html(page), flag)
    return ReportWritten(
        out=_shown(out),
        inputs=[i.source for i in inputs.inputs],
        sections=[s.id for s in page.sections],
        empty_sections=[s.id for s in page.sections if not s.blocks],
        missing=list(inputs.missing),
    )


@app.command("report", short_help="One self-contained HTML page from results files.")
def report_cmd(
    results: Annotated[
        list[Path], typer.Argument(metavar="RESULTS", help=_RESULTS_HELP, show_default=False)
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="The HTML file to write.")] = Path(
        "report.html"
    ),
    partial: Annotated[
        bool,
        typer.Option("--partial", help="Render what can be read; the page says what is missing."),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """One self-contained HTML page (inline CSS and SVG, no network) from alphagate results:
    verdict and config, speedup against concurrency, P99/P50 ITL, the ITL CDF, α by position with
    intervals, acceptance lengths, the gate, the assumptions and the commands behind it."""
    check_outputs([(out, "--out", False)], results)
    inputs, problems = load_inputs(
        results, partial=partial, command=_command(results, out, partial)
    )
    if problems and not partial:
        listed = "\n".join(f"  {p}" for p in problems)
        fail(
            f"cannot render the report:\n{listed}\n(--partial renders what can be read and lists "
            "what is missing)",
            "RESULTS",
        )
    if not inputs.inputs:
        fail("nothing could be read; there is no report to render", "RESULTS")
    written = write_report(inputs, out, "--out")
    if not as_json:  # the path whole on one line, to copy
        console.print(f"report written to {written.out}", style="bold", soft_wrap=True)
    show("report", written, as_json, _render)


def _render(w: ReportWritten) -> RenderableType:
    from rich.console import Group
    from rich.text import Text

    from alphagate.report.page import SECTIONS

    titles = dict(SECTIONS)
    parts = [Text("sections:")]
    for i, s in enumerate(w.sections, start=1):
        empty = " (nothing in these inputs)" if s in w.empty_sections else ""
        parts.append(Text(f"  {i}. {s} — {titles.get(s, s)}{empty}"))
    if w.missing:
        parts.append(
            Text(f"partial: {len(w.missing)} input(s) missing — listed on the page", style="yellow")
        )
    return Group(*parts)
