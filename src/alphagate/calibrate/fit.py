"""Fit the step-time model's coefficients to measured levels by regularised least squares.

The model (:mod:`alphagate.sim.cost`) is linear in its seven coefficients θ:

    step(s) = Σ_j θ_j · x_j(s)

with x_j(s) the terms a coefficient multiplies, computed for the deployment from its hardware
and shapes (``target_time_scale`` × the target's GPU terms, ``draft_time_scale`` × the drafter's,
and host costs per step, per running sequence, per scheduled token, per speculative step and per
draft forward). With speculation measured at one K only, the per-speculative-step and per-draft
host costs (and the drafter's GPU time) grow alike over the data: the prior splits them, and the
profile says so; levels at two K separate them. Each
observation is linear in θ as well: every level is laid out in step space with the closed-loop
simulator (:func:`alphagate.sim.closed_loop.plan_steps`: the level's concurrency, its requests'
lengths and its measured acceptance), which fixes the batch composition of every step without
pricing it, so

- the mean decode step its sequences saw = Σ_s n_decode(s) · step(s) / Σ_s n_decode(s);
- mean TTFT at concurrency 1 = the steps from admission to the first token, plus a constant per
  request outside the engine (HTTP, tokenization) — fitted too, reported, not simulated.

θ minimises Σ_i w_i ((x_i·θ − y_i) / y_i)² + Σ_j ((θ_j − θ⁰_j) / s_j)² with θ ≥ 0: relative
residuals weighted by the inverse variance of a level's mean (CV² ÷ independent samples — engine
steps, not sequences × steps — plus the spread of the simulated layouts and a floor of 2% for what
a wall-clock level does not repeat to; see :data:`LEVEL_FLOOR`), and a weak prior
pulling each coefficient towards its documented default θ⁰, in units s_j of "the value at which
this term alone would explain a typical observation". Where the data separate two coefficients the
prior is negligible; where they cannot (two terms that grow alike over the measured range) it
decides, and the profile says so per coefficient (``data_share``: 1 − posterior ÷ prior variance).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Final, Literal, NamedTuple

import numpy as np
import numpy.typing as npt

from alphagate.calibrate.observations import Observation
from alphagate.calibrate.predict import simulate_level
from alphagate.core.errors import ConfigError
from alphagate.core.traffic import TrafficClass
from alphagate.sim.closed_loop import fast_path_applies, plan_steps
from alphagate.sim.cost import COEFFICIENTS, StepCostModel, build_cost_model
from alphagate.sim.engine import Scenario
from alphagate.sim.workload import ClosedLoop, RequestSet, unconditional_table
from alphagate.specs.calibration import (
    CalibrationPoint,
    CalibrationProfile,
    FittedCoefficient,
    coefficient_values,
    with_coefficients,
)
from alphagate.specs.deployment import DeploymentConfig, resolve_deployment

FloatArray = npt.NDArray[np.float64]

__all__ = [
    "FUNCTIONAL_FORM",
    "MAX_RMS_RESIDUAL_PCT",
    "DesignRow",
    "design_rows",
    "fit_frontend",
    "fit_profile",
    "unusable_reason",
]

NAMES: Final = tuple(COEFFICIENTS)
#: The request-level constant of TTFT rows (not a step cost).
REQUEST = "request_overhead_s"
FUNCTIONAL_FORM: Final = (
    "step = target_time_scale·(target GEMMs + attention + sampler + all-reduce + kernels) "
    "+ draft_time_scale·(the drafter's, K forwards) + step_overhead_s + per_seq_overhead_s·B "
    "+ per_token_overhead_s·T + spec_step_overhead_s·[K > 0] + draft_forward_overhead_s·K "
    "+ spec_seq_overhead_s·B·[K > 0] + draft_seq_overhead_s·K·B "
    "+ sync_step_overhead_s·[the arm runs without async scheduling]; fitted to the mean decode "
    "step (and "
    "mean TTFT at concurrency 1, with request_overhead_s per request) of levels laid out in step "
    "space; regularised least squares with θ ≥ 0 and a weak prior at the documented defaults"
)
#: Weight of the prior: one unit is "this term explains a typical observation on its own".
PRIOR_WEIGHT: Final = 1.0
#: Simulated requests per level at least (independent runs of the level's own requests).
MIN_SIMULATED: Final = 256
MIN_RUNS: Final = 4
#: Relative error every level keeps at least, whatever its samples: a level's mean measured
#: again moves by about this much (the host's load, clocks, the client's own turnaround, which
#: the step-space layout does not see). Twins with known coefficients measured over HTTP show it:
#: levels at concurrency 4 and 8 sit 1.5–2.5% above the twin's model time on a quiet machine,
#: run after run. Without this floor such a bias, fitted away by one coefficient, would be
#: reported with the tiny error of a mean of thousands of steps.
LEVEL_FLOOR: Final = 0.02
#: Standard errors scale with the fit's reduced χ² (the rows' noise as seen), but never below
#: half the noise assumed from the samples and the simulated spread.
CHI2_FLOOR: Final = 0.25
#: Coefficients fitted only when the data call for them: the host time per decoding sequence per
#: speculative step and per draft forward, which a GPU's batched tensor ops keep near zero (their
#: priors hold them there) and vLLM's CPU build pays per request. Freed, each trades off against
#: the host costs every row shares; so one is freed only when it explains what the other terms
#: cannot: the data rows' weighted χ² falls by more than :data:`EVIDENCE_CHI2` (a likelihood-ratio
#: test of one more coefficient: χ² with one degree of freedom, 9 ≈ three standard deviations).
#: Levels the model fits to within their noise never pass it.
ON_EVIDENCE: Final = frozenset({"spec_seq_overhead_s", "draft_seq_overhead_s"})
EVIDENCE_CHI2: Final = 9.0
#: A fit whose RMS relative residual is above this explains too little to price steps with: the
#: profile is marked unusable. Good fits sit far below it: the twin round trip over HTTP
#: (tests/calibrate/test_twin_roundtrip.py) fits to 0.3% RMS on a quiet machine and 0.8% (no
#: level above 2%) on a loaded 2-core one; vLLM's CPU build, whose steps are noisy, to 5–14%
#: (tests/real_engine/test_calibrate_vllm.py). 25% leaves that noisiest usable fit room, and
#: is still a model that misses its own data by a quarter.
MAX_RMS_RESIDUAL_PCT: Final = 25.0
#: Points of the coarse grid over the front-end's share of the request overhead
#: (:func:`fit_frontend`).
FRONTEND_GRID: Final = 9


@dataclass(frozen=True)
class DesignRow:
    """One observation as a linear equation in the coefficients: ``x · θ ≈ y`` (seconds)."""

    obs: Observation
    metric: str  # decode_step | ttft
    x: FloatArray  # [coefficients (+ request overhead)]
    y: float
    weight: float
    mean_batch: float


def _scenario(obs: Observation, max_num_seqs: int) -> Scenario:
    n = obs.prompt_tokens.size
    if obs.k > 0:
        cls = TrafficClass(name="obs", share=1.0, alpha_by_pos=obs.alpha_by_pos or (0.0,))
    else:
        cls = TrafficClass(name="obs", share=1.0, alpha=0.0)
    reqs = RequestSet(
        obs.prompt_tokens, obs.output_tokens, np.zeros(n, dtype=np.int64), np.full(n, np.nan)
    )
    sc = Scenario(
        obs.k, ClosedLoop(users=obs.concurrency), reqs, unconditional_table((cls,), obs.k),
        max_num_seqs,
    )  # fmt: skip
    if obs.concurrency > max_num_seqs or not fast_path_applies(sc):
        raise ConfigError(
            f"{obs.label} ({obs.source}): concurrency {obs.concurrency} is above the server's "
            f"max_num_seqs ({max_num_seqs}); requests queued, so the batch is not known"
        )
    return sc


class _RunSums(NamedTuple):
    """One simulated layout of a level, summed over its steps against each coefficient's
    terms x (``[coefficients + 1]``, the request overhead last)."""

    chunk_x: FloatArray  # Σ chunks · x
    chunks: float  # Σ chunks
    first_token_x: FloatArray  # Σ requests in their first-token window · x
    requests: float
    mean_batch: float  # decoding sequences per step that decodes


def _rows_of_one_run(cost: StepCostModel, sc: Scenario, rng: np.random.Generator) -> _RunSums:
    plan = plan_steps(sc, cost.max_num_batched_tokens, rng)
    terms = cost.terms(**plan.composition)._asdict()
    steps = plan.running.size
    basis = np.stack(
        [sum((terms[t] for t in COEFFICIENTS[c]), start=np.zeros(steps)) for c in NAMES]
        + [np.zeros(steps)]
    )  # [coefficients + 1, steps]
    chunks = plan.n_decode.astype(np.float64)  # one chunk per decoding sequence per step
    t = plan.timeline
    # requests inside their first-token window (admission … first token) at each step
    cover = np.cumsum(
        np.bincount(t.sent, minlength=steps + 1) - np.bincount(t.first + 1, minlength=steps + 1)
    )[:steps]
    return _RunSums(
        chunk_x=basis @ chunks,
        chunks=float(chunks.sum()),
        first_token_x=basis @ cover,
        requests=float(t.start.size),
        mean_batch=float(chunks[chunks > 0].mean() if (chunks > 0).any() else 0.0),
    )


def design_rows(
    cost: StepCostModel, obs: Observation, max_num_seqs: int, prior: FloatArray, seed: int = 0
) -> list[DesignRow]:
    """The level's rows: the mean decode step, and mean TTFT when the level ran one at a time.

    The level is laid out with exactly its own requests (its ramp-up and drain are part of what
    was measured), several times with independent acceptance draws, and the rows averaged. The
    measured level was one such draw: the spread between the runs (at the prior coefficients)
    joins the sampling error of the measured mean in the row's weight.
    """
    sc = _scenario(obs, max_num_seqs)
    runs = max(MIN_RUNS, -(-MIN_SIMULATED // obs.prompt_tokens.size))
    rng = np.random.default_rng(seed)
    parts = [_rows_of_one_run(cost, sc, child) for child in rng.spawn(runs)]
    mean_batch = float(np.mean([p.mean_batch for p in parts]))

    def row(metric: str, xs: list[FloatArray], counts: list[float], y_ms: float, n: float,
            cv: float) -> DesignRow:  # fmt: skip
        per_run = np.stack([x / c for x, c in zip(xs, counts, strict=True)])  # [runs, coef]
        at_prior = per_run @ prior
        ok = runs > 1 and at_prior.mean() > 0
        spread = float(at_prior.std(ddof=1) / at_prior.mean()) if ok else 0.0
        x = np.asarray(sum(xs) / sum(counts), dtype=np.float64)
        var = cv**2 / max(n, 1.0) + spread**2 * (1.0 + 1.0 / runs) + LEVEL_FLOOR**2
        return DesignRow(obs, metric, x, y_ms * 1e-3, 1.0 / var, mean_batch)

    rows = []
    chunks = [p.chunks for p in parts]
    if obs.step_ms is not None and sum(chunks) > 0:
        # the sequences of a batch see the same step: one independent gap per step, not per
        # sequence
        rows.append(
            row("decode_step", [p.chunk_x for p in parts], chunks, obs.step_ms,
                obs.step_samples / max(mean_batch, 1.0), obs.step_cv)
        )  # fmt: skip
    if obs.ttft_ms is not None and obs.concurrency == 1:
        xs = [p.first_token_x.copy() for p in parts]
        for x, p in zip(xs, parts, strict=True):
            x[-1] = p.requests  # the per-request constant outside the engine, once per request
        requests = [p.requests for p in parts]
        rows.append(row("ttft", xs, requests, obs.ttft_ms, obs.ttft_samples, obs.ttft_cv))
    return rows


class _Solution(NamedTuple):
    """θ, its standard errors, each coefficient's data share (see the module docstring), and
    θ's covariance (zero for the coefficients held); the request overhead last."""

    theta: FloatArray  # [coefficients + 1]
    se: FloatArray  # [coefficients + 1]
    share: FloatArray  # [coefficients + 1]
    cov: FloatArray  # [coefficients + 1, coefficients + 1]
    chi2: float  # Σ weighted squared residuals of the data rows


