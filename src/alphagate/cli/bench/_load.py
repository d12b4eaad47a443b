"""How hard bench pushes, as an option group (:mod:`alphagate.cli._groups`): closed-loop levels,
an open-loop rate, or a sweep to the knee under an SLO; requests per level and repeats."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

import typer

from alphagate.cli._check import bounded, config_error, flag_errors, int_list

if TYPE_CHECKING:
    from alphagate.bench.config import Level
    from alphagate.bench.slo import SLO
    from alphagate.bench.sweep import Sweep

__all__ = ["LoadFlags"]

_SLO_HELP = (
    "Latency bounds per request in ms, e.g. itl_per_token_p99_ms=50,ttft_ms=2000 (vLLM's "
    "ttft:500 tpot:50 also works): ttft_ms, tpot_ms, e2e_ms, itl_per_token_p99_ms (the request's "
    "own P99 of chunk gap ÷ tokens), itl_per_token_max_ms. A request is good when it completed "
    "within every bound; goodput = good requests/s (and their tokens/s) per level and, in an A/B, "
    "candidate ÷ baseline."
)


@dataclass(frozen=True)
class LoadFlags:
    """The load: levels, a rate or a sweep, and the requests of each level."""

    concurrency: Annotated[
        str | None,
        typer.Option(
            "--concurrency",
            "-c",
            "--max-concurrency",
            help="Closed-loop levels, e.g. 1,16,64 (with --rate: the cap on requests in flight).",
        ),
    ] = None
    rate: Annotated[
        float | None,
        bounded(
            "--rate", "--request-rate", lo=1e-6, hi=1e6, help="Open-loop request rate (req/s)."
        ),
    ] = None
    burstiness: Annotated[
        float,
        bounded("--burstiness", lo=0.01, hi=100.0),
    ] = 1.0
    num_prompts: Annotated[
        int | None,
        typer.Option(
            "--num-prompts",
            "-n",
            min=1,
            max=10_000_000,
            help="Requests per level (default 200; a trace: all of its requests).",
        ),
    ] = None
    repeats: Annotated[
        int,
        typer.Option(
            "--repeats",
            min=1,
            max=100,
            help="Run each level N times per target; an A/B alternates them (baseline, "
            "candidate, candidate, baseline, …) and its ratios get intervals from the spread "
            "between runs, which one run cannot show (gate needs ≥ 2).",
        ),
    ] = 1
    duration: Annotated[
        float | None,
        bounded("--duration", lo=0.001, help="Stop sending after this many seconds per level."),
    ] = None
    warmup: Annotated[
        int,
        typer.Option(
            "--warmup", min=0, help="First N requests per level excluded from statistics."
        ),
    ] = 0
    slo: Annotated[str | None, typer.Option("--slo", help=_SLO_HELP)] = None
    slo_attainment: Annotated[
        float,
        bounded(
            "--slo-attainment",
            lo=0.01,
            hi=1.0,
            help="Share of a level's requests that must be good for the level to meet the SLO "
            "(0.99: with one bound, its P99 is within it).",
        ),
    ] = 0.99
    sweep: Annotated[
        str | None,
        typer.Option(
            "--sweep",
            help="Find each target's knee under --slo: concurrency:LO..HI or rate:LO..HI; doubles "
            "the load from LO until the SLO breaks, then bisects.",
        ),
    ] = None
    sweep_tolerance: Annotated[
        float,
        bounded(
            "--sweep-tolerance",
            lo=0.001,
            hi=1.0,
            help="Bisection stops when first failing load ÷ knee ≤ 1 + this (or adjacent "
            "concurrencies).",
        ),
    ] = 0.1

    def slo_and_sweep(self) -> tuple[SLO | None, Sweep | None]:
        """The SLO and the sweep, parsed and checked."""
        from alphagate.bench.config import check_sweep
        from alphagate.bench.slo import parse_slo
        from alphagate.bench.sweep import parse_sweep
        from alphagate.core.errors import ConfigError

        the_slo = the_sweep = None
        try:
            the_slo = None if self.slo is None else parse_slo(self.slo, self.slo_attainment)
        except ConfigError as exc:
            config_error(exc, "--slo")
        try:
            the_sweep = (
                None if self.sweep is None else parse_sweep(self.sweep, self.sweep_tolerance)
            )
        except ConfigError as exc:
            config_error(exc, "--sweep")
        if the_sweep is not None:
            with flag_errors():
                check_sweep(the_sweep)
        return the_slo, the_sweep

    def levels(self, time_scale: float | None, *, swept: bool) -> tuple[Level, ...]:
        """The fixed levels (none when a sweep chooses them); a trace's at ``time_scale``."""
        from alphagate.bench.config import MAX_CONCURRENCY, levels_for

        if swept:
            return ()
        conc = self.concurrency
        users = int_list(conc, "--concurrency", 1, MAX_CONCURRENCY) if conc is not None else None
        return levels_for(users, self.rate, time_scale)

    def config_fields(self) -> dict[str, Any]:
        """The :class:`~alphagate.bench.config.BenchConfig` fields these flags give (with
        the levels and the number of prompts, which depend on the rest)."""
        return {
            "duration_s": self.duration,
            "burstiness": self.burstiness,
            "warmup": self.warmup,
            "repeats": self.repeats,
        }
