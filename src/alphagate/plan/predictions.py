"""Simulator answers a plan needs, for one deployment and workload: speedup, break-even,
crossover, best K, and the batch-size schedule for K.

Two routes, as in ``alphagate simulate``: the step-time model in closed form
(:mod:`alphagate.sim.predict`, fast, used per batch size) and paired simulations (same requests
with and without speculation, used at the plan's concurrency levels). The schedule comes from the
model and is then checked against the simulations: a K that the simulator finds losing at a
level is cut to 0 from that level up, so the table and the schedule never disagree.
"""

from __future__ import annotations

import math
from dataclasses import replace
from functools import cached_property

import numpy as np
import numpy.typing as npt

from alphagate.core.records import Interval
from alphagate.core.traffic import TrafficClass
from alphagate.plan.records import PlanRequest
from alphagate.sim.cost import Coefficients, StepCostModel, build_cost_model
from alphagate.sim.engine import Scenario
from alphagate.sim.predict import (
    MIN_GAIN,
    best_k_model,
    breakeven_alpha_model,
    crossover_batch_model,
    model_speedup,
)
from alphagate.sim.run import BaselineRuns, PairedRun, run_paired
from alphagate.sim.sweep import default_num_requests
from alphagate.sim.uncertainty import (
    CostDesign,
    Spread,
    breakeven_interval,
    crossover_interval,
    scaled_speedup_interval,
)
from alphagate.sim.workload import (
    ClosedLoop,
    RequestSet,
    draft_steps_table,
    pooled_lengths,
    sample_classes,
    sample_requests,
    unconditional_table,
)
from alphagate.specs.deployment import ResolvedDeployment, resolve_deployment
from alphagate.specs.uncertainty import CostRanges, cost_ranges
from alphagate.theory.acceptance import draft_acceptance_rate, mean_acceptance_length
from alphagate.theory.lengths import rate_and_length

__all__ = ["Predictor", "plan_levels"]

FloatArray = npt.NDArray[np.float64]


def _interval(values: list[float | None], ranges: CostRanges | None = None) -> Interval:
    """The lowest and highest of ``values`` (the first is the prediction at the coefficients'
    values), widened by the ranges' step-time residual (:meth:`CostRanges.widened`)."""
    xs = [x for x in values if x is not None and math.isfinite(x)]
    if not xs:
        return Interval(low=None, high=None)
    low, high = min(xs), max(xs)
    point = values[0]
    if ranges is not None and point is not None and math.isfinite(point):
        low, high = ranges.widened(point, low, high)
    return Interval(low=low, high=high)


def _p99_ratio(run: PairedRun) -> float | None:
    off = run.baseline.itl_per_token_ms.p99
    on = run.spec.itl_per_token_ms.p99
    return None if not off or on is None else on / off


#: The concurrencies every plan table shows (below the peak), beside the target and the peak.
STANDARD_LEVELS = (1, 4, 16, 64, 128, 256)


def plan_levels(target: int, peak: int) -> list[int]:
    """Concurrencies of the plan's table: 1, the standard ones below the peak, target and peak."""
    levels = {1, target, peak}
    levels.update(c for c in STANDARD_LEVELS if c < peak)
    return sorted(levels)