def _solve(rows: list[DesignRow], prior: FloatArray, free: npt.NDArray[np.bool_]) -> _Solution:
    """Regularised least squares with θ ≥ 0 over the ``free`` coefficients (the rest held at
    the prior)."""
    from scipy.optimize import lsq_linear  # scipy costs ~0.2 s to import: only here

    x = np.stack([r.x for r in rows])  # [rows, coefficients + 1]
    y = np.asarray([r.y for r in rows])
    sw = np.sqrt(np.asarray([r.weight for r in rows]))
    # prior scale: the value at which a term alone explains a typical observation
    with np.errstate(divide="ignore", invalid="ignore"):
        alone = np.where(x > 0, y[:, None] / x, np.nan)
    scale = np.asarray(
        [
            float(np.median(col[np.isfinite(col)])) if np.isfinite(col).any() else 1.0
            for col in alone.T
        ]
    )
    idx = np.nonzero(free)[0]
    s = scale[idx]
    # θ = prior + s ⊙ z: data rows in relative residuals, prior rows z ≈ 0
    a_data = (x[:, idx] * s) / y[:, None] * sw[:, None]
    b_data = (y - x @ prior) / y * sw
    a = np.vstack([a_data, np.sqrt(PRIOR_WEIGHT) * np.eye(idx.size)])
    b = np.concatenate([b_data, np.zeros(idx.size)])
    lower = np.zeros(idx.size)  # costs are ≥ 0; time scales > 0
    lower[[i for i, j in enumerate(idx) if j < len(NAMES) and NAMES[j].endswith("_scale")]] = 1e-6
    z_lo = (lower - prior[idx]) / s
    res = lsq_linear(a, b, bounds=(z_lo, np.full(idx.size, np.inf)), method="bvls")
    theta = prior.copy()
    # prior + s·z can round a hair below a bound the solver met exactly: keep θ ≥ its bound
    theta[idx] = np.maximum(prior[idx] + s * res.x, lower)
    r = a @ res.x - b
    dof = max(len(rows) - idx.size, 1)
    chi2 = float((r[: len(rows)] ** 2).sum()) / dof
    cov = np.linalg.pinv(a.T @ a)
    se = np.zeros_like(prior)
    share = np.zeros_like(prior)
    se[idx] = s * np.sqrt(np.diag(cov) * max(chi2, CHI2_FLOOR))
    share[idx] = np.clip(1.0 - PRIOR_WEIGHT * np.diag(cov), 0.0, 1.0)
    full = np.zeros((prior.size, prior.size))
    full[np.ix_(idx, idx)] = np.outer(s, s) * cov * max(chi2, CHI2_FLOOR)
    return _Solution(theta=theta, se=se, share=share, cov=full, chi2=chi2 * dof)


