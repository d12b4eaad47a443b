"""SGLang's EAGLE draft tree replayed offline (:mod:`alphagate.measure.offline.tree`): the draft
phase's beam, the verified nodes and the greedy accepted length, on hand-built trees from a toy
drafter whose top-k is set by hand, and against a naive recursive build of the same rules."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np
import pytest
from pydantic import ValidationError

from alphagate.measure.offline.tree import Expansion, expand, tree_nodes, tree_runs
from alphagate.measure.offline.walk import greedy_run
from alphagate.specs.tree import TreeShape, chain_shape, parse_tree_shape

Path = tuple[int, ...]
Dist = Callable[[Path], list[tuple[int, float]]]  # a path's children, best first


def toy(dist: Dist, q: int, k: int) -> tuple[np.ndarray, np.ndarray, Callable[..., object]]:
    """A drafter from ``dist`` (the same at every context): the root's top-k and the
    children callback, which follows each kept node's path."""
    root = dist(())[:k]
    root_p = np.tile([p for _, p in root], (q, 1))
    root_t = np.tile([t for t, _ in root], (q, 1))
    paths: list[list[Path]] = [[(t,) for t, _ in root] for _ in range(q)]

    def children(depth: int, parent_rank: np.ndarray, tokens: np.ndarray) -> object:
        nonlocal paths
        if depth > 1:
            paths = [
                [paths[i][parent_rank[i, r]] + (int(tokens[i, r]),) for r in range(k)]
                for i in range(q)
            ]
        p = np.zeros((q, k, k))
        t = np.zeros((q, k, k), dtype=np.int64)
        for i, r in itertools.product(range(q), range(k)):
            kids = dist(paths[i][r])[:k]
            p[i, r], t[i, r] = [x for _, x in kids], [x for x, _ in kids]
        return p, t

    return root_p, root_t, children


def table(d: dict[Path, list[tuple[int, float]]]) -> Dist:
    return lambda path: d[path]


# a top-2 toy of depth 3: the root's children 1 (0.6) and 2 (0.3)
TOY = {
    (): [(1, 0.6), (2, 0.3)],
    (1,): [(3, 0.5), (4, 0.4)],
    (2,): [(5, 0.9), (6, 0.1)],
    (1, 3): [(7, 0.5), (8, 0.2)],
    (1, 4): [(9, 0.8), (10, 0.1)],
    (2, 5): [(11, 0.7), (12, 0.2)],
}


def test_expansion_keeps_sglangs_layout_and_beam() -> None:
    root_p, root_t, kids = toy(table(TOY), 1, 2)
    e = expand(root_p, root_t, kids, 3)  # type: ignore[arg-type]
    # step 0: 1, 2; step 1: children of 1 then of 2; the beam is (1,3) 0.30 and (2,5) 0.27
    assert e.tokens[0].tolist()[:6] == [1, 2, 3, 4, 5, 6]
    np.testing.assert_allclose(e.scores[0, :6], [0.6, 0.3, 0.30, 0.24, 0.27, 0.03])
    assert e.parent[0].tolist()[:6] == [-1, -1, 0, 0, 1, 1]
    # step 2 expands the beam in rank order: (1,3) first, then (2,5)
    assert e.tokens[0].tolist()[6:] == [7, 8, 11, 12]
    assert e.parent[0].tolist()[6:] == [2, 2, 4, 4]
    np.testing.assert_allclose(e.scores[0, 6:], [0.15, 0.06, 0.189, 0.054])
    assert e.depth.tolist() == [1, 1, 2, 2, 2, 2, 3, 3, 3, 3]


@pytest.mark.parametrize(
    ("draft_tokens", "truth", "accepted"),
    [
        # 4 nodes: 1 (.6), 2 (.3), 3 (.3), 5 (.27)
        (5, [1, 3, 7], 2),
        (5, [2, 5, 11], 2),
        (5, [1, 4, 9], 1),  # 4 (.24) is not verified
        # 6 nodes add 4 (.24) and 11 (.189)
        (7, [1, 4, 9], 2),  # 9 was never proposed: (1, 4) left the beam
        (7, [2, 5, 11], 3),
        (7, [1, 3, 7], 2),  # 7 (.15) is below the sixth node
        (8, [1, 3, 7], 3),
        (8, [4, 3, 7], 0),
    ],
)
def test_accepted_length_on_a_hand_built_tree(
    draft_tokens: int, truth: list[int], accepted: int
) -> None:
    root_p, root_t, kids = toy(table(TOY), 1, 2)
    e = expand(root_p, root_t, kids, 3)  # type: ignore[arg-type]
    shape = TreeShape(steps=3, topk=2, draft_tokens=draft_tokens)
    assert tree_runs(e, [shape], np.asarray([truth])).tolist() == [[accepted]]


def test_fewer_steps_verify_only_the_shallow_candidates() -> None:
    root_p, root_t, kids = toy(table(TOY), 1, 2)
    e = expand(root_p, root_t, kids, 3)  # type: ignore[arg-type]
    two = TreeShape(steps=2, topk=2, draft_tokens=7)  # all 6 candidates of depth ≤ 2
    nodes = tree_nodes(e, two)
    assert nodes[0].tolist() == [True] * 6 + [False] * 4
    assert tree_runs(e, [two], np.asarray([[2, 5, 11]])).tolist() == [[2]]


