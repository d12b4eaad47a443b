"""What ``plan`` prints and writes besides the plan itself: the benchmark and gate commands of
its runbook, and the files it writes (option groups, :mod:`alphagate.cli._groups`)."""

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

__all__ = ["PlanOutputFlags", "RunbookFlags", "show_plan"]


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


@dataclass(frozen=True)
class PlanOutputFlags:
    """Where the plan and its plots are written."""

    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help="Write the markdown plan here, and the plan as JSON beside it (PATH.json, for "
            "alphagate gate --plan); a .json PATH gets the JSON only.",
        ),
    ] = None
    plot: Annotated[
        Path | None,
        typer.Option(
            "--plot",
            help="Write PNG plots into this folder: speedup and K against concurrency, P50/P99 "
            "ITL, α by position, acceptance length.",
        ),
    ] = None

    def check(self, inputs: list[Path | None]) -> None:
        """``--out`` (and the JSON beside a markdown ``--out``) and ``--plot`` writable, and no
        input overwritten."""
        out = self.out
        if out is not None:
            check_output_path(out, "--out", directory=False)
        if self.plot is not None:
            check_output_path(self.plot, "--plot", directory=True)
        written: list[tuple[Path | None, str, bool]] = (
            [] if out is None else [(out, "--out", False)]
        )
        if out is not None and out.suffix.lower() != ".json":
            written.append((out.with_suffix(".json"), "--out", False))
        check_no_overwrite(written, inputs)

    def fields(self) -> dict[str, str]:
        """The :class:`~alphagate.plan.PlanRequest` fields they give: the plan JSON ``--out``
        writes (which the printed gate commands read), and where the printed re-plan commands
        write, beside it."""
        if self.out is None:
            return {"plan_file": "plan.json", "out_stem": "plan"}
        out = self.out
        plan_json = out if out.suffix.lower() == ".json" else out.with_suffix(".json")
        return {"plan_file": str(plan_json), "out_stem": str(out.with_suffix(""))}


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


def show_plan(plan: Plan, output: PlanOutputFlags, *, as_json: bool) -> None:
    """Write the plan and its plots, and print it (or its JSON) and where they went."""
    from alphagate.report.plan import render_plan_console

    out, plot = output.out, output.plot
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
