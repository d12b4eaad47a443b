"""Sweep to the knee: the highest load at which a target still meets its latency SLO.

The search is guidellm's sweep-to-saturation and AIPerf's adaptive search with SLA thresholds,
reduced to one rule: run the lowest load, double it until the SLO breaks (or the highest load is
reached), then bisect between the last load that met the SLO and the first that did not until they
are adjacent concurrencies, or within ``tolerance`` of each other (relative). The knee is the last
load that met it. Every target (baseline, candidate) is searched on its own, so the ratio of their
knees is the capacity gained — or lost — by turning speculation on at that SLO.

Pure: :func:`ladder` gives the doubling loads and :class:`KneeSearch` proposes each bisection load
from the outcomes so far; :func:`alphagate.bench.run.run_bench` runs them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Literal

from pydantic import Field, ValidationError, model_validator

from alphagate.core.errors import ConfigError
from alphagate.core.records import Frozen

__all__ = [
    "Knee",
    "KneeSearch",
    "KneeSweep",
    "Sweep",
    "SweepSummary",
    "ladder",
    "parse_sweep",
]


class Sweep(Frozen):
    """``concurrency:LO..HI`` (closed loop) or ``rate:LO..HI`` (open loop, requests/s)."""

    kind: Literal["concurrency", "rate"]
    lo: float = Field(gt=0, allow_inf_nan=False)
    hi: float = Field(gt=0, allow_inf_nan=False)
    tolerance: float = Field(
        default=0.1,
        gt=0,
        le=1,
        allow_inf_nan=False,
        description="bisection stops when the first failing load ÷ the knee ≤ 1 + tolerance",
    )

    @model_validator(mode="after")
    def _range(self) -> Sweep:
        if self.lo > self.hi:
            raise ValueError(f"the range {self.lo:g}..{self.hi:g} is empty (LO > HI)")
        if self.kind == "concurrency" and (self.lo != int(self.lo) or self.hi != int(self.hi)):
            raise ValueError("a concurrency range takes whole numbers")
        return self

    def snap(self, load: float) -> float:
        """A load as it is run: a whole concurrency, or a rate to 3 significant figures."""
        if self.kind == "concurrency":
            return float(round(load))
        return float(f"{load:.3g}")

    def label(self, load: float) -> str:
        return f"c{load:g}" if self.kind == "concurrency" else f"r{load:g}"


def parse_sweep(text: str, tolerance: float = 0.1) -> Sweep:
    """``concurrency:1..512`` or ``rate:0.5..64`` → :class:`Sweep`; raises ConfigError."""
    m = re.fullmatch(r"\s*(concurrency|rate|c|r)\s*:\s*([0-9.eE+]+)\s*\.\.\s*([0-9.eE+]+)\s*", text)
    if m is None:
        raise ConfigError(f"{text!r}: expected concurrency:LO..HI or rate:LO..HI")
    kind: Literal["concurrency", "rate"] = "rate" if m.group(1) in ("rate", "r") else "concurrency"
    try:
        lo, hi = float(m.group(2)), float(m.group(3))
    except ValueError:
        raise ConfigError(f"{text!r}: LO and HI must be numbers") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and lo > 0):
        raise ConfigError(f"{text!r}: LO and HI must be positive numbers")
    try:
        return Sweep(kind=kind, lo=lo, hi=hi, tolerance=tolerance)
    except ValidationError as exc:
        msg = exc.errors()[0]["msg"].removeprefix("Value error, ")
        raise ConfigError(f"{text!r}: {msg}") from None


def ladder(sweep: Sweep) -> list[float]:
    """The doubling loads: LO, 2·LO, 4·LO, … and HI last (shape ``[⌈log2(HI/LO)⌉ + 1]``)."""
    out = [sweep.snap(sweep.lo)]
    while out[-1] < sweep.hi:
        out.append(min(sweep.snap(out[-1] * 2), sweep.hi))
    return out


class Knee(Frozen):
    """Where one target stops meeting the SLO."""

    target: str
    knee: float | None = Field(
        description="the highest load that met the SLO below the first that failed (None: even "
        "the lowest load failed)"
    )
    first_failing: float | None = Field(
        description="the lowest load that failed the SLO (None: every load up to HI met it)"
    )
    loads: list[float] = Field(description="the loads run, in order")
    met: list[bool] = Field(description="whether each of those loads met the SLO")

    @property
    def capped(self) -> bool:
        """Every load up to HI met the SLO: the knee is at least HI."""
        return self.first_failing is None and self.knee is not None


class SweepSummary(Frozen):
    """The knee of every target and, for an A/B, candidate ÷ baseline."""

    sweep: Sweep
    knees: list[Knee]
    knee_ratio: float | None = Field(
        default=None,
        description="candidate knee ÷ baseline knee: the capacity ratio at the SLO (a bound when "
        "either knee is capped at HI)",
    )


class KneeSearch:
    """The outcomes of one target's loads, and the next load to bisect."""

    def __init__(self, sweep: Sweep, target: str) -> None:
        self.sweep = sweep
        self.target = target
        self.loads: list[float] = []
        self.met: list[bool] = []

    def record(self, load: float, met: bool) -> None:
        self.loads.append(load)
        self.met.append(met)

    @property
    def failed_once(self) -> bool:
        return not all(self.met)

    def bracket(self) -> tuple[float | None, float | None]:
        """(the highest load that met the SLO below the lowest that failed, that failing load)."""
        fails = [x for x, ok in zip(self.loads, self.met, strict=True) if not ok]
        first_fail = min(fails) if fails else None
        passes = [
            x
            for x, ok in zip(self.loads, self.met, strict=True)
            if ok and (first_fail is None or x < first_fail)
        ]
        return (max(passes) if passes else None), first_fail

    def next_load(self) -> float | None:
        """The midpoint of the bracket, or None when the knee is found to the tolerance."""
        lo, hi = self.bracket()
        if lo is None or hi is None:
            return None
        if hi <= lo * (1.0 + self.sweep.tolerance):
            return None
        mid = self.sweep.snap((lo + hi) / 2.0)
        return mid if lo < mid < hi else None

    def knee(self) -> Knee:
        lo, hi = self.bracket()
        return Knee(
            target=self.target,
            knee=lo,
            first_failing=hi,
            loads=list(self.loads),
            met=list(self.met),
        )