class Predictor:
    """Everything a plan asks of the simulator, cached per (concurrency, classes, K). For drafts
    of variable length (suffix decoding) the break-even α and the gate's ρ and τ are at the
    traffic's measured draft lengths (:func:`pooled_lengths`), and K is the measured cap."""

    def __init__(self, req: PlanRequest) -> None:
        self.req = req
        self.workload = req.workload
        self.resolved: ResolvedDeployment = resolve_deployment(
            req.deployment, req.workload, req.peak
        )
        self.cost: StepCostModel = build_cost_model(self.resolved)
        #: the most sequences the server without speculation holds: the crossover search's end
        self.b_max = self.resolved.largest_batch(req.workload, k=0)
        self.ranges: CostRanges = cost_ranges(req.deployment, req.calibration)
        if not req.ranges:
            self.ranges = self.ranges.held()
        self.design = CostDesign(self.cost, self.ranges, self._rebuild)
        self._requests: dict[int, RequestSet] = {}
        self._baselines = BaselineRuns()
        self._paired: dict[
            tuple[int, tuple[TrafficClass, ...], int, int, int, Coefficients | None], PairedRun
        ] = {}
        self.lengths = pooled_lengths(req.workload.classes)
        #: suffix decoding: the cap its profiles were measured at (its K; None: chains)
        self.suffix_cap = None if self.lengths is None else int(self.lengths.size - 1)
        #: the K the speculative server is started with where a batch-size schedule runs some
        #: levels at K = 0 on it (:meth:`launch`; 0: a K = 0 level is a server without
        #: speculation — routed to one, or none launched)
        self.launched = 0

    def launch(self, k: int) -> None:
        """The policy starts the speculative server with K drafts and a schedule that switches
        them off at some batch sizes: its levels at K = 0 are priced on that server."""
        self.launched = k

    def off_cap(self) -> int:
        """The most sequences the launched speculative server holds at a batch where it drafts
        nothing: its KV room beside the drafter's, each sequence holding the lookahead slots
        (:meth:`~alphagate.specs.deployment.BatchRoom.largest_batch`); the baseline's cap when
        none is launched."""
        if self.launched <= 0:
            return self.b_max
        return self.resolved.largest_batch(self.workload, k=0, launched=self.launched)

    def off_simulated(self) -> bool:
        """Whether a level at K = 0 differs from the server without speculation: on a launched
        server it still runs the drafter's first forward every step (vLLM's dynamic speculative
        decoding keeps the drafter's KV in step: ``vllm/v1/spec_decode/llm_base_proposer.py``)
        and holds the drafter's KV and its lookahead slots (:meth:`off_cap`)."""
        return self.launched > 0

    def batch(self, concurrency: int) -> float:
        """The baseline's steady batch at a concurrency: capped by what it holds (the closed
        form caps the speculative arm's on its own, :meth:`StepCostModel.arm_batch`)."""
        return float(self.arm_batch(concurrency, 0))

    def arm_batch(self, concurrency: int, k: int) -> int:
        """The batch one arm runs at a concurrency — K = 0 the server without speculation, else
        the speculative one at K — capped by what its KV room holds; the other users queue."""
        return min(concurrency, self.resolved.largest_batch(self.workload, k=k))

    # ---------------------------------------------------------------- paired simulations
    def _requests_for(self, users: int) -> RequestSet:
        if users not in self._requests:
            self._requests[users] = sample_requests(
                self.workload,
                default_num_requests(users),
                ClosedLoop(users=users),
                np.random.default_rng([self.req.seed, users]),
            )
        return self._requests[users]

    def paired(
        self,
        users: int,
        classes: tuple[TrafficClass, ...],
        k: int,
        cost: StepCostModel | None = None,
    ) -> PairedRun:
        """K drafts vs no speculation on the same requests, ``users`` closed-loop users (with
        ``cost``: priced by that model, on the same requests and random numbers); each arm holds
        its own largest batch."""
        # K = 0: the launched server with its drafts off (its own cap; the baseline's if none)
        cap = self.off_cap() if k == 0 else self.resolved.largest_batch(self.workload, k=k)
        launched = self.launched if k == 0 else 0
        key = (users, classes, k, cap, launched, None if cost is None else cost.coefficients)
        if key not in self._paired:
            base = self._requests_for(users)
            cls = sample_classes(classes, base.n, np.random.default_rng([self.req.seed, users, 7]))
            sc = Scenario(
                k,
                ClosedLoop(users=users),
                base.with_classes(cls),
                unconditional_table(classes, k),
                cap,
                draft_steps=draft_steps_table(classes, k),
                launched=self.launched if k == 0 else 0,
            )
            self._paired[key] = run_paired(
                cost or self.cost,
                sc,
                np.random.default_rng([self.req.seed, users, k]),
                baseline_max_num_seqs=self.b_max,
                baselines=self._baselines,
            )
        return self._paired[key]

    def sim_speedup(self, users: int, classes: tuple[TrafficClass, ...], k: int) -> float:
        """Simulated throughput speedup; exactly 1 for K = 0 unless that level runs on a
        launched speculative server (:meth:`off_simulated`)."""
        if k == 0 and not self.off_simulated():
            return 1.0
        s = self.paired(users, classes, k).speedup.throughput_speedup
        return float("nan") if s is None else s

    def best_k_sim(self, users: int, classes: tuple[TrafficClass, ...]) -> tuple[int, float]:
        """The simulator's best K in 1..k_max at ``users`` and its speedup (which may be < 1)."""
        speeds = {k: self.sim_speedup(users, classes, k) for k in self.k_range}
        k = max(speeds, key=lambda x: speeds[x])
        return k, speeds[k]

    def paying_k_sim(self, users: int, classes: tuple[TrafficClass, ...]) -> int:
        """The simulator's best K at ``users`` if it gains at least MIN_GAIN, else 0."""
        k, s = self.best_k_sim(users, classes)
        return k if s >= MIN_GAIN else 0

    @cached_property
    def k_range(self) -> range:
        """The K a plan considers: 1 … K max; suffix decoding, the cap it was measured at."""
        if self.suffix_cap is not None:
            k = self.req.k or self.suffix_cap
            return range(k, k + 1)
        return range(1, (self.req.k or self.req.k_max) + 1)

    def rate_and_length(self, alpha: float, k: int) -> tuple[float, float]:
        """(ρ, τ) at ``alpha`` with K drafts: a chain's, or at the traffic's draft lengths."""
        if self.lengths is None:
            return float(draft_acceptance_rate(alpha, k)), float(mean_acceptance_length(alpha, k))
        cut = np.append(self.lengths[:k], self.lengths[k:].sum())
        return rate_and_length(alpha, cut)

    # ---------------------------------------------------------------- over the ranges
    def _rebuild(self, efficiencies: dict[str, float]) -> StepCostModel:
        dep = self.req.deployment.model_copy(update=efficiencies)
        return build_cost_model(resolve_deployment(dep, self.req.workload, self.req.peak))

    def speedup_spread(self, classes: tuple[TrafficClass, ...], k: int, concurrency: int) -> Spread:
        """The closed-form speedup at a concurrency over the coefficients' ranges."""
        b = self.batch(concurrency)
        s = self.design.spread(lambda m: model_speedup(m, classes, k, b, self.workload))
        low, high = self.ranges.widened(s.value, s.low, s.high)
        return replace(s, low=low, high=high)

    def sim_intervals(
        self, users: int, classes: tuple[TrafficClass, ...], k: int
    ) -> tuple[Interval, Interval, Interval]:
        """Simulated (throughput speedup, TPOT speedup, P99 ITL-per-token ratio on ÷ off) over
        the ranges: the paired simulation rerun at the two corners of the closed-form speedup at
        this concurrency, on the same requests and random numbers."""
        if k == 0 and not self.off_simulated():
            one = Interval(low=1.0, high=1.0)
            return one, one, one
        if not self.ranges.varying() and self.ranges.covariance is None:
            run = self.paired(users, classes, k)
            return (
                _interval([run.speedup.throughput_speedup]),
                _interval([run.speedup.tpot_mean_speedup]),
                _interval([_p99_ratio(run)]),
            )
        # K = 0 on the launched server: the corners where its K's drafter and host costs are
        # dearest and cheapest, which are what the level pays for besides the baseline's steps
        spread = self.speedup_spread(classes, k or self.launched, users)
        runs = [self.paired(users, classes, k)] + [
            self.paired(users, classes, k, self.design.at(at))
            for at in (spread.low_at, spread.high_at)
        ]
        return (
            _interval([r.speedup.throughput_speedup for r in runs], self.ranges),
            _interval([r.speedup.tpot_mean_speedup for r in runs], self.ranges),
            _interval([_p99_ratio(r) for r in runs], self.ranges),
        )

    def scaled_interval(
        self, users: int, classes: tuple[TrafficClass, ...], k: int
    ) -> Interval | None:
        """The simulated speedup over the ranges without simulating at the corners: the value
        times the closed form's ends over its own (as ``simulate`` gives every cell)."""
        return scaled_speedup_interval(
            self.design, self.sim_speedup(users, classes, k), classes, k, self.batch(users),
            self.workload,
        )  # fmt: skip

    def breakeven_interval(self, k: int, concurrency: int) -> Interval | None:
        """Break-even α over the ranges (None for K = 0); an open high end: no α pays there."""
        if k == 0:
            return None
        return breakeven_interval(
            self.design, k, self.batch(concurrency), self.workload, self.lengths
        )

    def crossover_interval(self, classes: tuple[TrafficClass, ...], k: int) -> Interval:
        """Crossover batch over the ranges; an open high end: pays up to the largest batch."""
        return crossover_interval(
            self.design, classes, k, self.workload, self.b_max, self.crossover(classes, k)
        )

    def best_k_range(self, classes: tuple[TrafficClass, ...], concurrency: int) -> tuple[int, int]:
        """The model's best K at a concurrency at the two corners and the value: (lowest, highest)."""
        k_cap = self.k_range[-1]
        b = float(self.batch(concurrency))
        k0 = best_k_model(self.cost, classes, b, self.workload, k_cap)[0] or 1
        lo_m, hi_m = self.design.corners(lambda m: model_speedup(m, classes, k0, b, self.workload))
        ks = [best_k_model(m, classes, b, self.workload, k_cap)[0] for m in (self.cost, lo_m, hi_m)]
        return min(ks), max(ks)

    # ---------------------------------------------------------------- step-time model
    def model_speedup(self, classes: tuple[TrafficClass, ...], k: int, concurrency: int) -> float:
        return model_speedup(self.cost, classes, k, self.batch(concurrency), self.workload)

    def breakeven(self, k: int, concurrency: int) -> float | None:
        """Break-even α for K at a concurrency (None: no α pays; K = 0: None)."""
        if k == 0:
            return None
        return breakeven_alpha_model(
            self.cost, k, self.batch(concurrency), self.workload, self.lengths
        )

    def crossover(self, classes: tuple[TrafficClass, ...], k: int) -> float | None:
        """Batch where K stops paying for ``classes`` (None: pays up to the largest batch)."""
        return crossover_batch_model(self.cost, classes, k, self.workload, self.b_max)

    def model_schedule(self, classes: tuple[TrafficClass, ...]) -> list[int]:
        """Best K per batch size 1..max_num_seqs from the model, non-increasing, capped at K."""
        k_cap = self.k_range[-1]
        n = self.req.deployment.max_num_seqs
        ks: list[int] = []
        for b in range(1, n + 1):
            ks.append(best_k_model(self.cost, classes, float(b), self.workload, k_cap)[0])
            if ks[-1] == 0:  # off from here on: the schedule never rises again
                ks += [0] * (n - b)
                break
        return [int(x) for x in np.minimum.accumulate(ks)]
