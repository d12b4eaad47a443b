"""Monte-Carlo against closed forms and against the per-token reference simulator.

Tolerances come from the sample: a z-bound of 4.5 standard errors (two-sided ~7e-6 per check)
plus, where stated, a deterministic bias bound.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from alphagate import theory
from alphagate.sim.closed_loop import run_closed_loop
from alphagate.sim.cost import StepCostModel
from alphagate.sim.engine import run_engine
from alphagate.sim.kernel import accepted_drafts
from alphagate.sim.results import summarize
from alphagate.sim.run import run_paired
from alphagate.sim.workload import ClosedLoop, OpenLoop
from alphagate.specs.workload import FixedLength, LognormalLength
from tests.sim.conftest import constant_cost, scenario
from tests.statistical.reference_sim import reference_simulate

Z = 4.5


def _emission_moments(alpha_by_pos: list[float]) -> tuple[float, float]:
    """Mean and variance of tokens per step e = a + 1, from P(e ≥ j) = Π_{i<j} α_i."""
    surv = np.concatenate([[1.0], np.cumprod(alpha_by_pos)])  # P(e ≥ j), j = 1..K+1
    j = np.arange(1, surv.size + 1)
    mean = surv.sum()
    second = ((2 * j - 1) * surv).sum()
    return float(mean), float(second - mean**2)


@pytest.mark.parametrize(("alpha", "k", "c"), [(0.7, 5, 0.05), (0.4, 3, 0.1), (0.9, 8, 0.02)])
# the per-step engine's 12 × 4000 tokens one step at a time: ~7 s of CPU over the three, `slow`
@pytest.mark.parametrize("fast", [True, pytest.param(False, marks=pytest.mark.slow)])
def test_batch_1_constant_cost_matches_closed_form(
    alpha: float, k: int, c: float, fast: bool
) -> None:
    """One user, every target pass 1 s, every draft c s: the throughput speedup is E/(K·c + 1)."""
    cost = constant_cost(c)
    length = 4000
    n = 12
    sc = scenario(
        k,
        alpha,
        ClosedLoop(users=1),
        n,
        prompt=FixedLength(value=1),
        output=FixedLength(value=length),
    )
    rng = np.random.default_rng(7)
    tr = run_closed_loop(cost, sc, rng) if fast else run_engine(cost, sc, rng)
    decode_steps = tr.step_n_decode.sum()
    tokens_per_step = (tr.step_tokens.sum() - n) / decode_steps  # first tokens come from prefill
    mean_e, var_e = _emission_moments([alpha] * k)
    assert mean_e == pytest.approx(float(theory.expected_tokens_per_pass(alpha, k)))
    se = math.sqrt(var_e / decode_steps)
    truncation_bias = k / (length / mean_e)  # the last step of each request emits < its draw
    assert abs(tokens_per_step - mean_e) < Z * se + truncation_bias
    # with constant step costs the paired speedup is tokens/step ÷ (K·c + 1), up to the prefill steps
    p = run_paired(cost, sc, np.random.default_rng(7))
    predicted = float(theory.speedup(alpha, k, c, 1.0))
    prefill_bias = n * (1 + c) / float(tr.step_dt_s.sum())
    rel_se = se / mean_e
    assert p.speedup.throughput_speedup == pytest.approx(
        predicted, rel=Z * rel_se + truncation_bias / mean_e + prefill_bias
    )


@pytest.mark.parametrize("alpha_by_pos", [[0.7] * 5, [0.9, 0.8, 0.6, 0.4]])
def test_realised_rho_tau_and_per_position(
    cost_8b: StepCostModel, alpha_by_pos: list[float]
) -> None:
    k = len(alpha_by_pos)
    sc = scenario(k, alpha_by_pos, ClosedLoop(users=32), 400)
    s = summarize(run_closed_loop(cost_8b, sc, np.random.default_rng(3)))
    drafts = s.num_drafts
    mean_e, var_e = _emission_moments(alpha_by_pos)
    assert s.mean_acceptance_length is not None and s.draft_acceptance_rate is not None
    assert abs(s.mean_acceptance_length - mean_e) < Z * math.sqrt(var_e / drafts)
    assert abs(s.draft_acceptance_rate - (mean_e - 1) / k) < Z * math.sqrt(var_e / drafts) / k
    uncond = theory.unconditional_from_conditional(alpha_by_pos)
    assert s.per_position_acceptance is not None
    for got, p in zip(s.per_position_acceptance, uncond, strict=True):
        assert abs(got - p) < Z * math.sqrt(p * (1 - p) / drafts)


def test_accepted_counts_distribution() -> None:
    """One uniform per step gives P(a ≥ j) = Π α: checked per j with binomial errors."""
    rng = np.random.default_rng(11)
    alpha = np.array([0.9, 0.6, 0.5])
    thr = theory.unconditional_from_conditional(alpha)[None, :]
    n = 200_000
    a = accepted_drafts(rng.random(n), thr, np.zeros(n, dtype=np.int64))
    for j in range(1, 4):
        p = float(np.prod(alpha[:j]))
        assert abs((a >= j).mean() - p) < Z * math.sqrt(p * (1 - p) / n)


def _replications(run, reps: int) -> np.ndarray:  # type: ignore[no-untyped-def,type-arg]
    return np.array([run(seed) for seed in range(reps)])


@pytest.mark.parametrize(
    ("users", "slots"),
    # one user runs the 60 requests one after another, ~4 s of CPU: `slow`
    [pytest.param(1, 256, marks=pytest.mark.slow), (4, 256), (6, 3)],
)
def test_vectorized_agrees_with_per_token_reference_closed_loop(
    cost_8b: StepCostModel, users: int, slots: int
) -> None:
    """Mean E2E and tokens per chunk over independent replications: vectorized vs per-token loop
    (6 users on 3 slots: half of them queue)."""
    k, alpha, n, reps = 3, 0.6, 60, 10

    def stats_vec(seed: int, fast: bool) -> tuple[float, float, float]:
        sc = scenario(
            k,
            alpha,
            ClosedLoop(users=users),
            n,
            seed=seed,
            output=LognormalLength(mean=48, sigma=0.5),
            max_num_seqs=slots,
        )
        rng = np.random.default_rng(1000 + seed)
        tr = run_closed_loop(cost_8b, sc, rng) if fast else run_engine(cost_8b, sc, rng)
        s = summarize(tr)
        return (
            float(np.mean(tr.finish_s - tr.arrival_s)),
            s.mean_tokens_per_chunk,
            float(tr.finish_s.max()),
        )

    def stats_ref(seed: int) -> tuple[float, float, float]:
        sc = scenario(
            k,
            alpha,
            ClosedLoop(users=users),
            n,
            seed=seed,
            output=LognormalLength(mean=48, sigma=0.5),
        )
        r = sc.requests
        ref = reference_simulate(
            cost_8b,
            r.prompt_len.tolist(),
            r.output_len.tolist(),
            [[alpha] * k] * n,
            k,
            users=users,
            arrivals=None,
            max_num_seqs=slots,
            seed=2000 + seed,
        )
        e2e = np.array(ref.finish) - np.array(ref.arrival)
        return float(e2e.mean()), float(np.mean(ref.chunk_tokens)), float(max(ref.finish))

    ref = _replications(stats_ref, reps)
    for fast in (False, True):
        vec = _replications(lambda s, f=fast: stats_vec(s, f), reps)
        for col, name in enumerate(("mean E2E", "tokens per chunk")):
            diff = vec[:, col].mean() - ref[:, col].mean()
            se = math.sqrt(vec[:, col].var(ddof=1) / reps + ref[:, col].var(ddof=1) / reps)
            assert abs(diff) < Z * se, f"{name} (fast={fast}): diff {diff:.4g} vs se {se:.4g}"


def test_vectorized_agrees_with_reference_open_loop(cost_8b: StepCostModel) -> None:
    k, alpha, n, reps = 4, 0.7, 80, 10
    arrivals = OpenLoop(rate=30.0, burstiness=0.7)

    def one(seed: int, use_ref: bool) -> float:
        sc = scenario(k, alpha, arrivals, n, seed=seed, max_num_seqs=8)
        r = sc.requests
        if use_ref:
            res = reference_simulate(
                cost_8b,
                r.prompt_len.tolist(),
                r.output_len.tolist(),
                [[alpha] * k] * n,
                k,
                users=None,
                arrivals=r.arrival_s.tolist(),
                max_num_seqs=8,
                seed=3000 + seed,
            )
            return float(np.mean(np.array(res.finish) - np.array(res.arrival)))
        tr = run_engine(cost_8b, sc, np.random.default_rng(4000 + seed))
        return float(np.mean(tr.finish_s - tr.arrival_s))

    ref = _replications(lambda s: one(s, True), reps)
    vec = _replications(lambda s: one(s, False), reps)
    se = math.sqrt(ref.var(ddof=1) / reps + vec.var(ddof=1) / reps)
    assert abs(ref.mean() - vec.mean()) < Z * se


def test_open_loop_arrival_rate_is_not_clipped() -> None:
    """Gamma gaps with mean 1/rate: the realised rate matches within sampling error (no clipping)."""
    from alphagate.sim.workload import sample_requests
    from alphagate.specs.workload import WorkloadConfig

    for burstiness in (0.3, 1.0, 3.0):
        n = 50_000
        r = sample_requests(
            WorkloadConfig(),
            n,
            OpenLoop(rate=20.0, burstiness=burstiness),
            np.random.default_rng(5),
        )
        gaps = np.diff(r.arrival_s)
        cv = 1.0 / math.sqrt(burstiness)  # gamma gap coefficient of variation
        assert abs(gaps.mean() * 20.0 - 1.0) < Z * cv / math.sqrt(n)
        assert gaps.min() >= 0.0
