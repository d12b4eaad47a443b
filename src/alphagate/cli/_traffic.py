"""The load ``simulate`` runs, as an option group (:mod:`alphagate.cli._groups`): closed-loop
users or open-loop rates, and the requests of each level."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import typer

from alphagate.cli._check import bounded, float_list, int_list

__all__ = ["SimLoadFlags"]


@dataclass(frozen=True)
class SimLoadFlags:
    """The simulated load: closed-loop users or open-loop rates, and requests per level."""

    concurrency: Annotated[
        str | None, typer.Option("--concurrency", "-c", help="Closed-loop users, comma-separated.")
    ] = None
    rate: Annotated[
        str | None, typer.Option("--rate", help="Open-loop request rates (req/s), comma-separated.")
    ] = None
    burstiness: Annotated[
        float,
        bounded(
            "--burstiness", lo=0.01, hi=100.0, help="Gamma shape of open-loop gaps (1 = Poisson)."
        ),
    ] = 1.0
    think_time: Annotated[
        float,
        bounded("--think-time", lo=0.0, hi=3600.0, help="Closed-loop think time (s)."),
    ] = 0.0
    num_requests: Annotated[
        int | None,
        typer.Option(
            "--num-requests",
            "-n",
            min=1,
            max=10_000_000,
            help="Requests per load level (default: 16 per user, >= 200).",
        ),
    ] = None

    def concurrencies(self) -> tuple[int, ...] | None:
        """The closed-loop levels (the default ones when no load is given; None for rates)."""
        if self.rate:
            return None
        return tuple(int_list(self.concurrency or "1,16,64,256", "--concurrency", 1, 65_536))

    def rates(self) -> tuple[float, ...] | None:
        return tuple(float_list(self.rate, "--rate", 1e-6, 1e6)) if self.rate else None

    def top(self) -> int:
        """The largest closed-loop level given (64 when none is)."""
        if not self.concurrency:
            return 64
        return max(int_list(self.concurrency, "--concurrency", 1, 65_536))
