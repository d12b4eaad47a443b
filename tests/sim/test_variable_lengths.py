"""Drafts of variable length (suffix decoding) in the simulator: the kernel draws a step's drafted
and accepted tokens from the measured joint, the step engine counts them as vLLM does and prices
the verify pass they fill, and the closed form and the step-time model agree with it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from alphagate.core.traffic import TrafficClass
from alphagate.sim.cost import StepCostModel, build_cost_model
from alphagate.sim.engine import Scenario, run_engine
from alphagate.sim.kernel import drafted_and_accepted
from alphagate.sim.predict import model_speedup
from alphagate.sim.run import run_paired
from alphagate.sim.workload import (
    ClosedLoop,
    draft_steps_table,
    sample_requests,
    unconditional_table,
)
from alphagate.specs import DeploymentConfig, SuffixDrafter, WorkloadConfig, resolve_deployment
from alphagate.theory.acceptance import equivalent_alpha
from alphagate.theory.lengths import length_counters, profile_class

H100_8B = DeploymentConfig(model="llama-3.1-8b", weight_dtype="bf16", gpu="h100")
#: a measured-looking profile: a third of the steps draft nothing, long drafts mostly accepted
PROFILE = [
    [30.0],
    [8.0, 8.0],
    [3.0, 4.0, 3.0],
    [1.0, 3.0, 2.0, 2.0],
    [0.0, 0.0, 0.0, 0.0, 0.0],
    [0.0, 0.0, 2.0, 0.0, 0.0, 6.0],
]


def _suffix_cost(**update: object) -> StepCostModel:
    dep = H100_8B.model_copy(update={"drafter": SuffixDrafter(), **update})
    return build_cost_model(resolve_deployment(dep))


def _joint(steps: list[list[float]]) -> np.ndarray:
    k = len(steps) - 1
    j = np.zeros((k + 1, k + 1))
    for n, row in enumerate(steps):
        j[n, : n + 1] = row
    return j / j.sum()


def test_the_kernel_draws_steps_with_the_joints_shares() -> None:
    joint = _joint(PROFILE)
    cdf = np.cumsum(joint.ravel())[None]
    n = 200_000
    drafted, accepted = drafted_and_accepted(
        np.random.default_rng(0).random(n), cdf, np.zeros(n, dtype=np.int64)
    )
    assert np.all(accepted <= drafted)
    seen = np.zeros_like(joint)
    np.add.at(seen, (drafted, accepted), 1.0)
    # each cell a binomial proportion: within 5 standard errors
    se = np.sqrt(joint * (1 - joint) / n)
    assert np.all(np.abs(seen / n - joint) <= 5 * se + 1e-12)
    assert seen[4].sum() == 0 and seen[5, 3] == 0  # cells without mass are never drawn


def test_the_engine_counts_drafting_steps_only_and_their_tokens() -> None:
    """ρ and τ of a long run equal the profile's, within the sampling error of its steps; steps
    that drafted nothing are not drafts; draft tokens are what was drafted."""
    wl = WorkloadConfig()
    cls = profile_class("s", 1.0, PROFILE)
    k = 5
    users = 8
    reqs = sample_requests(wl, 600, ClosedLoop(users=users), np.random.default_rng(0))
    reqs = reqs.with_classes(np.zeros_like(reqs.class_idx))
    sc = Scenario(
        k, ClosedLoop(users=users), reqs, unconditional_table((cls,), k), 256,
        draft_steps=draft_steps_table((cls,), k),
    )  # fmt: skip
    t = run_engine(_suffix_cost(), sc, np.random.default_rng(1))
    c = length_counters(_joint(PROFILE))
    drafting = float(c.drafts)
    rho, tau = float(c.accepted / c.draft_tokens), float(1 + c.accepted / c.drafts)
    steps = t.num_drafts / drafting  # steps in all, from the drafting share
    assert t.num_drafts > 20_000
    assert t.num_draft_tokens / t.num_drafts == pytest.approx(
        float(c.draft_tokens / c.drafts), rel=5 / math.sqrt(t.num_drafts)
    )
    assert t.num_accepted_tokens / t.num_draft_tokens == pytest.approx(
        rho, rel=5 / math.sqrt(t.num_drafts)
    )
    assert 1 + t.num_accepted_tokens / t.num_drafts == pytest.approx(
        tau, rel=5 / math.sqrt(t.num_drafts)
    )
    assert sum(t.accepted_per_pos) == t.num_accepted_tokens
    assert steps > t.num_drafts  # the steps without a draft are not counted


def test_a_profile_of_whole_chains_is_the_chain() -> None:
    """All mass on L = K: the closed form gives the chain's speedup to the bit, and the step
    engine (another kernel, so other draws) the same speedup within its noise."""
    wl = WorkloadConfig()
    cost = _suffix_cost()
    chain = TrafficClass(name="c", share=1.0, alpha_by_pos=(0.8, 0.7, 0.6))
    reach = np.cumprod([1.0, 0.8, 0.7, 0.6])
    last = [float(x) for x in reach - np.append(reach[1:], 0.0)]
    as_profile = profile_class("c", 1.0, [[0.0], [0.0, 0.0], [0.0, 0.0, 0.0], last])
    assert as_profile.alpha == pytest.approx(float(equivalent_alpha([0.8, 0.7, 0.6])), abs=1e-8)
    for b in (1.0, 16.0, 200.0):
        assert model_speedup(cost, (as_profile,), 3, b, wl) == pytest.approx(
            model_speedup(cost, (chain,), 3, b, wl), rel=1e-12
        )
    reqs = sample_requests(wl, 400, ClosedLoop(users=16), np.random.default_rng(2))
    reqs = reqs.with_classes(np.zeros_like(reqs.class_idx))
    speed = []
    for c in (chain, as_profile):
        sc = Scenario(
            3, ClosedLoop(users=16), reqs, unconditional_table((c,), 3), 256,
            draft_steps=draft_steps_table((c,), 3),
        )  # fmt: skip
        speed.append(run_paired(cost, sc, np.random.default_rng(3)).speedup.throughput_speedup)
    assert speed[0] == pytest.approx(speed[1], rel=0.02)


def test_closed_form_and_step_engine_agree_on_a_profile() -> None:
    wl = WorkloadConfig()
    cost = _suffix_cost()
    cls = (profile_class("s", 1.0, PROFILE),)
    for users in (4, 32):
        reqs = sample_requests(wl, 30 * users, ClosedLoop(users=users), np.random.default_rng(4))
        reqs = reqs.with_classes(np.zeros_like(reqs.class_idx))
        sc = Scenario(
            5, ClosedLoop(users=users), reqs, unconditional_table(cls, 5), 256,
            draft_steps=draft_steps_table(cls, 5),
        )  # fmt: skip
        sim = run_paired(cost, sc, np.random.default_rng(5)).speedup.throughput_speedup
        assert sim == pytest.approx(model_speedup(cost, cls, 5, float(users), wl), rel=0.05)


def test_a_cap_below_the_profile_cuts_its_drafts() -> None:
    """Verifying at most k tokens a step (the scheduler cuts a longer draft) keeps the steps
    and moves the longer drafts to k, their acceptance capped at k."""
    cls = (profile_class("s", 1.0, PROFILE),)
    full, cut = draft_steps_table(cls, 5), draft_steps_table(cls, 2)
    assert full is not None and cut is not None and cut.shape == (1, 3, 3)
    assert cut.sum() == pytest.approx(1.0)
    assert cut[0, 2, 2] == pytest.approx(full[0, 2:, 2:].sum())  # L ≥ 2 accepting ≥ 2
    assert cut[0, 2, 1] == pytest.approx(full[0, 2:, 1].sum())
    assert draft_steps_table((TrafficClass(name="x", share=1.0, alpha=0.5),), 3) is None


def test_suffix_decoding_pays_its_host_costs_per_sequence_and_even_without_a_draft() -> None:
    """The tree walks cost per decoding sequence; the suffix server runs without async
    scheduling (vLLM turns it off for suffix decoding), so a step where nothing was drafted
    still pays what async scheduling would have hidden; the float path is the array path."""
    cost = _suffix_cost()
    t = cost.terms(k=np.asarray([0.0, 0.0, 1.5]), n_decode=8.0, ctx_decode=8000.0,
                   proposing=np.asarray([False, True, True]))  # fmt: skip
    assert t.host_sync.tolist() == [0.0, 1.0, 1.0]
    assert t.host_draft.tolist() == [0.0, 8.0, 8.0]
    rng = np.random.default_rng(6)
    for _ in range(50):
        k, n = float(rng.choice([0.0, rng.uniform(0, 6)])), float(rng.integers(1, 300))
        on = bool(rng.integers(0, 2))
        array = cost.step_time(k=k, n_decode=n, ctx_decode=n * 900.0, proposing=on)
        one = cost.step_seconds(k=k, n_decode=n, ctx_decode=n * 900.0, proposing=on)
        assert float(array) == one
