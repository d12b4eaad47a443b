"""A tail figure's change between baseline and candidate, taken apart by mechanism.

Each mechanism has a counterfactual that removes it (:data:`~alphagate.explain.records.MECHANISMS`):
rejection streaks (each request's tokens spread evenly over its chunks), verify-step growth (every
step priced as a decode step), prefill interference (prefills apart from decodes) and capacity
(the candidate holding the baseline's batch). For every subset S of them, the same requests are
replayed with S removed from both sides where it exists on both (prefills, the largest batch) and
from the candidate alone where only it has it, giving

    g(S) = log(candidate figure ÷ baseline figure) with S removed.

g(∅) is the simulated change; g(all) is what is left with every mechanism gone — speculation's
mean yield at a decode step's price, the *gain* (below 1×). Each mechanism's factor is exp of its
Shapley value (Shapley 1953) in the game v(S) = g(∅) − g(S), so that

    candidate ÷ baseline = gain × Π factors        (simulated; exact)

and the order in which mechanisms are removed does not matter. A mechanism's share is its log
factor over the sum of the rising ones'; the measured change over the simulated one is the
residual, reported beside them. Intervals come from resampling the requests (the same draw for every replay),
and two mechanisms whose bootstrap values move against each other (correlation below
:data:`INSEPARABLE`), each share loose (an interval :data:`WIDE` or wider) and their sum's not,
are reported together: the data fix their sum, not their split.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from alphagate.explain.records import MECHANISMS, Factor, Mechanism
from alphagate.measure.estimate import Interval

__all__ = ["INSEPARABLE", "Attribution", "attribute", "interval", "shapley"]

FloatArray = npt.NDArray[np.float64]
#: bootstrap correlation below which two mechanisms' values may be reported together
INSEPARABLE = -0.9
#: ... when each one's share interval is at least this wide and their sum's half as wide or less
WIDE = 0.25


def interval(
    x: FloatArray, transform: Callable[[FloatArray], FloatArray] | None = None
) -> Interval | None:
    """The 95% percentile interval of bootstrap replicates ``x[1:]`` (row 0 is the point)."""
    boots = x[1:]
    boots = boots[np.isfinite(boots)]
    if boots.size < 20:
        return None
    lo, hi = np.quantile(boots, [0.025, 0.975])
    if transform is not None:
        lo, hi = transform(np.asarray(lo)), transform(np.asarray(hi))
    return Interval(low=float(lo), high=float(hi))


def shapley(
    players: Sequence[Mechanism], g: Callable[[frozenset[Mechanism]], FloatArray]
) -> dict[Mechanism, FloatArray]:
    """Shapley values of the removal game v(S) = g(∅) − g(S): each player's average over the
    orders of removal of what removing it takes off g."""
    n = len(players)
    out = {}
    for m in players:
        others = [p for p in players if p != m]
        total: FloatArray | float = 0.0
        for size in range(n):
            weight = math.factorial(size) * math.factorial(n - size - 1) / math.factorial(n)
            for subset in itertools.combinations(others, size):
                s = frozenset(subset)
                total = total + weight * (g(s) - g(s | {m}))
        out[m] = np.asarray(total, dtype=np.float64)
    return out


@dataclass(frozen=True)
class Attribution:
    """One figure's change taken apart (log values per resample: row 0 the point)."""

    simulated: FloatArray  # g(∅)
    gain: FloatArray  # g(all)
    residual: FloatArray  # measured − simulated
    factors: list[Factor]
    inseparable: list[str]


def _width(x: FloatArray) -> float:
    iv = interval(x)
    return math.inf if iv is None else iv.high - iv.low


def _pairs_together(
    phi: dict[Mechanism, FloatArray], shares: dict[Mechanism, FloatArray]
) -> list[tuple[Mechanism, Mechanism]]:
    """Pairs of rising mechanisms the resamples cannot tell apart: their values move against
    each other, each one's share is loose, and their sum's is not."""
    out = []
    for a, b in itertools.combinations(list(phi), 2):
        if phi[a][0] <= 0 or phi[b][0] <= 0 or phi[a][1:].std() == 0 or phi[b][1:].std() == 0:
            continue
        corr = float(np.corrcoef(phi[a][1:], phi[b][1:])[0, 1])
        loose = min(_width(shares[a]), _width(shares[b]))
        if corr < INSEPARABLE and loose >= WIDE and _width(shares[a] + shares[b]) <= loose / 2:
            out.append((a, b))
    return out


def _factor(mechanisms: list[Mechanism], phi: FloatArray, share: FloatArray) -> Factor:
    label = " + ".join(MECHANISMS[m][0] for m in mechanisms)
    return Factor(
        mechanisms=mechanisms,
        label=label,
        factor=float(np.exp(phi[0])),
        factor_interval=interval(phi, np.exp),
        share=float(share[0]) if phi[0] > 0 else None,
        share_interval=interval(share) if phi[0] > 0 else None,
    )


def _groups(
    phi: dict[Mechanism, FloatArray], shares: dict[Mechanism, FloatArray]
) -> tuple[list[list[Mechanism]], list[str]]:
    """The mechanisms as reported: singletons, and the pairs the data cannot separate merged."""
    groups: list[list[Mechanism]] = [[m] for m in phi]
    notes = []
    for a, b in _pairs_together(phi, shares):
        ga = next(g for g in groups if a in g)
        gb = next(g for g in groups if b in g)
        if ga is not gb:
            ga.extend(gb)
            groups.remove(gb)
            notes.append(
                f"{MECHANISMS[a][0]} and {MECHANISMS[b][0]}: the resamples trade one against the "
                "other, so only their sum is reported"
            )
    return groups, notes


def attribute(
    players: Sequence[Mechanism],
    g: Callable[[frozenset[Mechanism]], FloatArray],
    measured: FloatArray,
) -> Attribution:
    """The change of a figure taken apart over ``players`` with the replays' ``g`` (see the
    module docstring); ``measured``: the measured log ratio per resample, whose difference from
    the simulated one is the residual."""
    phi = shapley(players, g)
    simulated = g(frozenset())
    rising = sum((np.maximum(v, 0.0) for v in phi.values()), start=np.zeros_like(simulated))
    with np.errstate(invalid="ignore", divide="ignore"):
        shares = {
            m: np.where(rising > 0, np.maximum(v, 0.0) / rising, np.nan) for m, v in phi.items()
        }
    groups, notes = _groups(phi, shares)
    factors = [
        _factor(
            group,
            np.sum([phi[m] for m in group], axis=0),
            np.sum([shares[m] for m in group], axis=0),
        )
        for group in groups
    ]
    factors.sort(key=lambda f: (f.share is None, -(f.share or 0.0), f.factor))
    return Attribution(simulated, g(frozenset(players)), measured - simulated, factors, notes)