def _solve_nested(
    rows: list[DesignRow], prior: FloatArray, free: npt.NDArray[np.bool_]
) -> _Solution:
    """:func:`_solve`, with the coefficients of :data:`ON_EVIDENCE` held at their prior unless
    freeing them lowers the data rows' weighted χ² by more than :data:`EVIDENCE_CHI2`, one at a
    time (forward selection: the one that lowers it most first)."""
    extra = [j for j, n in enumerate(NAMES) if n in ON_EVIDENCE and free[j]]
    current = free.copy()
    current[extra] = False
    best = _solve(rows, prior, current)
    while extra:
        trials = []
        for j in extra:
            trial = current.copy()
            trial[j] = True
            trials.append((_solve(rows, prior, trial), j))
        solution, j = min(trials, key=lambda t: t[0].chi2)
        if best.chi2 - solution.chi2 <= EVIDENCE_CHI2:
            break
        best, current[j] = solution, True
        extra.remove(j)
    return best


def fit_profile(
    deployment: DeploymentConfig,
    observations: Sequence[Observation],
    *,
    time_scale: float = 1.0,
    seed: int = 0,
    partial: bool = False,
) -> CalibrationProfile:
    """Fit the coefficients of ``deployment``'s step-time model to ``observations``; the profile
    is marked unusable when the fit explains too little (:func:`unusable_reason`), and
    ``partial`` when the observations are what an interrupted sweep completed."""
    if not observations:
        raise ConfigError("no observations to calibrate from")
    # the terms are for one TP: pin the one the deployment resolves to
    deployment = deployment.model_copy(update={"tp": resolve_deployment(deployment).tp})
    resolved = resolve_deployment(deployment)
    defaults = coefficient_values(deployment)
    prior = np.asarray([defaults[n] for n in NAMES] + [0.0])
    cost = build_cost_model(resolved)
    rows = _design(
        cost, observations, prior, time_scale=time_scale, seed=seed,
        max_num_seqs=deployment.max_num_seqs,
    )  # fmt: skip
    x = np.stack([r.x for r in rows])
    # a coefficient is fitted when its term appears in some row (no drafter, no TP: held)
    solution = _solve_nested(rows, prior, np.abs(x).sum(axis=0) > 0)
    theta = solution.theta
    fitted = with_coefficients(deployment, {n: float(theta[j]) for j, n in enumerate(NAMES)})
    overhead = float(theta[-1]) if any(r.metric == "ttft" for r in rows) else None
    coefficients = _coefficients(solution, prior)
    points = _points(rows, x @ theta)
    concs = [o.concurrency for o in observations]
    ks = [o.k for o in observations if o.k > 0]
    rms = float(np.sqrt(np.mean([p.residual_pct**2 for p in points])))
    why = unusable_reason(rms, coefficients)
    return CalibrationProfile(
        deployment=fitted,
        deployment_description=resolved.describe(),
        functional_form=FUNCTIONAL_FORM,
        coefficients=coefficients,
        request_overhead_s=overhead,
        frontend_request_s=fit_frontend(fitted, observations, overhead, time_scale=time_scale),
        points=points,
        rms_residual_pct=rms,
        covariance=solution.cov[: len(NAMES), : len(NAMES)].tolist(),
        valid_concurrency=(min(concs), max(concs)),
        valid_k=(min(ks), max(ks)) if ks else (0, 0),
        sources=sorted({o.source for o in observations}),
        time_scale=time_scale,
        usable=why is None,
        unusable_reason=why,
        partial=partial,
    )


