"""What ``plan`` prints and writes besides the plan itself: the benchmark and gate commands of
its runbook (an option group, :mod:`alphagate.cli._groups`), and the files it writes."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from alphagate.cli._app import console, json_dumps, print_json
from alphagate.cli._files import atomic_write_text
from alphagate.cli._paths import check_no_overwrite, check_output_path

if TYPE_CHECKING:
    from alphagate.plan.records import Plan

__all__ = ["RunbookFlags", "check_plan_outputs", "out_stem", "plan_file", "show_plan"]


@dataclass(frozen=True)
class RunbookFlags:
    """The servers, model name and runs the printed bench and gate commands name."""

    url: Annotated[
        str,
        typer.Option(
            "--url", help="The baseline server (speculation off) the printed commands benchmark."
        ),
    ] = "http://127.0.0.1:8000"
    candidate_url: Annotated[
        str | None,
        typer.Option(
            "--candidate-url",
            help="The staging replica with speculation on, in the printed commands (default: "
            "the --url host, next port).",
        ),
    ] = None
    repeats: Annotated[
        int,
        typer.Option(
            "--repeats",
            min=2,
            max=20,
            help="Alternated baseline/candidate runs per level in the printed A/B (their spread "
            "is the gate's interval: with 5, Student's t is 2.8 standard errors).",
        ),
    ] = 5
    bench_requests: Annotated[
        int | None,
        typer.Option(
            "--bench-requests",
            min=1,
            max=10_000_000,
            help="Requests per level and run in the printed bench commands (default: 384 over "
            "the runs, for the gate's 1% error-rate rule, and 4 per user at the peak).",
        ),
    ] = None
    served_model: Annotated[
        str | None,
        typer.Option(
            "--served-model",
            help="The model name the server serves (--served-model-name), for the printed "
            "commands; default: the preset's Hugging Face id.",
        ),
    ] = None

    def fields(self) -> dict[str, Any]:
        """The :class:`~alphagate.plan.PlanRequest` fields these flags give."""
        return asdict(self)


def plan_file(out: Path | None) -> str:
    """The plan JSON that ``--out`` writes (and the printed gate commands read)."""
    if out is None:
        return "plan.json"
    return str(out if out.suffix.lower() == ".json" else out.with_suffix(".json"))


def out_stem(out: Path | None) -> str:
    """Where the printed re-plan commands write, beside ``--out``."""
    if out is None:
        return "plan"
    return str(out.with_suffix(""))


def check_plan_outputs(out: Path | None, plot: Path | None, inputs: list[Path | None]) -> None:
    """``--out`` (and the JSON beside a markdown ``--out``) and ``--plot`` writable, and no
    input overwritten."""
    if out is not None:
        check_output_path(out, "--out", directory=False)
    if plot is not None:
        check_output_path(plot, "--plot", directory=True)
    written: list[tuple[Path | None, str, bool]] = [] if out is None else [(out, "--out", False)]
    if out is not None and out.suffix.lower() != ".json":
        written.append((out.with_suffix(".json"), "--out", False))
    check_no_overwrite(written, inputs)


def _write(plan: Plan, out: Path) -> Path | None:
    """The plan at ``out``: its JSON, or the markdown and the JSON beside it (returned) for
    ``alphagate gate --plan``."""
    from alphagate.report.plan import render_plan_markdown

    if out.suffix.lower() == ".json":
        atomic_write_text(out, json_dumps(plan.payload()) + "\n", "--out")
        return None
    plan_json = out.with_suffix(".json")
    check_output_path(plan_json, "--out", directory=False)
    atomic_write_text(out, render_plan_markdown(plan), "--out")
    atomic_write_text(plan_json, json_dumps(plan.payload()) + "\n", "--out")
    return plan_json


def show_plan(plan: Plan, *, out: Path | None, plot: Path | None, as_json: bool) -> None:
    """Write the plan and its plots, and print it (or its JSON) and where they went."""
    from alphagate.report.plan import render_plan_console

    plan_json = _write(plan, out) if out is not None else None
    if plot is not None:
        from alphagate.cli._plots import write_plots
        from alphagate.report.charts import plan_charts

        write_plots(plan_charts(plan), plot, "--plot")
    if as_json:
        print_json(plan.payload())
        return
    console.print(render_plan_console(plan), crop=False)
    if plot is not None:
        console.print(f"plots written to {plot}/")
    if out is not None:
        beside = f" (and {plan_json}, which alphagate gate --plan reads)" if plan_json else ""
        console.print(f"plan written to {out}{beside}")
