"""Predictions over the step-time model's uncertain constants: the interval each one spans.

:class:`CostDesign` holds one step-time model and the ranges of its coefficients
(:mod:`alphagate.specs.uncertainty`). :meth:`CostDesign.spread` evaluates a prediction — any
function of a step-time model: a speedup, a break-even α, a crossover — at the model's own
coefficients, at each coefficient's two ends with the others held (one at a time), and at the
two corners those effects point to (every coefficient at the end that lowered the prediction;
every one at the end that raised it), then once more with each coefficient flipped at each
corner, kept where it moves that end further. The interval is the lowest and highest seen. With
a calibration's covariance the interval is instead ± two of the prediction's own standard errors
(:meth:`CostDesign._spread_cov`), never wider than the priors around the fitted values.

Why corners and not a sample: a step's time is affine in the coefficients (each multiplies a
sum of terms), so a speedup — tokens per step times the ratio of two step times — is a
linear-fractional function of them, whose extremes over a box of ranges lie at vertices; the
one-at-a-time effects point to them, and the flips catch an effect whose direction turns inside
the box. The direction changes with the batch (a slower target helps speculation where steps are
bandwidth-bound and hurts where the verify pass is compute-bound), which is why the corners are
found per prediction and batch, not once. ``tests/sim/test_uncertainty.py`` checks the corners
against a scrambled Sobol design over the same box, for the closed form and for paired
simulations rerun at the corners.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from alphagate.core.records import Interval
from alphagate.core.traffic import TrafficClass
from alphagate.sim.cost import Coefficients, StepCostModel
from alphagate.sim.predict import (
    breakeven_alpha_model,
    crossover_batch_model,
    model_speedup,
    single_class,
)
from alphagate.specs.uncertainty import EFFICIENCIES, CostRanges
from alphagate.specs.workload import WorkloadConfig

FloatArray = npt.NDArray[np.float64]

__all__ = [
    "CostDesign",
    "Spread",
    "breakeven_interval",
    "crossover_interval",
    "scaled_speedup_interval",
]

#: A prediction: a number from a step-time model (``math.inf`` for "none": no α pays, pays at
#: every batch).
Prediction = Callable[[StepCostModel], float]


@dataclass(frozen=True)
class Spread:
    """A prediction at the model's coefficients and the interval over their ranges, with the
    coefficients that give each end (to rerun a simulation there)."""

    value: float
    low: float
    high: float
    low_at: dict[str, float] = field(repr=False)
    high_at: dict[str, float] = field(repr=False)

    def ratio(self) -> tuple[float, float]:
        """(low ÷ value, high ÷ value): how far each end lies from the value, as factors."""
        if not (math.isfinite(self.value) and self.value > 0):
            return 1.0, 1.0
        return self.low / self.value, self.high / self.value


class CostDesign:
    """One step-time model and the ranges of its coefficients."""

    def __init__(
        self,
        cost: StepCostModel,
        ranges: CostRanges,
        rebuild: Callable[[dict[str, float]], StepCostModel] | None = None,
    ) -> None:
        """``rebuild`` prices the deployment with other GPU efficiencies (they enter the terms,
        not the coefficients); without it they are held."""
        self.cost = cost
        self.ranges = ranges
        self._rebuild = rebuild
        self.nominal = {
            **{r.coefficient: r.value for r in ranges.ranges if r.coefficient in EFFICIENCIES},
            **cost.coefficients.as_dict(),
        }
        self._bases: dict[tuple[tuple[str, float], ...], StepCostModel] = {}
        self._models: dict[tuple[tuple[str, float], ...], StepCostModel] = {}

    def at(self, values: dict[str, float]) -> StepCostModel:
        """The model with these constants (the others at their value)."""
        merged = {**self.nominal, **values}
        key = tuple(sorted(merged.items()))
        if key not in self._models:
            eff: dict[str, float] = {n: merged.pop(n) for n in EFFICIENCIES if n in merged}
            self._models[key] = self._base(eff).with_coefficients(Coefficients(**merged))
        return self._models[key]

    def _base(self, eff: dict[str, float]) -> StepCostModel:
        if self._rebuild is None or all(eff[n] == self.nominal.get(n) for n in eff):
            return self.cost
        key = tuple(sorted(eff.items()))
        if key not in self._bases:
            self._bases[key] = self._rebuild(eff)
        return self._bases[key]

    def spread(self, f: Prediction) -> Spread:
        """``f`` over the ranges (see the module's docstring); with a calibration's covariance,
        ± two of ``f``'s own standard errors (:meth:`_spread_cov`)."""
        if self.ranges.covariance is not None:
            fit = self._spread_cov(f)
            if self.ranges.bound is None:
                return fit
            box = CostDesign(self.cost, self.ranges.bound, self._rebuild).spread(f)
            low, high = max(fit.low, box.low), min(fit.high, box.high)
            return Spread(
                fit.value,
                low,
                high,
                fit.low_at if fit.low >= box.low else box.low_at,
                fit.high_at if fit.high <= box.high else box.high_at,
            )
        value = f(self.cost)
        ranges = [
            r for r in self.ranges.varying()
            if self._rebuild is not None or r.coefficient not in EFFICIENCIES
        ]  # fmt: skip
        lows: dict[str, float] = {}
        highs: dict[str, float] = {}
        seen = [value]
        for r in ranges:
            at_low = f(self.at({r.coefficient: r.low}))
            at_high = f(self.at({r.coefficient: r.high}))
            seen += [at_low, at_high]
            lower_first = not at_low > at_high
            lows[r.coefficient] = r.low if lower_first else r.high
            highs[r.coefficient] = r.high if lower_first else r.low
        low, high = f(self.at(lows)), f(self.at(highs))
        # one pass of flips: the direction of an effect can turn between the value and a corner
        for r in ranges:
            other = {r.low: r.high, r.high: r.low}
            trial = {**lows, r.coefficient: other[lows[r.coefficient]]}
            if (x := f(self.at(trial))) < low:
                lows, low = trial, x
            trial = {**highs, r.coefficient: other[highs[r.coefficient]]}
            if (x := f(self.at(trial))) > high:
                highs, high = trial, x
        seen += [low, high]
        low_at, high_at = {**self.nominal, **lows}, {**self.nominal, **highs}
        finite = [x for x in seen if not math.isnan(x)]
        if not finite:
            nan = float("nan")
            return Spread(value, nan, nan, low_at, high_at)
        return Spread(value, min(finite), max(finite), low_at, high_at)

    def _spread_cov(self, f: Prediction) -> Spread:
        """With the coefficients' covariance Σ: the gradient g of ``f`` at the fitted values (a
        forward difference of a hundredth of each standard error), σ² = gᵀΣg, and ``f`` at the
        two points θ ± 2Σg/σ — where, to first order, ``f`` is lowest and highest on the
        two-standard-error ellipsoid of the fit (clipped to the coefficients' bounds)."""
        value = f(self.cost)
        names = self.ranges.covariance_names
        cov = np.asarray(self.ranges.covariance, dtype=np.float64)
        sd = np.sqrt(np.clip(np.diag(cov), 0.0, None))
        g = np.zeros(len(names))
        for i, name in enumerate(names):
            if sd[i] > 0:
                h = 0.01 * sd[i]
                g[i] = (f(self.at({name: self.nominal[name] + h})) - value) / h
        var = float(g @ cov @ g)
        if not (var > 0 and math.isfinite(var)):
            return Spread(value, value, value, dict(self.nominal), dict(self.nominal))
        step = 2.0 * (cov @ g) / math.sqrt(var)

        def point(sign: float) -> dict[str, float]:
            out = dict(self.nominal)
            for i, name in enumerate(names):
                floor = 1e-6 if name.endswith("_scale") else 0.0
                out[name] = max(floor, self.nominal[name] + sign * float(step[i]))
            return out

        nominal = dict(self.nominal)
        seen = [(value, nominal), *((f(self.at(p)), p) for p in (point(1.0), point(-1.0)))]
        seen = [(x, p) for x, p in seen if not math.isnan(x)]
        # both ends may fall on one side of the value (f curves over the ellipsoid): an end that
        # does not move past the value stays at the fitted coefficients
        low, low_at = min(seen, key=lambda t: t[0])
        high, high_at = max(seen, key=lambda t: t[0])
        return Spread(value, low, high, low_at, high_at)

    def corners(self, f: Prediction) -> tuple[StepCostModel, StepCostModel]:
        """The models at the two corners of ``f``: lowest, highest."""
        s = self.spread(f)
        return self.at(s.low_at), self.at(s.high_at)


#: the single-class α whose speedup's corners price a break-even α's range: the break-even α is
#: lowest where speculation pays most, whatever the α, and 0.6 sits mid-range
_CORNER_ALPHA = 0.6


def _open(x: float) -> float | None:
    return None if math.isinf(x) else x


def scaled_speedup_interval(
    design: CostDesign,
    simulated: float | None,
    classes: tuple[TrafficClass, ...],
    k: int,
    batch: float,
    workload: WorkloadConfig,
) -> Interval | None:
    """A simulated speedup over the ranges, without simulating again: the simulated value times
    the closed form's ends over its own value at this batch (widened by a calibration's
    residual, :meth:`CostRanges.widened`). ``tests/sim/test_uncertainty.py`` measures it against
    paired simulations rerun at the corners."""
    if simulated is None or not math.isfinite(simulated):
        return None
    lo, hi = design.spread(lambda m: model_speedup(m, classes, k, batch, workload)).ratio()
    low, high = design.ranges.widened(simulated, simulated * lo, simulated * hi)
    return Interval(low=low, high=high)


def breakeven_interval(
    design: CostDesign,
    k: int,
    batch: float,
    workload: WorkloadConfig,
    lengths: FloatArray | None = None,
) -> Interval:
    """The closed form's break-even α at ``batch`` over the ranges (``lengths``: of drafts of
    variable length); an open high end: no α pays there."""

    def be(m: StepCostModel) -> float:
        x = breakeven_alpha_model(m, k, batch, workload, lengths)
        return math.inf if x is None else x

    lo_m, hi_m = design.corners(
        lambda m: model_speedup(m, single_class(_CORNER_ALPHA, lengths), k, batch, workload)
    )
    vals = [be(design.cost), be(lo_m), be(hi_m)]
    return Interval(low=_open(min(vals)), high=_open(max(vals)))


def crossover_interval(
    design: CostDesign,
    classes: tuple[TrafficClass, ...],
    k: int,
    workload: WorkloadConfig,
    b_max: int,
    nominal: float | None,
) -> Interval:
    """The crossover batch over the ranges, from the corners of the speedup at the nominal
    crossover; an open high end: pays up to the largest batch."""
    at = float(b_max if nominal is None else nominal)
    lo_m, hi_m = design.corners(lambda m: model_speedup(m, classes, k, at, workload))
    vals = [
        math.inf if x is None else x
        for x in (nominal, *(crossover_batch_model(m, classes, k, workload, b_max)
                             for m in (lo_m, hi_m)))
    ]  # fmt: skip
    return Interval(low=_open(min(vals)), high=_open(max(vals)))