def fit_frontend(
    deployment: DeploymentConfig,
    observations: Sequence[Observation],
    request_overhead_s: float | None,
    *,
    time_scale: float = 1.0,
) -> float | None:
    """The front-end's serial time per request (:attr:`CalibrationProfile.frontend_request_s`),
    from the baseline's levels at concurrency above 1, or None without one (or without
    ``request_overhead_s``).

    At concurrency 1 a request's time outside the engine is one constant: how much of it the
    front-end spends one request after another does not show. Above 1 it does: a closed loop's
    users whose requests finish in the same step send the next ones together, and vLLM's API
    server takes them through tokenization and input processing one after another, so they
    reach the engine later the more there are (vLLM's CPU build at concurrency 8: the first
    request's first token after 30 ms, the other seven's together after 100). Each level is
    simulated step by step with the fitted coefficients (:func:`simulate_level`) and the
    front-end's share of ``request_overhead_s`` chosen that brings the levels' mean TTFT
    closest, in relative terms. Only the baseline's: a speculative server's first token also
    waits for the drafter's work on the prompt, which the model prices less closely (its TTFT
    at concurrency 1 is the fit's worst row on vLLM's CPU build).
    """
    from scipy.optimize import minimize_scalar  # scipy costs ~0.2 s to import: only here

    if request_overhead_s is None or request_overhead_s <= 0.0:
        return None
    levels = [
        (o, o.ttft_ms * 1e-3 / time_scale)
        for o in observations
        if o.k == 0 and o.concurrency > 1 and o.ttft_ms
    ]
    if not levels:
        return None

    def loss(frontend: float) -> float:
        total = 0.0
        for o, ttft_s in levels:
            got = simulate_level(
                deployment, o.concurrency, 0, None, o.prompt_tokens, o.output_tokens,
                request_overhead_s=request_overhead_s, frontend_s=frontend,
            )  # fmt: skip
            total += (got.ttft_ms * 1e-3 / ttft_s - 1.0) ** 2
        return total

    # a coarse grid first (the loss steps where a request moves to another front-end batch),
    # then Brent's method between the best point's neighbours
    grid = np.linspace(0.0, request_overhead_s, FRONTEND_GRID)
    values = [loss(float(g)) for g in grid]
    best = int(np.argmin(values))
    lo, hi = grid[max(best - 1, 0)], grid[min(best + 1, grid.size - 1)]
    res = minimize_scalar(
        loss, bounds=(float(lo), float(hi)), method="bounded",
        options={"xatol": 0.005 * request_overhead_s},
    )  # fmt: skip
    return float(res.x) if res.fun < values[best] else float(grid[best])


