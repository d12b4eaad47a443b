"""``calibrate --url``: the live measurement sweep's options, as an option group
(:mod:`alphagate.cli._groups`), and the sweep run from the terminal — a spinner with its
progress, and each server's records kept as a bench result folder."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from alphagate.cli._app import err_console, json_dumps, status
from alphagate.cli._check import bounded, config_error, fail, int_list
from alphagate.cli._files import atomic_write_text
from alphagate.cli._options import api_key_option

if TYPE_CHECKING:
    from alphagate.calibrate.observations import Observation
    from alphagate.calibrate.sweep import LiveSweep, SweepRun

__all__ = ["SweepFlags", "run_sweep"]


@dataclass(frozen=True)
class SweepFlags:
    """The servers a live sweep measures, and the levels and requests it sends them."""

    url: Annotated[
        list[str] | None,
        typer.Option(
            "--url",
            help="Measure a live OpenAI-compatible server (repeat: one per configuration, e.g. a "
            "baseline and a speculative server). K and α by position come from its /metrics.",
        ),
    ] = None
    metrics_url: Annotated[
        list[str] | None,
        typer.Option("--metrics-url", help="Each --url's metrics endpoint (default URL/metrics)."),
    ] = None
    served_model: Annotated[
        str | None,
        typer.Option("--served-model", help="Model name to send (default: the server's first)."),
    ] = None
    api_key: Annotated[
        str | None,
        api_key_option("Bearer key for --url (or $ALPHAGATE_API_KEY, as bench and twin read it)."),
    ] = None
    concurrency: Annotated[
        str,
        typer.Option("--concurrency", "-c", help="Closed-loop levels of the live sweep."),
    ] = "1,4,16"
    requests_per_user: Annotated[
        int,
        typer.Option(
            "--requests-per-user", min=1, max=10_000, help="Requests per user at every level."
        ),
    ] = 8
    prompt_tokens: Annotated[
        int, typer.Option("--prompt-tokens", min=1, max=1_000_000, help="Prompt words per request.")
    ] = 512
    output_tokens: Annotated[
        int,
        typer.Option(
            "--output-tokens", min=2, max=1_000_000, help="Tokens per request (ignore_eos)."
        ),
    ] = 128
    dataset: Annotated[
        str | None,
        typer.Option(
            "--dataset",
            help="Prompts for the live levels (JSONL or ShareGPT, as alphagate bench reads); "
            "default: --prompt-tokens synthetic words. Acceptance depends on the prompts.",
        ),
    ] = None
    prefill_probe: Annotated[
        int,
        typer.Option(
            "--prefill-probe-tokens",
            min=0,
            max=1_000_000,
            help="Words in the prompts of the prefill probe (8 requests at concurrency 1 whose "
            "TTFT is one long prefill; 0 = none).",
        ),
    ] = 2048
    timeout: Annotated[
        float | None,
        bounded(
            "--timeout",
            lo=0.01,
            hi=86_400.0,
            help="Seconds one request of the live sweep may take, and the limit of a connect or "
            "a /metrics read (default: 30 + 0.25 per output token).",
        ),
    ] = None

    def sweep(self, seed: int) -> LiveSweep:
        """The sweep these flags describe, checked (its warnings printed)."""
        from pydantic import SecretStr, ValidationError

        from alphagate.calibrate.sweep import LiveSweep
        from alphagate.core.errors import ConfigError

        concurrencies = int_list(self.concurrency, "--concurrency", 1, 65_536)
        try:
            sweep = LiveSweep(
                urls=tuple(self.url or ()),
                metrics_urls=tuple(self.metrics_url) if self.metrics_url else None,
                model=self.served_model,
                api_key=SecretStr(self.api_key) if self.api_key else None,
                concurrencies=tuple(concurrencies),
                requests_per_user=self.requests_per_user,
                prompt_tokens=self.prompt_tokens,
                output_tokens=self.output_tokens,
                dataset=self.dataset,
                prefill_probe_tokens=self.prefill_probe or None,
                seed=seed,
                timeout_s=self.timeout,
            )
            warnings = sweep.warnings()
        except ValidationError as exc:
            config_error(exc, "--url")
        except ConfigError as exc:
            fail(str(exc), "--url")
        for why in warnings:
            err_console.print(f"[yellow]warning: {why}[/yellow]", markup=True, highlight=False)
        return sweep


def run_sweep(sweep: LiveSweep, bench_out: Path | None, *, quiet: bool) -> list[Observation]:
    """The live sweep's observations; its records kept under ``bench_out`` (those of the
    completed levels when it is interrupted: :class:`SweepInterrupted` is raised again)."""
    from alphagate.calibrate.sweep import SweepInterrupted, run_live_sweep
    from alphagate.core.errors import ConfigError

    with status("calibrating…", quiet) as spin:
        progress = _Progress(sweep, spin)
        try:
            observations, runs = run_live_sweep(
                sweep, on_level=progress.level, on_record=progress.record
            )
        except ConfigError as exc:
            fail(str(exc), "--url")
        except SweepInterrupted as stop:
            if bench_out is not None and stop.runs:
                _keep(stop.runs, bench_out)
            raise
    if bench_out is not None:
        _keep(runs, bench_out)
    return observations


class _Progress:
    """The spinner's line: server, level and requests done of the level's."""

    def __init__(self, sweep: LiveSweep, spin: object) -> None:
        self.sweep, self.spin = sweep, spin
        self.url = self.label = ""
        self.done = 0

    def level(self, url: str, label: str) -> None:
        self.url, self.label, self.done = url, label, 0

    def record(self, _: object) -> None:
        self.done += 1
        update = getattr(self.spin, "update", None)
        if update is None:
            return
        of = self.sweep.requests(int(self.label[1:])) if self.label.startswith("c") else 2
        update(f"calibrating {self.url}: level {self.label}, {self.done}/{of} requests")


def _keep(runs: list[SweepRun], folder: Path) -> None:
    """Each server's run as an alphagate bench result folder (summary.json + requests.jsonl)."""
    for i, run in enumerate(runs):
        sub = folder / f"server-{i}"
        lines = "".join(r.model_dump_json() + "\n" for r in run.records)
        atomic_write_text(sub / "requests.jsonl", lines, "--bench-out")
        result = run.result.model_copy(update={"records_file": "requests.jsonl"})
        atomic_write_text(sub / "summary.json", json_dumps(result.payload()) + "\n", "--bench-out")
