"""Sweeps and derived answers: speedup over (load × K × acceptance), break-even α, crossover.

Two independent routes to each derived answer, cross-checked in the tests:

- the **step-time model** in closed form — at batch B and mean context S̄ the emergent cost ratios
  c(B) and v(B, K) go into Leviathan's S = E(α, K) / (K·c + v) (:mod:`alphagate.theory`);
- the **simulator** — bisection on paired simulations (same requests with and without speculation).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import poisson

from alphagate.quantities import Frozen
from alphagate.sim.cost import FloatArray, StepCostModel
from alphagate.sim.engine import Scenario
from alphagate.sim.results import PairedSpeedup, SimSummary, paired_speedup, summarize
from alphagate.sim.run import run_paired, run_scenarios
from alphagate.sim.workload import (
    ClosedLoop,
    OpenLoop,
    RequestSet,
    SimClass,
    WorkloadConfig,
    length_mean,
    sample_requests,
)
from alphagate.specs.deployment import DeploymentConfig, ResolvedDeployment
from alphagate.theory.acceptance import expected_tokens_per_pass_by_pos

__all__ = [
    "LoadRow",
    "Mix",
    "SweepCell",
    "SweepConfig",
    "SweepResult",
    "breakeven_alpha_model",
    "breakeven_alpha_sim",
    "crossover_concurrency_model",
    "crossover_concurrency_sim",
    "model_speedup",
    "run_sweep",
    "unconditional_table",
]


def unconditional_table(classes: tuple[SimClass, ...], k: int) -> FloatArray:
    """[n_classes, max(k, 1)] table of P(≥ j accepted) for the engine."""
    kk = max(k, 1)
    return np.stack([c.unconditional(kk) for c in classes])


# ---------------------------------------------------------------- step-time model route
def model_speedup(
    cost: StepCostModel,
    classes: tuple[SimClass, ...],
    k: int,
    batch: float,
    workload: WorkloadConfig,
) -> float:
    """Steady-state throughput speedup at ``batch`` running sequences, from the step-time model.

    Each step decodes ``batch`` sequences (K drafts each) and, in a closed loop, prefills the
    requests that replace the finished ones: batch · E / L̄_out requests per step with E tokens
    per sequence per step. With several classes the batch holds each class in proportion to how
    long it stays (share / E_i), so tokens per sequence per step is the harmonic blend of the E_i.
    """
    l_out = length_mean(workload.output_len)
    l_in = length_mean(workload.prompt_len)
    ctx = workload.mean_context()
    shares = np.asarray([c.share for c in classes])
    e_cls = np.asarray(
        [
            float(expected_tokens_per_pass_by_pos(_conditional(c, k))) if k > 0 else 1.0
            for c in classes
        ]
    )
    e = 1.0 / float((shares / shares.sum() / e_cls).sum())

    def step(kk: int, tokens_per_seq: float) -> float:
        # requests finishing (and so prefilling) per step ~ Poisson(batch · E / L̄_out); the step
        # time is convex in the tokens it carries, so average over the count, not the mean count
        lam = batch * tokens_per_seq / l_out
        j = np.arange(int(lam + 8.0 * math.sqrt(lam) + 8.0))
        pmf = poisson.pmf(j, lam)
        pre = j * l_in
        t = cost.step_time(kk, batch, batch * ctx, pre, 0.0, pre * 0.5 * l_in, batch)
        return float((pmf * t).sum() / pmf.sum())

    return (e / step(k, e)) / (1.0 / step(0, 1.0))


def _conditional(c: SimClass, k: int) -> FloatArray:
    if c.alpha_by_pos is not None:
        a = np.asarray(c.alpha_by_pos, dtype=np.float64)
        return np.concatenate([a, np.full(max(0, k - a.size), a[-1])])[:k]
    return np.full(k, float(c.alpha or 0.0))


def _single(alpha: float) -> tuple[SimClass, ...]:
    return (SimClass(name="a", share=1.0, alpha=alpha),)


def breakeven_alpha_model(
    cost: StepCostModel, k: int, batch: float, workload: WorkloadConfig
) -> float | None:
    """α where the model speedup at ``batch`` crosses 1 (bisection; None when α = 1 does not pay)."""
    if model_speedup(cost, _single(0.0), k, batch, workload) >= 1.0:
        return 0.0
    if model_speedup(cost, _single(1.0), k, batch, workload) < 1.0:
        return None
    lo, hi = 0.0, 1.0
    for _ in range(50):
        mid = 0.5 * (lo + hi)
        if model_speedup(cost, _single(mid), k, batch, workload) >= 1.0:
            hi = mid
        else:
            lo = mid
    return hi


def crossover_concurrency_model(
    cost: StepCostModel,
    classes: tuple[SimClass, ...],
    k: int,
    workload: WorkloadConfig,
    b_max: int = 4096,
) -> float | None:
    """Batch size at which the model speedup falls to 1 (bisection on a log scale).

    Returns None when speculation still pays at ``b_max``, and 1.0 when it never pays.
    """
    if model_speedup(cost, classes, k, 1.0, workload) <= 1.0:
        return 1.0
    if model_speedup(cost, classes, k, float(b_max), workload) > 1.0:
        return None
    lo, hi = 1.0, float(b_max)
    for _ in range(60):
        mid = math.sqrt(lo * hi)
        if model_speedup(cost, classes, k, mid, workload) > 1.0:
            lo = mid
        else:
            hi = mid
    return hi


# ---------------------------------------------------------------- simulator route
def _closed_requests(workload: WorkloadConfig, users: int, n: int, seed: int) -> RequestSet:
    wl = workload.model_copy(update={"num_requests": n})
    return sample_requests(wl, ClosedLoop(users=users), np.random.default_rng(seed))


def _sim_speedup(
    cost: StepCostModel,
    classes: tuple[SimClass, ...],
    k: int,
    users: int,
    requests: RequestSet,
    max_num_seqs: int,
    seed: int,
) -> float:
    sc = Scenario(
        k, ClosedLoop(users=users), requests, unconditional_table(classes, k), max_num_seqs
    )
    return run_paired(cost, sc, np.random.default_rng(seed)).speedup.throughput


def default_num_requests(users: int) -> int:
    """Enough requests for a steady state: every user runs ~8 requests, at least 100 in all."""
    return max(100, 8 * users)


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
) -> float | None:
    """α where the paired simulated throughput speedup crosses 1 (bisection; common random numbers)."""
    reqs = _closed_requests(workload, users, num_requests or default_num_requests(users), seed)

    def s(alpha: float) -> float:
        cls = (SimClass(name="a", share=1.0, alpha=alpha),)
        req1 = RequestSet(
            reqs.prompt_len, reqs.output_len, np.zeros_like(reqs.class_idx), reqs.arrival_s
        )
        return _sim_speedup(cost, cls, k, users, req1, max_num_seqs, seed + 1)

    if s(0.0) >= 1.0:
        return 0.0
    if s(1.0) < 1.0:
        return None
    lo, hi = 0.0, 1.0
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        if s(mid) >= 1.0:
            hi = mid
        else:
            lo = mid
    return 0.5 * (lo + hi)


def crossover_concurrency_sim(
    cost: StepCostModel,
    workload: WorkloadConfig,
    alpha: float,
    k: int,
    *,
    c_max: int = 1024,
    seed: int = 0,
) -> int | None:
    """Smallest concurrency at which the simulated speedup drops below 1 (integer bisection)."""
    cls = (SimClass(name="a", share=1.0, alpha=alpha),)

    def pays(users: int) -> bool:
        reqs = _closed_requests(workload, users, default_num_requests(users), seed)
        req1 = RequestSet(
            reqs.prompt_len, reqs.output_len, np.zeros_like(reqs.class_idx), reqs.arrival_s
        )
        return _sim_speedup(cost, cls, k, users, req1, c_max, seed + 1) >= 1.0

    if not pays(1):
        return 1
    if pays(c_max):
        return None
    lo, hi = 1, c_max
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if pays(mid):
            lo = mid
        else:
            hi = mid
    return hi


# ---------------------------------------------------------------- sweeps
class Mix(Frozen):
    """One acceptance setting: a label and its classes."""

    label: str
    classes: tuple[SimClass, ...]


class SweepConfig(Frozen):
    """What `alphagate simulate` runs: one deployment, several loads, Ks and acceptance mixes."""

    deployment: DeploymentConfig
    workload: WorkloadConfig
    mixes: tuple[Mix, ...]
    ks: tuple[int, ...]
    concurrencies: tuple[int, ...] | None = (1, 16, 64, 256)
    rates: tuple[float, ...] | None = None
    burstiness: float = 1.0
    think_time_s: float = 0.0
    num_requests: int | None = None
    disable_above_batch: int | None = None
    seed: int = 0
    simulate_breakeven: bool = True


class SweepCell(Frozen):
    load: float
    k: int
    mix: str
    speedup: PairedSpeedup
    spec: SimSummary


class LoadRow(Frozen):
    load: float
    load_kind: str
    baseline: SimSummary
    mean_context: float
    draft_cost_ratio: float
    verify_cost_ratio: dict[int, float]
    alpha_breakeven_model: dict[int, float | None]
    alpha_breakeven_sim: dict[int, float | None]


class SweepResult(Frozen):
    deployment: str
    tp: int
    ks: list[int]
    mixes: list[str]
    rows: list[LoadRow]
    cells: list[SweepCell]
    crossover_concurrency_model: dict[str, dict[int, float | None]]
    crossover_search_max: int


def run_sweep(cfg: SweepConfig, resolved: ResolvedDeployment, cost: StepCostModel) -> SweepResult:
    """Every (load, K, mix) paired against one no-speculation baseline per load."""
    wl = cfg.workload
    mean_ctx = wl.mean_context()
    closed = cfg.rates is None
    loads: list[float] = (
        [float(c) for c in (cfg.concurrencies or ())] if closed else list(cfg.rates or ())
    )
    rows: list[LoadRow] = []
    cells: list[SweepCell] = []
    max_seqs = cfg.deployment.max_num_seqs
    for li, load in enumerate(loads):
        if closed:
            arrivals: ClosedLoop | OpenLoop = ClosedLoop(
                users=int(load), think_time_s=cfg.think_time_s
            )
            n = cfg.num_requests or default_num_requests(int(load))
        else:
            arrivals = OpenLoop(rate=load, burstiness=cfg.burstiness)
            n = cfg.num_requests or 1000
        base_req = sample_requests(
            wl.model_copy(update={"num_requests": n}),
            arrivals,
            np.random.default_rng([cfg.seed, li]),
        )
        scenarios = [
            Scenario(
                0,
                arrivals,
                base_req,
                unconditional_table(cfg.mixes[0].classes, 0),
                max_seqs,
                label="baseline",
            )
        ]
        keys: list[tuple[int, str]] = []
        for mi, mix in enumerate(cfg.mixes):
            shares = np.asarray([c.share for c in mix.classes])
            cls = np.random.default_rng([cfg.seed, li, mi]).choice(
                shares.size, size=n, p=shares / shares.sum()
            )
            req = RequestSet(
                base_req.prompt_len, base_req.output_len, cls.astype(np.int64), base_req.arrival_s
            )
            for k in cfg.ks:
                scenarios.append(
                    Scenario(
                        k,
                        arrivals,
                        req,
                        unconditional_table(mix.classes, k),
                        max_seqs,
                        disable_above_batch=cfg.disable_above_batch,
                        label=f"{mix.label} K={k}",
                    )
                )
                keys.append((k, mix.label))
        traces = run_scenarios(cost, scenarios, np.random.default_rng([cfg.seed, li, 999]))
        base = summarize(traces[0])
        for (k, label), tr in zip(keys, traces[1:], strict=True):
            spec = summarize(tr)
            cells.append(
                SweepCell(load=load, k=k, mix=label, speedup=paired_speedup(spec, base), spec=spec)
            )
        # steady-state batch: the concurrency (closed loop) or the baseline's mean batch (open loop)
        batch = float(min(int(load), max_seqs)) if closed else max(base.mean_batch, 1.0)
        be_sim: dict[int, float | None] = {}
        if cfg.simulate_breakeven and closed:
            for k in cfg.ks:
                be_sim[k] = breakeven_alpha_sim(
                    cost,
                    wl,
                    k,
                    int(load),
                    max_num_seqs=max_seqs,
                    seed=cfg.seed,
                    tol=0.01,
                    num_requests=n,
                )
        rows.append(
            LoadRow(
                load=load,
                load_kind="concurrency" if closed else "request rate (req/s)",
                baseline=base,
                mean_context=mean_ctx,
                draft_cost_ratio=float(cost.draft_cost_ratio(batch, mean_ctx)),
                verify_cost_ratio={
                    k: float(cost.verify_cost_ratio(batch, k, mean_ctx)) for k in cfg.ks
                },
                alpha_breakeven_model={
                    k: breakeven_alpha_model(cost, k, batch, wl) for k in cfg.ks
                },
                alpha_breakeven_sim=be_sim,
            )
        )
    # the batch cannot grow past max_num_seqs nor past what the KV cache holds
    b_max = max(
        1,
        min(
            max_seqs,
            int(
                resolved.kv_capacity_tokens
                // (length_mean(wl.prompt_len) + length_mean(wl.output_len))
            ),
        ),
    )
    crossover: dict[str, dict[int, float | None]] = {}
    for mix in cfg.mixes:
        crossover[mix.label] = {
            k: crossover_concurrency_model(cost, mix.classes, k, wl, b_max=b_max) for k in cfg.ks
        }
    return SweepResult(
        deployment=resolved.describe(),
        tp=resolved.tp,
        ks=list(cfg.ks),
        mixes=[m.label for m in cfg.mixes],
        rows=rows,
        cells=cells,
        crossover_concurrency_model=crossover,
        crossover_search_max=b_max,
    )