#: runs one target at one load; returns whether the level met the SLO, or None when the run was
#: stopped (a limit, a full disk) and its outcome does not count
LevelRun = Callable[[str, float], Awaitable[bool | None]]


class KneeSweep:
    """The knee search of every target: the doubling loads shared (each load runs every target
    in turn until each has failed once, so that every doubling load has an A/B comparison), then
    each target bisected on its own, the targets taking turns."""

    def __init__(self, sweep: Sweep, targets: Sequence[str]) -> None:
        self.sweep = sweep
        self.searches = {t: KneeSearch(sweep, t) for t in targets}

    async def run(self, run_level: LevelRun) -> SweepSummary:
        for load in ladder(self.sweep):
            if all(s.failed_once for s in self.searches.values()):
                break
            for target, search in self.searches.items():
                met = await run_level(target, load)
                if met is None:
                    return self.summary()
                search.record(load, met)
        while True:
            todo = {t: s.next_load() for t, s in self.searches.items()}
            bisect = [(t, x) for t, x in todo.items() if x is not None]
            if not bisect:
                return self.summary()
            for target, mid in bisect:
                met = await run_level(target, mid)
                if met is None:
                    return self.summary()
                self.searches[target].record(mid, met)

    def summary(self) -> SweepSummary:
        """The knees found so far (after an interrupted run: from the loads that finished)."""
        knees = [s.knee() for s in self.searches.values()]
        by = {k.target: k.knee for k in knees}
        base, cand = by.get("baseline"), by.get("candidate")
        return SweepSummary(
            sweep=self.sweep,
            knees=knees,
            knee_ratio=None if base is None or cand is None else cand / base,
        )
