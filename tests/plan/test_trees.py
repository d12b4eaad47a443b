"""``plan --engine sglang`` with measured draft shapes (:mod:`alphagate.plan.trees`): the shape per
concurrency from a ``measure offline --tree`` result, the flags SGLang is launched with, and the
gate a tree gets (τ, not α: SGLang's accept rate of a tree divides by every verified node)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from alphagate.core.errors import ConfigError
from alphagate.core.traffic import TrafficClass
from alphagate.gate.rules import plan_rules
from alphagate.measure.estimate import estimate
from alphagate.measure.offline.results import OfflineClass, OfflineDetails, OfflineK, OfflineTree
from alphagate.measure.results import MeasureResult
from alphagate.plan import PlanRequest, build_plan
from alphagate.plan.trees import TAU_GATE_MARGIN, load_trees
from alphagate.specs.deployment import DeploymentConfig
from alphagate.specs.tree import TreeShape
from alphagate.specs.workload import FixedLength, WorkloadConfig
from tests.conftest import Cli

WIDE = TreeShape(steps=4, topk=4, draft_tokens=12)


def _by_k(taus: list[float]) -> list[OfflineK]:
    return [
        OfflineK(
            k=k,
            num_drafts=1000.0,
            draft_acceptance_rate=(tau - 1) / k,
            draft_acceptance_rate_ci=None,
            mean_acceptance_length=tau,
            mean_acceptance_length_ci=None,
            alpha_iid=None,
            alpha_iid_ci=None,
        )
        for k, tau in enumerate(taus, start=1)
    ]


def _tree(shape: TreeShape, hist: list[float]) -> OfflineTree:
    passes = sum(hist)
    acc = sum(j * n for j, n in enumerate(hist))
    return OfflineTree(
        shape=shape,
        verify_passes=passes,
        mean_acceptance_length=1 + acc / passes,
        mean_acceptance_length_ci=None,
        accept_rate=acc / passes / shape.draft_nodes,
        acceptance_length_histogram=hist,
        chain_mean_acceptance_length=None,
    )


def _offline(path: Path, trees: dict[str, list[OfflineTree]], taus: list[float]) -> Path:
    """A measure offline result with classes ``trees`` (each: its chain τ at K = 1 … and its
    trees)."""

    def cls(t: list[OfflineTree]) -> OfflineClass:
        return OfflineClass(
            requests=20,
            prompt_tokens=2000,
            output_tokens=4000,
            by_k=_by_k(taus),
            acceptance_length_histogram=[],
            trees=t,
        )

    details = OfflineDetails(
        drafter="eagle3 head", target="target", k=2, k_max=len(taus), semantics="greedy",
        temperature=0.0, top_p=1.0, top_k=0, draft_sampling="greedy", regenerated=False,
        seed=0, sample=None, requests_read=40, requests_used=40, prompt_tokens=4000,
        output_tokens=8000, truncated=0, retokenized=0, trajectory_agreement=1.0,
        bootstrap_resamples=0, wall_s=1.0, overall=cls(next(iter(trees.values()))),
        classes={n: cls(t) for n, t in trees.items()},
    )  # fmt: skip
    est = estimate(1000.0, 2000.0, 2000.0 * (taus[1] - 1) / 2, [], k=2)
    m = MeasureResult(
        verb="measure offline",
        source="log",
        overall=est,
        classes={n: est for n in trees},
        offline=details,
    )
    path.write_text(json.dumps(m.payload()))
    return path


def _request(trees_file: Path, concurrency: int = 2) -> PlanRequest:
    wl = WorkloadConfig(
        prompt_len=FixedLength(value=512),
        output_len=FixedLength(value=256),
        classes=(
            TrafficClass(name="code", share=0.5, alpha=0.6),
            TrafficClass(name="chat", share=0.5, alpha=0.6),
        ),
    )
    return PlanRequest(
        deployment=DeploymentConfig(model="llama-3.1-8b", gpu="h100"),
        workload=wl,
        concurrency=concurrency,
        peak_concurrency=128,
        engine="sglang",
        trees=load_trees([trees_file]),
        ranges=False,
        p99_budget=1.5,  # the chain policy's tail watch is not what these tests are about
    )


# a head whose top-1 chain rarely goes past one draft, but whose top-4 holds the token often
CHAIN = [1.7, 1.8, 1.85, 1.87]
GOOD_TREE = [40.0, 200.0, 300.0, 250.0, 210.0]  # τ ≈ 3.38 at 11 nodes


def test_a_tree_that_pays_at_small_batches_is_shipped_with_its_flags(tmp_path: Path) -> None:
    f = _offline(
        tmp_path / "o.json",
        {"code": [_tree(WIDE, GOOD_TREE)], "chat": [_tree(WIDE, GOOD_TREE)]},
        CHAIN,
    )
    plan = build_plan(_request(f))
    t = plan.sglang_tree
    assert t is not None and t.shipped == WIDE
    assert {s.label() for s in t.shapes} == {"1/1/2", "2/1/3", "3/1/4", "4/1/5", WIDE.label()}
    first = t.levels[0]
    assert first.concurrency == 1 and first.shape == WIDE and first.speedup > first.chain_speedup
    # at the peak the 12 verified positions per sequence no longer pay for themselves
    assert t.levels[-1].shape != WIDE
    flags = " ".join(plan.sglang_flags)
    assert "--speculative-eagle-topk 4 --speculative-num-draft-tokens 12" in flags
    assert "--speculative-num-steps 4" in flags
    assert flags in " ".join(plan.serve_candidate)
    assert t.mean_acceptance_length == pytest.approx(
        1 + sum(j * n for j, n in enumerate(GOOD_TREE)) / sum(GOOD_TREE)
    )
    assert t.tau_breakeven is not None and 1.0 <= t.tau_breakeven < t.mean_acceptance_length
    assert t.tau_gate == pytest.approx(t.tau_breakeven + TAU_GATE_MARGIN)
    assert plan.policy.startswith("SGLang EAGLE draft tree 4/4/12")
    # the gate is on τ, not on α: SGLang's accept rate of a tree is not a chain's ρ
    rules = plan_rules(plan, tmp_path / "plan.json")
    acc = [
        r for r in rules if r.metric in ("alpha", "draft_acceptance_rate", "mean_acceptance_length")
    ]
    assert [(r.metric, r.threshold) for r in acc] == [("mean_acceptance_length", t.tau_gate)]


def test_a_tree_no_better_than_the_chain_is_not_shipped(tmp_path: Path) -> None:
    """The same acceptance as the 4-draft chain, bought with 12 verified positions: the chain."""
    hist = [100.0, 100.0, 100.0, 100.0, 0.0]  # τ = 2.5 …
    chain = [1.9, 2.2, 2.4, 2.5]  # … and the chain of 4 reaches it too
    f = _offline(
        tmp_path / "o.json", {"code": [_tree(WIDE, hist)], "chat": [_tree(WIDE, hist)]}, chain
    )
    plan = build_plan(_request(f))
    t = plan.sglang_tree
    assert t is not None and t.shipped is not None and t.shipped.is_chain
    assert all(lv.shape is None or lv.shape.is_chain for lv in t.levels)
    assert "--speculative-eagle-topk 1" in " ".join(plan.sglang_flags)
    assert next(r.metric for r in plan_rules(plan, tmp_path / "p.json")) == "alpha"


def test_shapes_come_from_the_plans_classes(tmp_path: Path) -> None:
    # measured for code only: a plan with chat has no tree it can use for every class
    f = _offline(tmp_path / "o.json", {"code": [_tree(WIDE, GOOD_TREE)]}, CHAIN)
    req = _request(f)
    assert {t.class_name for t in req.trees} == {None, "code"}
    plan = build_plan(req)
    assert plan.sglang_tree is None  # chat is measured nowhere in that file
    # the same file given twice: which measurement of code would the plan believe?
    g = _offline(tmp_path / "g.json", {"code": [_tree(WIDE, GOOD_TREE)]}, CHAIN)
    with pytest.raises(ConfigError, match=r"measured in both o\.json and g\.json"):
        load_trees([f, g])


def test_plan_cli_prints_the_shape_per_concurrency(cli: Cli, tmp_path: Path) -> None:
    f = _offline(
        tmp_path / "o.json",
        {"code": [_tree(WIDE, GOOD_TREE)], "chat": [_tree(WIDE, GOOD_TREE)]},
        CHAIN,
    )
    out = tmp_path / "plan.md"
    r = cli.run(
        "plan", "--class", "code:0.5", "--class", "chat:0.5", "--concurrency", "2",
        "--peak-concurrency", "128", "--engine", "sglang", "--alpha-from", str(f),
        "--p99-budget", "1.5", "--out", str(out),
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "SGLang draft shape per concurrency" in r.output
    assert "SGLang ships: 4/4/12 at concurrency 2" in r.output
    md = out.read_text()
    assert "## SGLang draft tree, per concurrency" in md
    assert "| 1 | 4/4/12 |" in md
    assert "--speculative-eagle-topk 4 --speculative-num-draft-tokens 12" in md
    plan = json.loads(out.with_suffix(".json").read_text())
    assert plan["sglang_tree"]["shipped"] == {"steps": 4, "topk": 4, "draft_tokens": 12}
