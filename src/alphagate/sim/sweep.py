"""Sweeps over (load × K × acceptance), and the simulator's own break-even α and crossover.

Two independent routes to each derived answer, cross-checked in the tests and side by side in
``alphagate simulate``:

- the **step-time model** in closed form (:mod:`alphagate.sim.predict`);
- the **simulator** — bisection on paired simulations (same requests with and without speculation,
  common random numbers).

:func:`simulate` is the entry point: a :class:`SweepConfig` in, a :class:`SweepResult` out.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from pydantic import Field, model_validator

from alphagate.core.records import Frozen, Interval
from alphagate.core.traffic import TrafficClass
from alphagate.sim.cost import StepCostModel, build_cost_model
from alphagate.sim.engine import Scenario
from alphagate.sim.predict import breakeven_alpha_model, crossover_batch_model, single_class
from alphagate.sim.results import SimSummary, Speedups, speedups, summarize
from alphagate.sim.run import BaselineRuns, run_paired, run_scenarios
from alphagate.sim.uncertainty import (
    CostDesign,
    breakeven_interval,
    crossover_interval,
    scaled_speedup_interval,
)
from alphagate.sim.workload import (
    ClosedLoop,
    OpenLoop,
    RequestSet,
    draft_steps_table,
    pooled_lengths,
    sample_classes,
    sample_requests,
    unconditional_table,
)
from alphagate.specs.calibration import CalibrationProfile
from alphagate.specs.deployment import (
    ArmCaps,
    DeploymentConfig,
    DeploymentSummary,
    ResolvedDeployment,
    resolve_deployment,
)
from alphagate.specs.uncertainty import cost_ranges
from alphagate.specs.workload import WorkloadConfig
from alphagate.theory.roots import bisect

FloatArray = npt.NDArray[np.float64]

__all__ = [
    "Crossover",
    "KRow",
    "LoadRow",
    "SweepCell",
    "SweepConfig",
    "SweepResult",
    "breakeven_alpha_sim",
    "calibration_notes",
    "crossover_concurrency_sim",
    "default_num_requests",
    "simulate",
]


def default_num_requests(users: int) -> int:
    """Enough requests for the run to sit at its concurrency: every user runs ~16 requests (at
    least 200 in all). The drain lasts about one request whatever the run's length, so it weighs
    ~1/16 of the run: with the default lognormal lengths the time-averaged batch, ramp-up and
    drain included (``SimSummary.mean_batch``), is 91–97% of the concurrency on average over
    seeds, 85% at worst, from 8 to 256 users (``benchmarks/calibrate_checks.py mean-batch``)."""
    return max(200, 16 * users)


def _paired_speedup(
    cost: StepCostModel,
    classes: tuple[TrafficClass, ...],
    k: int,
    users: int,
    requests: RequestSet,
    caps: ArmCaps,
    seed: int,
    baselines: BaselineRuns | None = None,
) -> float:
    sc = Scenario(
        k, ClosedLoop(users=users), requests, unconditional_table(classes, k), caps.speculative,
        draft_steps=draft_steps_table(classes, k),
    )  # fmt: skip
    run = run_paired(
        cost, sc, np.random.default_rng(seed), baseline_max_num_seqs=caps.baseline,
        baselines=baselines,
    )  # fmt: skip
    s = run.speedup.throughput_speedup
    return float("nan") if s is None else s


def _one_class_requests(workload: WorkloadConfig, users: int, n: int, seed: int) -> RequestSet:
    reqs = sample_requests(workload, n, ClosedLoop(users=users), np.random.default_rng(seed))
    return reqs.with_classes(np.zeros_like(reqs.class_idx))


def breakeven_alpha_sim(
    cost: StepCostModel,
    workload: WorkloadConfig,
    k: int,
    users: int,
    *,
    max_num_seqs: int = 256,
    seed: int = 0,
    tol: float = 0.005,
    num_requests: int | None = None,
    lengths: FloatArray | None = None,
) -> float | None:
    """α where the paired simulated throughput speedup reaches 1 (bisection, common random
    numbers; ``lengths``: drafts of those lengths, :func:`~alphagate.sim.predict.single_class`;
    each arm holds its own largest batch, at most ``max_num_seqs``)."""
    reqs = _one_class_requests(workload, users, num_requests or default_num_requests(users), seed)
    caps = cost.arm_caps(k, workload.mean_sequence_tokens(), max_num_seqs)
    baselines = BaselineRuns()  # one baseline run for every α the bisection tries

    def pays(alpha: float) -> bool:
        one = single_class(alpha, lengths)
        s = _paired_speedup(cost, one, k, users, reqs, caps, seed + 1, baselines)
        return s >= 1.0

    if pays(0.0):
        return 0.0
    if not pays(1.0):
        return None
    return bisect(pays, 0.0, 1.0, tol=tol)


def crossover_concurrency_sim(
    cost: StepCostModel,
    workload: WorkloadConfig,
    alpha: float,
    k: int,
    *,
    c_max: int = 1024,
    seed: int = 0,
) -> int | None:
    """Smallest concurrency at which the simulated speedup drops below 1 (integer bisection;
    each arm holds its own largest batch, at most ``c_max``)."""
    caps = cost.arm_caps(k, workload.mean_sequence_tokens(), c_max)

    def loses(users: int) -> bool:
        reqs = _one_class_requests(workload, users, default_num_requests(users), seed)
        s = _paired_speedup(cost, single_class(alpha), k, users, reqs, caps, seed + 1)
        return s < 1.0

    if loses(1):
        return 1
    if not loses(c_max):
        return None
    return int(bisect(lambda c: loses(int(c)), 1, c_max, tol=1, scale="integer"))


# ---------------------------------------------------------------- sweeps
class SweepConfig(Frozen):
    """What ``alphagate simulate`` runs: one deployment, several loads, Ks and acceptance settings."""

    deployment: DeploymentConfig = Field(default_factory=DeploymentConfig)
    workload: WorkloadConfig = Field(default_factory=WorkloadConfig)
    alphas: tuple[float, ...] | None = Field(
        default=None,
        description="the acceptance axis: one single-class run per α; None = the workload's classes",
    )
    ks: tuple[int, ...] = Field(default=(1, 3, 5), min_length=1)
    concurrencies: tuple[int, ...] | None = (1, 16, 64, 256)
    rates: tuple[float, ...] | None = None
    burstiness: float = Field(default=1.0, gt=0, allow_inf_nan=False)
    think_time_s: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    num_requests: int | None = Field(default=None, ge=1, le=10_000_000)
    disable_above_batch: int | None = Field(default=None, ge=1)
    seed: int = Field(default=0, ge=0)
    simulate_breakeven: bool = True
    ranges: bool = Field(
        default=True,
        description="give every speedup, break-even α and crossover its interval over the "
        "step-time constants' ranges (specs.uncertainty)",
    )

    @model_validator(mode="after")
    def _one_load_axis(self) -> SweepConfig:
        if (self.concurrencies is None) == (self.rates is None):
            raise ValueError("give concurrencies or rates, not both")
        if self.alphas is not None and not all(0.0 <= a <= 1.0 for a in self.alphas):
            raise ValueError("every α must lie in [0, 1]")
        if not self.workload.classes[0].has_alpha and self.alphas is None:
            raise ValueError("the workload's classes need α, or give the α axis")
        return self

    def mixes(self) -> list[tuple[str, float | None, tuple[TrafficClass, ...]]]:
        """(label, α or None for a class mix, classes) per acceptance setting."""
        if self.alphas is not None:
            return [(f"α={a:g}", a, single_class(a)) for a in self.alphas]
        return [("mix", None, self.workload.classes)]


class SweepCell(Frozen):
    """One (load, K, acceptance) point: the speculative run and its speedups over the baseline."""

    load: float
    k: int
    mix: str
    alpha: float | None = Field(description="the single-class α of this cell; None for a mix")
    speedup: Speedups
    spec: SimSummary
    throughput_speedup_interval: Interval | None = Field(
        default=None,
        description="speedup.throughput_speedup over the step-time constants' ranges: the "
        "simulated value times the closed form's ends over its value at this batch",
    )


class KRow(Frozen):
    """Per K at one load: emergent verify cost and the break-even α by both routes."""

    k: int
    verify_cost_ratio: float
    alpha_breakeven_model: float | None
    alpha_breakeven_sim: float | None
    alpha_breakeven_interval: Interval | None = Field(
        default=None,
        description="alpha_breakeven_model over the step-time constants' ranges (open high "
        "end: no α pays there)",
    )


class LoadRow(Frozen):
    """One load level: its no-speculation baseline, emergent costs and break-even α per K."""

    load: float
    load_kind: str
    baseline: SimSummary
    mean_context: float
    draft_cost_ratio: float
    by_k: list[KRow]

    def for_k(self, k: int) -> KRow:
        return next(r for r in self.by_k if r.k == k)


class Crossover(Frozen):
    """Batch size at which speculation stops paying for one acceptance setting and K (model)."""

    mix: str
    alpha: float | None
    k: int
    batch: float | None = Field(description="None: still pays at the largest batch; 1: never pays")
    batch_interval: Interval | None = Field(
        default=None,
        description="batch over the step-time constants' ranges (open high end: still pays at "
        "the largest batch)",
    )


def _label_alpha(label: object) -> float | None:
    if isinstance(label, str) and label.startswith("α="):
        try:
            return float(label.removeprefix("α="))
        except ValueError:
            return None
    return None


class SweepResult(Frozen):
    """Everything ``alphagate simulate`` prints: cells, per-load rows, crossovers."""

    deployment: str
    deployment_detail: DeploymentSummary
    ks: list[int]
    mixes: list[str]
    mix_alphas: list[float | None] = Field(
        default_factory=list,
        description="each mix's α when it is one class at one α (the --alpha axis); None for a "
        "traffic mix",
    )
    rows: list[LoadRow]
    cells: list[SweepCell]
    crossovers: list[Crossover]
    crossover_search_max: int
    largest_batch: list[ArmCaps] = Field(
        default_factory=list,
        description="[K of ks]: the most sequences each server holds, the speculative one at "
        "that K (empty in a file written before it was recorded)",
    )
    calibration: list[str] = Field(
        default_factory=list,
        description="with a calibration profile: what it was fitted on, and the loads it "
        "extrapolates to",
    )
    ranges_origin: str | None = Field(
        default=None,
        description="where the intervals' ranges come from (prior: documented ranges; "
        "calibration: a profile's fitted values ± 2 SE); None: no intervals computed",
    )

    @model_validator(mode="before")
    @classmethod
    def _alphas_of_older_files(cls, data: Any) -> Any:
        """A result written before ``mix_alphas``: each mix's α from its label, which was then
        ``α=<value>`` for one class at one α (:meth:`SweepConfig.mixes`)."""
        if isinstance(data, dict) and not data.get("mix_alphas") and data.get("mixes"):
            data = {**data, "mix_alphas": [_label_alpha(m) for m in data["mixes"]]}
        return data

    def cell(self, load: float, k: int, mix: str) -> SweepCell | None:
        return next((c for c in self.cells if c.load == load and c.k == k and c.mix == mix), None)


def _load_scenarios(
    cfg: SweepConfig, cost: StepCostModel, li: int, load: float
) -> tuple[list[Scenario], list[tuple[int, str, float | None]]]:
    """The baseline and every (K, mix) scenario at one load, all on the same requests, each
    holding its own largest batch (:meth:`~alphagate.sim.cost.StepCostModel.arm_caps`)."""
    closed = cfg.rates is None
    arrivals: ClosedLoop | OpenLoop = (
        ClosedLoop(users=int(load), think_time_s=cfg.think_time_s)
        if closed
        else OpenLoop(rate=load, burstiness=cfg.burstiness)
    )
    n = cfg.num_requests or (default_num_requests(int(load)) if closed else 1000)
    base_req = sample_requests(cfg.workload, n, arrivals, np.random.default_rng([cfg.seed, li]))
    seq_tokens = cfg.workload.mean_sequence_tokens()
    max_seqs = cfg.deployment.max_num_seqs
    base_cap = cost.arm_caps(0, seq_tokens, max_seqs).baseline
    mixes = cfg.mixes()
    scenarios = [
        Scenario(0, arrivals, base_req, unconditional_table(mixes[0][2], 0), base_cap, None, "base")
    ]
    keys: list[tuple[int, str, float | None]] = []
    for mi, (label, alpha, classes) in enumerate(mixes):
        cls = sample_classes(classes, n, np.random.default_rng([cfg.seed, li, mi]))
        req = base_req.with_classes(cls)
        for k in cfg.ks:
            scenarios.append(
                Scenario(
                    k,
                    arrivals,
                    req,
                    unconditional_table(classes, k),
                    cost.arm_caps(k, seq_tokens, max_seqs).speculative,
                    cfg.disable_above_batch,
                    f"{label} K={k}",
                    draft_steps_table(classes, k),
                )
            )
            keys.append((k, label, alpha))
    return scenarios, keys


def _steady_batch(cfg: SweepConfig, cost: StepCostModel, load: float, base: SimSummary) -> float:
    """The baseline's batch: the concurrency (closed loop, capped by the most it holds) or its
    mean batch (the closed form caps the speculative arm's on its own)."""
    if cfg.rates is None:
        seq_tokens = cfg.workload.mean_sequence_tokens()
        cap = cost.arm_caps(0, seq_tokens, cfg.deployment.max_num_seqs).baseline
        return float(min(int(load), cap))
    return max(base.mean_batch, 1.0)


def _load_row(
    cfg: SweepConfig,
    cost: StepCostModel,
    load: float,
    base: SimSummary,
    n: int,
    design: CostDesign | None,
) -> LoadRow:
    closed = cfg.rates is None
    wl = cfg.workload
    mean_ctx = wl.mean_context()
    max_seqs = cfg.deployment.max_num_seqs
    batch = _steady_batch(cfg, cost, load, base)
    lengths = pooled_lengths(wl.classes)  # drafts of variable length: α at their lengths
    by_k = []
    for k in cfg.ks:
        be_sim = (
            breakeven_alpha_sim(
                cost,
                wl,
                k,
                int(load),
                max_num_seqs=max_seqs,
                seed=cfg.seed,
                tol=0.01,
                num_requests=n,
                lengths=lengths,
            )
            if cfg.simulate_breakeven and closed
            else None
        )
        by_k.append(
            KRow(
                k=k,
                verify_cost_ratio=float(cost.verify_cost_ratio(batch, k, mean_ctx)),
                alpha_breakeven_model=breakeven_alpha_model(cost, k, batch, wl, lengths),
                alpha_breakeven_sim=be_sim,
                alpha_breakeven_interval=None
                if design is None
                else breakeven_interval(design, k, batch, wl, lengths),
            )
        )
    return LoadRow(
        load=load,
        load_kind="concurrency" if closed else "request rate (req/s)",
        baseline=base,
        mean_context=mean_ctx,
        draft_cost_ratio=float(cost.draft_cost_ratio(batch, mean_ctx)),
        by_k=by_k,
    )


def run_sweep(
    cfg: SweepConfig,
    resolved: ResolvedDeployment,
    cost: StepCostModel,
    design: CostDesign | None = None,
) -> SweepResult:
    """Every (load, K, acceptance) paired against one no-speculation baseline per load; with a
    design, each answer's interval over its ranges."""
    loads = [float(c) for c in cfg.concurrencies] if cfg.concurrencies else list(cfg.rates or ())
    mixes = {label: classes for label, _, classes in cfg.mixes()}
    rows: list[LoadRow] = []
    cells: list[SweepCell] = []
    for li, load in enumerate(loads):
        scenarios, keys = _load_scenarios(cfg, cost, li, load)
        traces = run_scenarios(cost, scenarios, np.random.default_rng([cfg.seed, li, 999]))
        base = summarize(traces[0])
        batch = _steady_batch(cfg, cost, load, base)
        for (k, label, alpha), tr in zip(keys, traces[1:], strict=True):
            spec = summarize(tr)
            sp = speedups(spec, base)
            iv = (
                None
                if design is None
                else scaled_speedup_interval(
                    design, sp.throughput_speedup, mixes[label], k, batch, cfg.workload
                )
            )
            cells.append(
                SweepCell(
                    load=load, k=k, mix=label, alpha=alpha, speedup=sp, spec=spec,
                    throughput_speedup_interval=iv,
                )
            )  # fmt: skip
        rows.append(_load_row(cfg, cost, load, base, scenarios[0].requests.n, design))
    b_max = resolved.largest_batch(cfg.workload, k=0)  # above it both arms queue
    crossovers = []
    for label, alpha, classes in cfg.mixes():
        for k in cfg.ks:
            at = crossover_batch_model(cost, classes, k, cfg.workload, b_max)
            iv = (
                None
                if design is None
                else crossover_interval(design, classes, k, cfg.workload, b_max, at)
            )
            crossovers.append(Crossover(mix=label, alpha=alpha, k=k, batch=at, batch_interval=iv))
    return SweepResult(
        deployment=resolved.describe(),
        deployment_detail=resolved.summary(),
        ks=list(cfg.ks),
        mixes=[m[0] for m in cfg.mixes()],
        mix_alphas=[m[1] for m in cfg.mixes()],
        rows=rows,
        cells=cells,
        crossovers=crossovers,
        crossover_search_max=b_max,
        largest_batch=[
            ArmCaps(baseline=b_max, speculative=resolved.largest_batch(cfg.workload, k=k))
            for k in cfg.ks
        ],
        ranges_origin=None if design is None else design.ranges.origin,
    )


def simulate(cfg: SweepConfig, calibration: CalibrationProfile | None = None) -> SweepResult:
    """Resolve the deployment (TP chosen for the largest load), build its step-time model, sweep;
    the intervals use ``calibration``'s fitted ranges when one was applied to the deployment,
    else the documented priors, and the result says where the loads leave the range it was
    fitted over (:func:`calibration_notes`); a profile fitted for another deployment is refused
    (:class:`~alphagate.core.errors.ConfigError`)."""
    if calibration is not None:
        calibration.check_deployment(cfg.deployment)
    peak = max(cfg.concurrencies) if cfg.concurrencies else cfg.deployment.max_num_seqs
    resolved = resolve_deployment(cfg.deployment, cfg.workload, peak)
    cost = build_cost_model(resolved)
    design = None
    if cfg.ranges:

        def rebuild(efficiencies: dict[str, float]) -> StepCostModel:
            dep = cfg.deployment.model_copy(update=efficiencies)
            return build_cost_model(resolve_deployment(dep, cfg.workload, peak))

        design = CostDesign(cost, cost_ranges(cfg.deployment, calibration), rebuild)
    result = run_sweep(cfg, resolved, cost, design)
    if calibration is None:
        return result
    return result.model_copy(update={"calibration": calibration_notes(cfg, calibration)})


def calibration_notes(cfg: SweepConfig, calibration: CalibrationProfile) -> list[str]:
    """What the profile was fitted on, and each simulated load outside the range it was fitted
    over (its coefficients extrapolate there)."""
    top_k = max(cfg.ks)
    outside = (calibration.range_note(int(c), top_k) for c in cfg.concurrencies or ())
    return [calibration.summary(), *(n for n in outside if n)]