def _design(
    cost: StepCostModel,
    observations: Sequence[Observation],
    prior: FloatArray,
    *,
    time_scale: float,
    seed: int,
    max_num_seqs: int,
) -> list[DesignRow]:
    """Every observation's rows, its measured times divided by ``time_scale``."""
    rows = [
        row
        for i, o in enumerate(observations)
        for row in design_rows(cost, o, max_num_seqs, prior, seed + i)
    ]
    if not rows:
        raise ConfigError("the observations carry no decode step time or TTFT")
    return [replace(r, y=r.y / time_scale) for r in rows]


def _coefficients(solution: _Solution, prior: FloatArray) -> list[FittedCoefficient]:
    theta, se, share = solution.theta, solution.se, solution.share
    return [
        FittedCoefficient(
            name=n,
            value=float(theta[j]),
            prior=float(prior[j]),
            standard_error=float(se[j]),
            data_share=float(share[j]),
            determined_by=_determined_by(float(theta[j]), float(se[j]), float(share[j])),
        )
        for j, n in enumerate(NAMES)
    ]


def _points(rows: list[DesignRow], fitted: FloatArray) -> list[CalibrationPoint]:
    """Each row beside the fit: observed and fitted times, and the relative residual."""
    return [
        CalibrationPoint(
            label=r.obs.label,
            source=r.obs.source,
            metric="ttft" if r.metric == "ttft" else "decode_step",
            concurrency=r.obs.concurrency,
            k=r.obs.k,
            requests=int(r.obs.prompt_tokens.size),
            prompt_tokens=float(r.obs.prompt_tokens.mean()),
            output_tokens=float(r.obs.output_tokens.mean()),
            alpha_by_pos=list(r.obs.alpha_by_pos) if r.obs.alpha_by_pos else None,
            mean_batch=r.mean_batch,
            observed_ms=r.y * 1e3,
            fitted_ms=float(f) * 1e3,
            residual_pct=float((f - r.y) / r.y * 100.0),
            weight=r.weight,
        )
        for r, f in zip(rows, fitted, strict=True)
    ]


def unusable_reason(
    rms_residual_pct: float, coefficients: Sequence[FittedCoefficient]
) -> str | None:
    """Why a fit explains too little to price steps with, or None: an RMS relative residual
    above :data:`MAX_RMS_RESIDUAL_PCT`, or no coefficient the data moved off its prior (every
    one ``set by: prior`` — the profile would only repeat the defaults)."""
    why = []
    if not math.isfinite(rms_residual_pct) or rms_residual_pct > MAX_RMS_RESIDUAL_PCT:
        why.append(
            f"the RMS residual is {rms_residual_pct:.0f}%, above the {MAX_RMS_RESIDUAL_PCT:g}% a "
            "usable fit stays within"
        )
    if all(c.determined_by == "prior" for c in coefficients):
        why.append("no coefficient left its prior: the data set none of them")
    if not why:
        return None
    return (
        "; ".join(why)
        + " — check --model/--gpu/--tp/--dtype/--method (the server's deployment) and "
        "--time-scale"
    )


def _determined_by(
    value: float, se: float, share: float
) -> Literal["data", "data, loosely", "prior"]:
    if share < 0.5:
        return "prior"
    return "data" if se <= 0.05 * max(abs(value), 1e-12) else "data, loosely"
