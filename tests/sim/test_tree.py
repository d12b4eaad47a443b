"""SGLang draft trees in the step-time model (:mod:`alphagate.sim.tree`): a chain shape prices as
the chain; a tree's verify pass is that of num_draft_tokens positions; its later draft forwards
run top-k rows per sequence; its measured histogram becomes α per position that gives back the
same distribution in the acceptance kernel; and the best shape per batch follows the costs."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from alphagate.core.traffic import TrafficClass
from alphagate.sim.cost import TERMS, StepCostModel, build_cost_model
from alphagate.sim.kernel import acceptance_histogram, accepted_drafts, decode_capacity
from alphagate.sim.tree import (
    TreeOption,
    best_tree_model,
    tree_alpha_by_pos,
    tree_class,
    tree_cost,
)
from alphagate.specs import DeploymentConfig, WorkloadConfig, resolve_deployment
from alphagate.specs.tree import TreeShape, chain_shape
from alphagate.specs.workload import FixedLength
from alphagate.theory.acceptance import expected_tokens_per_pass_by_pos

EAGLE3_8B = DeploymentConfig(model="llama-3.1-8b", weight_dtype="bf16", gpu="h100")  # EAGLE-3
WORKLOAD = WorkloadConfig(
    prompt_len=FixedLength(value=512),
    output_len=FixedLength(value=256),
    classes=(TrafficClass(name="all", share=1.0, alpha=0.6),),
)


@pytest.fixture(scope="module")
def cost() -> StepCostModel:
    return build_cost_model(resolve_deployment(EAGLE3_8B))


def _terms(c: StepCostModel, k: int, b: float, ctx: float = 700.0) -> dict[str, float]:
    return dict(
        zip(TERMS, (float(x) for x in c.terms(k=k, n_decode=b, ctx_decode=b * ctx)), strict=True)
    )


@pytest.mark.parametrize("k", [1, 3, 5])
def test_a_chain_shape_prices_as_the_chain(cost: StepCostModel, k: int) -> None:
    chain = tree_cost(cost, chain_shape(k))
    for b in (1.0, 16.0, 200.0):
        assert chain.step_seconds(k=k, n_decode=b, ctx_decode=b * 700) == cost.step_seconds(
            k=k, n_decode=b, ctx_decode=b * 700
        )
    assert decode_capacity(8192, k, chain.draft_slots) == decode_capacity(8192, k, cost.draft_slots)


def test_the_verify_pass_has_num_draft_tokens_positions(cost: StepCostModel) -> None:
    """The target's terms of a tree of 8 verified positions are a chain's of K = 7."""
    tree = tree_cost(cost, TreeShape(steps=3, topk=4, draft_tokens=8))
    for b in (1.0, 32.0, 128.0):
        t, c = _terms(tree, 3, b), _terms(cost, 7, b)
        for name in TERMS:
            if name.startswith("target_"):
                assert t[name] == pytest.approx(c[name], rel=1e-12), name
        assert t["host_token"] == c["host_token"] == b * 8
    # and it takes 8 of the token budget per sequence
    assert decode_capacity(8192, 3, tree.draft_slots) == 8192 // 8


def test_later_draft_forwards_run_topk_rows_per_sequence(cost: StepCostModel) -> None:
    """One more draft step adds one forward over top-k rows per sequence: at batch B it costs
    what a one-row forward costs at batch top-k · B."""

    def extra(topk: int, b: float) -> float:
        wide = replace(cost, verify_width=9, draft_rows=topk)
        two, one = (_terms(wide, k, b) for k in (2, 1))
        return sum(two[n] - one[n] for n in TERMS if n.startswith("draft_"))

    for b in (1.0, 8.0, 40.0):
        assert extra(4, b) == pytest.approx(extra(1, 4 * b), rel=1e-12)
        assert extra(4, b) > extra(1, b)


def test_step_time_one_step_and_arrays_agree_on_a_tree(cost: StepCostModel) -> None:
    tree = tree_cost(cost, TreeShape(steps=5, topk=4, draft_tokens=8))
    for b, pre in ((1.0, 0.0), (24.0, 512.0), (180.0, 0.0)):
        arr = float(tree.step_time(k=5, n_decode=b, ctx_decode=b * 600, prefill_tokens=pre))
        one = tree.step_seconds(k=5, n_decode=b, ctx_decode=b * 600, prefill_tokens=pre)
        assert one == pytest.approx(arr, rel=1e-12)


def test_a_histogram_becomes_alpha_that_gives_it_back() -> None:
    shape = TreeShape(steps=5, topk=4, draft_tokens=8)
    hist = [36.0, 294.0, 6.0, 29.0, 0.0, 0.0]
    cls = tree_class(TrafficClass(name="c", share=1.0), shape, histogram=hist)
    assert cls.alpha_by_pos is not None and len(cls.alpha_by_pos) == 5
    tau = 1 + sum(j * n for j, n in enumerate(hist)) / sum(hist)
    assert float(expected_tokens_per_pass_by_pos(cls.conditional(5))) == pytest.approx(tau)
    # the acceptance kernel draws the same distribution (a multinomial's 5-sigma bounds)
    n = 200_000
    thr = np.cumprod(cls.conditional(5))[None, :]
    a = accepted_drafts(np.random.default_rng(0).random(n), thr, np.zeros(n, dtype=np.int64))
    got = acceptance_histogram(a, 5) / n
    p = np.asarray(hist) / sum(hist)
    assert np.all(np.abs(got - p) <= 5 * np.sqrt(p * (1 - p) / n) + 1e-12)
    with pytest.raises(ValueError, match="no verify passes"):
        tree_alpha_by_pos([0.0, 0.0], 1)


def test_a_tau_without_histogram_gives_that_tau() -> None:
    cls = tree_class(TrafficClass(name="c", share=1.0), chain_shape(4), tau=2.3)
    assert float(expected_tokens_per_pass_by_pos(cls.conditional(4))) == pytest.approx(2.3)


def test_the_best_shape_follows_the_costs(cost: StepCostModel) -> None:
    base = TrafficClass(name="all", share=1.0)
    chain = TreeOption(chain_shape(3), (tree_class(base, chain_shape(3), tau=2.5),))
    wide = TreeShape(steps=3, topk=4, draft_tokens=16)
    same = TreeOption(wide, (tree_class(base, wide, tau=2.5),))
    better = TreeOption(wide, (tree_class(base, wide, tau=3.6),))
    for b in (1.0, 64.0, 256.0):
        # the same acceptance for more verified positions and draft rows never wins
        shape, _ = best_tree_model(cost, [same, chain], b, WORKLOAD)
        assert shape in (chain.shape, None)
    shape, s = best_tree_model(cost, [chain, better], 1.0, WORKLOAD)
    assert shape == wide and s > 1.5
    # at a large batch the 16 positions per sequence cost more than they bring
    shape, _ = best_tree_model(cost, [chain, better], 256.0, WORKLOAD)
    assert shape != wide
