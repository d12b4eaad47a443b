"""``alphagate explain``: why a speculative candidate's P99 moved against its baseline in a bench
A/B, by mechanism, and the remedies ranked by their predicted effect."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from alphagate.cli._app import JsonOpt, app, console, json_dumps, print_json, status
from alphagate.cli._check import DEPLOYMENT_FLAGS, bounded, config_error, fail
from alphagate.cli._files import atomic_write_text
from alphagate.cli._groups import takes_groups
from alphagate.cli._options import CalibrationOpt, DeploymentFlags, SeedOpt, calibrated_deployment
from alphagate.cli._paths import check_outputs
from alphagate.specs.calibration import CostOverrides

if TYPE_CHECKING:
    from alphagate.bench.records import BenchResult, RequestRecord
    from alphagate.measure.estimate import AcceptanceEstimate

__all__ = ["explain_cmd"]


@app.command("explain", short_help="Why P99 got worse in an A/B, and what fixes it.")
@takes_groups
def explain_cmd(
    ctx: typer.Context,
    summary: Annotated[
        Path,
        typer.Argument(
            metavar="BENCH_AB_SUMMARY",
            help="A bench A/B's summary.json (its requests.jsonl beside it).",
        ),
    ],
    metrics: Annotated[
        list[Path] | None,
        typer.Option(
            "--metrics",
            help="Saved /metrics scrapes of the candidate, before and after the run (repeated): "
            "its acceptance by position, when the run has no per-request counts or counters.",
        ),
    ] = None,
    calibration: CalibrationOpt = None,
    deploy: DeploymentFlags = DeploymentFlags(),
    cost: CostOverrides = CostOverrides(),
    level: Annotated[
        list[str] | None,
        typer.Option("--level", help="Explain this load level only (repeated; default: all)."),
    ] = None,
    p99_budget: Annotated[
        float,
        bounded(
            "--p99-budget",
            lo=0.5,
            hi=100.0,
            help="A remedy fixes the tail when its predicted P99 ITL per token and P99 TTFT are "
            "each at most this × the baseline's measured one.",
        ),
    ] = 1.0,
    bootstrap: Annotated[
        int,
        typer.Option(
            "--bootstrap", min=50, max=5000, help="Resamples of the requests per interval."
        ),
    ] = 200,
    seed: SeedOpt = 0,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write the results JSON here.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Take the change in P99 and P99.9 ITL per token and in P99 TTFT between the baseline and
    the candidate of a bench A/B apart, level by level: rejection streaks, verify-step growth,
    prefill interference, capacity, and what the simulator leaves unexplained (the client) — each
    a factor with its share of the rise and a 95% interval over resamples of the requests, from
    the simulator replaying the same requests with each mechanism removed. Then the remedies (K by
    batch size, speculation off above a concurrency, a smaller K, another
    max_num_batched_tokens, more KV room, a class routed away, a better head), each replayed on
    the same requests, ranked, with the engine flags that apply it.

    The step-time model is the deployment's (--model, --gpu, …: give the server's, including
    --max-num-batched-tokens and --method), or a calibration profile's."""
    from alphagate.core.errors import ConfigError
    from alphagate.explain import ExplainConfig, explain_bench
    from alphagate.report.explain import remedy_lines, render_explain
    from alphagate.specs import resolve_deployment

    check_outputs([(out, "--out", False)], [summary, *(metrics or [])])
    result, records = _bench(summary)
    scraped = _scraped(metrics) if metrics else None
    dep, profile = calibrated_deployment(ctx, deploy.config(), calibration, cost)
    cfg = ExplainConfig(
        bootstrap=bootstrap, seed=seed, levels=tuple(level) if level else None,
        p99_budget=p99_budget,
    )  # fmt: skip
    try:
        with status("replaying the requests, mechanism by mechanism…", as_json):
            explained = explain_bench(
                result, records, resolve_deployment(dep), source=str(summary), config=cfg,
                calibration=profile.summary() if profile is not None else None, metrics=scraped,
            )  # fmt: skip
    except ConfigError as exc:
        config_error(exc, "--level" if exc.field == "level" else DEPLOYMENT_FLAGS)
    if out is not None:
        atomic_write_text(out, json_dumps(explained.payload()) + "\n", "--out")
    if as_json:
        print_json(explained.payload())
        return
    console.print(render_explain(explained))
    for line in remedy_lines(explained):
        console.print(line, soft_wrap=True, markup=False, highlight=False)


def _bench(summary: Path) -> tuple[BenchResult, list[RequestRecord]]:
    """The A/B and its records, or exit 2 naming what is wrong."""
    from alphagate.cli.report import load_inputs
    from alphagate.report.inputs import BenchInput

    inputs, problems = load_inputs([summary], partial=False)
    if problems:
        fail(problems[0], "BENCH_AB_SUMMARY")
    (item,) = inputs.inputs
    if not isinstance(item, BenchInput) or item.records is None:
        fail(f"{summary}: not a bench summary (alphagate bench writes one)", "BENCH_AB_SUMMARY")
    return item.result, item.records


def _scraped(paths: list[Path]) -> AcceptanceEstimate | None:
    from alphagate.measure.live import measure_scrape_files
    from alphagate.measure.results import MeasureError

    try:
        return measure_scrape_files(paths).overall
    except MeasureError as exc:
        fail(str(exc), "--metrics")
