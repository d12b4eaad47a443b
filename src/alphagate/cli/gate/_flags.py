"""The gate's evidence flags, as option groups (:mod:`alphagate.cli._groups`): the files it
reads, and the live sources it scrapes or queries."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from alphagate.cli._check import bounded, config_error, fail

if TYPE_CHECKING:
    from alphagate.gate import RuleSet
    from alphagate.gate.sources import EvidenceFiles, LiveSource
    from alphagate.plan.records import Plan

__all__ = ["EvidenceFlags", "LiveFlags"]


@dataclass(frozen=True)
class EvidenceFlags:
    """Saved evidence: measure results, bench summaries, vllm bench serve JSON."""

    measure: Annotated[
        list[Path] | None,
        typer.Option(
            "--measure",
            help="alphagate measure results JSON; or saved /metrics scrapes of one server "
            "(before and after, in time order): acceptance over their counters' increase.",
        ),
    ] = None
    bench: Annotated[
        list[Path] | None, typer.Option("--bench", help="An alphagate bench A/B summary.json.")
    ] = None
    baseline: Annotated[
        Path | None, typer.Option("--baseline", help="The baseline run's bench summary.json.")
    ] = None
    candidate: Annotated[
        Path | None, typer.Option("--candidate", help="The candidate run's bench summary.json.")
    ] = None
    vllm_baseline: Annotated[
        Path | None,
        typer.Option("--vllm-baseline", help="vllm bench serve --save-result JSON, baseline."),
    ] = None
    vllm_candidate: Annotated[
        Path | None,
        typer.Option("--vllm-candidate", help="vllm bench serve --save-result JSON, candidate."),
    ] = None

    def paths(self) -> list[Path | None]:
        """Every file given (None where a flag is not)."""
        return [*(self.measure or []), *(self.bench or []), self.baseline, self.candidate,
                self.vllm_baseline, self.vllm_candidate]  # fmt: skip

    @property
    def has_bench(self) -> bool:
        """Whether the evidence includes bench runs (their failures are judged by default)."""
        return bool(self.bench or self.baseline or self.candidate or self.vllm_candidate)

    def files(self, plan: Plan | None, max_age_s: float) -> EvidenceFiles:
        """The files, to be evidence of the ``plan``'s deployment when one is given."""
        from alphagate.gate.sources import EvidenceFiles

        return EvidenceFiles(
            self.measure or [],
            self.bench or [],
            self.baseline,
            self.candidate,
            self.vllm_baseline,
            self.vllm_candidate,
            served_model=None if plan is None else plan.served_model,
            checkpoint=None if plan is None else plan.checkpoint,
            max_age_s=max_age_s,
        )


@dataclass(frozen=True)
class LiveFlags:
    """Live evidence, and how often it is judged."""

    url: Annotated[
        list[str] | None,
        typer.Option("--url", help="Live: a server's /metrics (repeat for replicas)."),
    ] = None
    prometheus: Annotated[
        str | None, typer.Option("--prometheus", help="Live: a Prometheus server.")
    ] = None
    selector: Annotated[
        str, typer.Option("--selector", help="With --prometheus: label matchers.")
    ] = ""
    window: Annotated[
        str,
        typer.Option(
            "--window",
            help="Live: the acceptance window (90s, 10m, 1h) — the range of the Prometheus query; "
            "with --url --watch, the sliding window of scrapes judged at each evaluation; with "
            "--url once, the longest the measurement waits for --min-drafts.",
        ),
    ] = "10m"
    watch: Annotated[
        bool,
        typer.Option("--watch", help="Re-evaluate every --interval; exit 1 at the first fail."),
    ] = False
    interval: Annotated[
        float,
        bounded(
            "--interval", lo=1.0, hi=86_400.0, help="Seconds between evaluations with --watch."
        ),
    ] = 60.0
    duration: Annotated[
        float | None,
        bounded("--duration", lo=1.0, help="With --watch: stop after this many seconds."),
    ] = None

    def source(self, rs: RuleSet, window_s: float) -> LiveSource | None:
        """The live source (None when no flag gives one), checked; a watch needs one."""
        from pydantic import ValidationError

        from alphagate.gate.sources import LiveSource
        from alphagate.measure.results import MeasureError

        try:
            live = (
                LiveSource(self.url or [], self.prometheus, self.selector, window_s, rs)
                if self.url or self.prometheus
                else None
            )
        except ValidationError as exc:
            config_error(exc, "--prometheus/--selector/--url")
        except MeasureError as exc:
            fail(str(exc), "--url")
        if self.watch and live is None:
            fail("--watch needs live evidence: --url or --prometheus", "--watch")
        return live