def test_a_node_whose_parent_is_not_verified_is_left_out() -> None:
    """SGLang's tree kernel skips a selected node whose parent was not selected (possible
    only on ties or NaN there); here a child scored above its parent by hand."""
    e = Expansion(
        scores=np.asarray([[0.9, 0.1, 0.05, 0.5]]),
        tokens=np.asarray([[1, 2, 3, 4]]),
        parent=np.asarray([[-1, -1, 0, 1]]),
        depth=np.asarray([1, 1, 2, 2]),
        topk=2,
    )
    nodes = tree_nodes(e, TreeShape(steps=2, topk=2, draft_tokens=3))  # picks 0.9 and 0.5
    assert nodes[0].tolist() == [True, False, False, False]
    assert tree_runs(
        e, [TreeShape(steps=2, topk=2, draft_tokens=3)], np.asarray([[2, 4]])
    ).tolist() == [[0]]


def _naive_accept(dist: Dist, shape: TreeShape, truth: list[int]) -> int:
    """The same rules built recursively, one node object at a time: beam of k per depth by
    cumulative probability, the draft_tokens − 1 best candidates of all depths, then the walk
    down the tree along the truth."""
    k = shape.topk
    # candidates: (score, order, path); order breaks ties as the flat layout does
    cands: list[tuple[float, int, Path]] = []
    beam = [((t,), p) for t, p in dist(())[:k]]
    cands += [(p, i, path) for i, (path, p) in enumerate(beam)]
    for _ in range(1, shape.steps):
        step = [((*path, t), s * p) for path, s in beam for t, p in dist(path)[:k]]
        base = len(cands)
        cands += [(s, base + i, path) for i, (path, s) in enumerate(step)]
        ranked = sorted(range(len(step)), key=lambda i: (-step[i][1], i))[:k]
        beam = [step[i] for i in ranked]
    best = sorted(cands, key=lambda c: (-c[0], c[1]))[: shape.draft_nodes]
    tree = {c[2] for c in best}
    tree = {p for p in tree if all(p[:i] in tree for i in range(1, len(p)))}
    n = 0
    while tuple(truth[: n + 1]) in tree and n < len(truth):
        n += 1
    return n


def _random_dist(rng: np.random.Generator, vocab: int, width: int) -> Dist:
    memo: dict[Path, list[tuple[int, float]]] = {}

    def dist(path: Path) -> list[tuple[int, float]]:
        if path not in memo:
            p = rng.dirichlet(np.full(vocab, 0.3))
            order = np.argsort(-p, kind="stable")[:width]
            memo[path] = [(int(t), float(p[t])) for t in order]
        return memo[path]

    return dist


def _walk(dist: Dist, rng: np.random.Generator, steps: int) -> list[int]:
    """A trajectory that follows one of the drafter's top choices at each step, so that long
    acceptances occur."""
    path: list[int] = []
    for _ in range(steps):
        kids = dist(tuple(path))
        path.append(kids[int(rng.integers(0, len(kids)))][0])
    return path


@pytest.mark.parametrize("topk", [1, 2, 3, 4])
def test_against_a_naive_build_of_the_same_rules(topk: int) -> None:
    rng = np.random.default_rng(topk)
    steps = 4
    for trial in range(20):
        dist = _random_dist(rng, vocab=6, width=topk)
        shapes = [
            TreeShape(steps=s, topk=topk, draft_tokens=n)
            for s in range(1, steps + 1)
            for n in sorted({2, s + 1, topk + 2, topk * s + 1})
            if n - 1 <= topk + (s - 1) * topk * topk and (topk > 1 or n == s + 1)
        ]
        truths = [list(rng.integers(0, 6, steps)) for _ in range(4)]
        truths += [_walk(dist, rng, steps) for _ in range(12)]  # mostly inside the top-k
        root_p, root_t, kids = toy(dist, len(truths), topk)
        e = expand(root_p, root_t, kids, steps)  # type: ignore[arg-type]
        got = tree_runs(e, shapes, np.asarray(truths))
        for i, shape in enumerate(shapes):
            want = [_naive_accept(dist, shape, t) for t in truths]
            assert got[i].tolist() == want, (trial, shape.label())


def test_top_k_one_is_the_chain() -> None:
    """A tree of top-k 1 verifies the drafter's greedy chain: the accepted length is the
    chain's run of leading matches."""
    rng = np.random.default_rng(7)
    dist = _random_dist(rng, vocab=3, width=1)
    chain = [dist(())[0][0]]
    for _ in range(4):
        chain.append(dist(tuple(chain))[0][0])
    truths = np.asarray([chain[:5]] + [list(rng.integers(0, 3, 5)) for _ in range(30)])
    root_p, root_t, kids = toy(dist, len(truths), 1)
    e = expand(root_p, root_t, kids, 5)  # type: ignore[arg-type]
    runs = tree_runs(e, [chain_shape(k) for k in range(1, 6)], truths)
    drafts = np.tile(chain[:5], (len(truths), 1))
    for k in range(1, 6):
        want = greedy_run(drafts, np.full(len(truths), k), truths)
        assert runs[k - 1].tolist() == want.tolist()
    assert runs[4, 0] == 5


def test_shape_rules_are_sglangs() -> None:
    assert parse_tree_shape("5:4:8") == TreeShape(steps=5, topk=4, draft_tokens=8)
    assert TreeShape(steps=5, topk=4, draft_tokens=8).candidates == 4 + 4 * 16
    assert chain_shape(3).label() == "3/1/4"
    with pytest.raises(ValidationError, match="num_steps \\+ 1 = 4"):
        TreeShape(steps=3, topk=1, draft_tokens=6)
    with pytest.raises(ValidationError, match="propose only 2"):
        TreeShape(steps=1, topk=2, draft_tokens=4)
    with pytest.raises(ValueError, match="STEPS:TOPK:DRAFT_TOKENS"):
        parse_tree_shape("5x4")
    assert TreeShape(steps=6, topk=2, draft_tokens=4).depth == 3
