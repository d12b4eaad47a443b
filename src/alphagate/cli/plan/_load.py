"""The load a ``plan`` is for and the tail it must keep, as an option group
(:mod:`alphagate.cli._groups`): the target and peak concurrency, the P99 SLO and the P99
budget."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

import typer

from alphagate.cli._check import bounded

__all__ = ["PlanLoadFlags"]


@dataclass(frozen=True)
class PlanLoadFlags:
    """The concurrencies the plan decides over, and the P99 it must hold there."""

    concurrency: Annotated[
        int, typer.Option("--concurrency", "-c", min=1, max=65_536, help="Target concurrency.")
    ]
    peak: Annotated[
        int | None,
        typer.Option(
            "--peak-concurrency", min=1, max=65_536, help="Peak concurrency (default: the target)."
        ),
    ] = None
    slo: Annotated[
        float | None,
        bounded("--slo-p99-itl-ms", lo=1e-6, help="P99 ITL-per-token SLO (ms)."),
    ] = None
    p99_budget: Annotated[
        float | None,
        bounded(
            "--p99-budget",
            lo=1.0,
            hi=10.0,
            help="Allow the candidate's P99 ITL per token at the target up to this many times the "
            "baseline's (1.1 = 10% worse); default: not worse.",
        ),
    ] = None

    def fields(self) -> dict[str, Any]:
        """The :class:`~alphagate.plan.PlanRequest` fields these flags give."""
        return {
            "concurrency": self.concurrency,
            "peak_concurrency": self.peak,
            "slo_p99_itl_ms": self.slo,
            "p99_budget": self.p99_budget,
        }
