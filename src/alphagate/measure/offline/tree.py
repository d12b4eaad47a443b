"""EAGLE draft trees replayed offline, as SGLang builds and verifies them: the draft phase's beam,
the nodes one verify pass checks, and — greedy — how many drafts that pass accepts.

The draft phase (``python/sglang/srt/speculative/spec_utils.py``, ``select_top_k_tokens``):
step 0 keeps the top-k tokens of the drafter's first distribution, each scored by its draft
probability; every later step expands each of the k kept nodes into its own top-k children,
scores each child by its parent's score times its draft probability (a cumulative draft
probability), and keeps the k best of those k² as the next step's nodes. Every candidate of every
step — k, then k² per later step — is kept with its score, its token and its parent, laid out flat
as SGLang's ``score_list`` / ``token_list`` / ``parents_list`` are: step 0's k, then each later
step's k² in (parent's rank, child's rank) order.

The verify pass (``eagle_utils.py``, ``organize_draft_results``; the tree itself from
``sgl-kernel/csrc/speculative/eagle_utils.cu``, ``build_tree_efficient``): the
``num_draft_tokens − 1`` candidates of highest score, with a node whose parent was not selected
left out of the tree (the kernel skips it, warning). Greedy verification (the same file,
``VerifyTreeGreedy``) walks from the root, at each node to the child whose token is the target's
argmax there, and accepts the nodes walked: the longest root path the target agrees with. On a
known trajectory — the target's own greedy output, as :mod:`alphagate.measure.offline.replay`
replays it — that is the longest root path whose tokens are the trajectory's, the tree's
counterpart of a chain's run of leading matches (:func:`~alphagate.measure.offline.walk.greedy_run`).

Everything here is numpy over Q contexts at once; the drafter is a callback
(:data:`ChildrenFn`) — an EAGLE-3 head (:meth:`~alphagate.measure.offline.eagle3.Eagle3Head.
tree_drafts`) or, in tests, a toy whose top-k is set by hand. Ties between equal scores go to the
lower flat index here; SGLang's ``torch.topk`` leaves them to the device.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from alphagate.specs.tree import TreeShape

__all__ = [
    "ChildrenFn",
    "Expansion",
    "accepted_lengths",
    "expand",
    "tree_nodes",
    "tree_runs",
]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

#: ``children(depth, parent_rank, tokens) -> (probs, tokens)``: the drafter run on the k nodes
#: kept at ``depth`` (``tokens`` ``[Q, k]``; node r continues from the node of rank
#: ``parent_rank[q, r]`` kept one depth above, or from the root at depth 1), returning each
#: node's top-k children, ``[Q, k, k]`` probabilities (descending along the last axis) and tokens.
ChildrenFn = Callable[[int, IntArray, IntArray], tuple[FloatArray, IntArray]]


@dataclass(frozen=True)
class Expansion:
    """Every candidate the draft phase proposed at Q contexts (SGLang's flat layout)."""

    scores: FloatArray  # [Q, C] cumulative draft probability
    tokens: IntArray  # [Q, C]
    parent: IntArray  # [Q, C] flat index of the parent candidate; −1: a child of the root
    depth: IntArray  # [C] 1 … steps
    topk: int

    @property
    def steps(self) -> int:
        return int(self.depth[-1]) if self.depth.size else 0

    @classmethod
    def concat(cls, parts: list[Expansion]) -> Expansion:
        """The expansions of several groups of contexts (of one top-k and depth), in order."""
        return cls(
            np.concatenate([e.scores for e in parts]),
            np.concatenate([e.tokens for e in parts]),
            np.concatenate([e.parent for e in parts]),
            parts[0].depth,
            parts[0].topk,
        )


def _top(scores: FloatArray, k: int) -> IntArray:
    """Indices of the k highest scores along the last axis, best first (ties: lower index)."""
    order = np.argsort(-scores, axis=-1, kind="stable")
    return np.asarray(order[..., :k], dtype=np.int64)


def expand(
    root_probs: FloatArray, root_tokens: IntArray, children: ChildrenFn, steps: int
) -> Expansion:
    """The draft phase of ``steps`` steps from the first distribution's top-k (``[Q, k]``,
    best first), one :data:`ChildrenFn` call per step after the first."""
    q, k = root_probs.shape
    scores, tokens = [root_probs], [root_tokens]
    parents = [np.full((q, k), -1, dtype=np.int64)]
    depth = [np.ones(k, dtype=np.int64)]
    beam_score, beam_token = root_probs, root_tokens
    beam_flat = np.broadcast_to(np.arange(k, dtype=np.int64), (q, k))
    parent_rank = np.broadcast_to(np.arange(k, dtype=np.int64), (q, k))
    for d in range(2, steps + 1):
        p, tok = children(d - 1, np.ascontiguousarray(parent_rank), beam_token)  # [Q, k, k]
        cand = (beam_score[:, :, None] * p).reshape(q, k * k)
        scores.append(cand)
        tokens.append(tok.reshape(q, k * k))
        parents.append(np.repeat(beam_flat, k, axis=1))
        depth.append(np.full(k * k, d, dtype=np.int64))
        pick = _top(cand, k)  # the next step's nodes, best first
        start = k + (d - 2) * k * k
        parent_rank = pick // k
        beam_score = np.take_along_axis(cand, pick, axis=1)
        beam_token = np.take_along_axis(tokens[-1], pick, axis=1)
        beam_flat = start + pick
    return Expansion(
        np.concatenate(scores, axis=1),
        np.concatenate(tokens, axis=1).astype(np.int64),
        np.concatenate(parents, axis=1),
        np.concatenate(depth),
        k,
    )


def tree_nodes(exp: Expansion, shape: TreeShape) -> BoolArray:
    """``[Q, C]`` the candidates a verify pass of ``shape`` checks: among those of depth ≤
    ``shape.steps``, the ``draft_tokens − 1`` of highest score, less any whose parent is not
    in the tree."""
    q, c = exp.scores.shape
    within = int(np.searchsorted(exp.depth, shape.steps, side="right"))
    picked = _top(exp.scores[:, :within], shape.draft_nodes)
    chosen = np.zeros((q, c), dtype=bool)
    np.put_along_axis(chosen, picked, True, axis=1)
    rows = np.arange(q)
    keep: BoolArray = chosen.copy()
    for j in range(exp.topk, within):  # parents come before their children in the layout
        par = exp.parent[:, j]
        keep[:, j] &= keep[rows, np.maximum(par, 0)] | (par < 0)
    return keep


def accepted_lengths(exp: Expansion, nodes: BoolArray, truth: IntArray) -> IntArray:
    """``[Q]`` drafts a greedy verify pass accepts: the depth of the deepest tree node whose
    root path is the trajectory's tokens (``truth`` ``[Q, ≥ steps]``, the tokens after each
    context)."""
    q, c = exp.scores.shape
    rows = np.arange(q)
    on_path = np.zeros((q, c), dtype=bool)
    for j in range(c):
        par = exp.parent[:, j]
        up = np.where(par < 0, True, on_path[rows, np.maximum(par, 0)])
        on_path[:, j] = nodes[:, j] & up & (exp.tokens[:, j] == truth[:, exp.depth[j] - 1])
    return np.asarray(np.where(on_path, exp.depth[None, :], 0).max(axis=1, initial=0), np.int64)


def tree_runs(exp: Expansion, shapes: list[TreeShape], truth: IntArray) -> IntArray:
    """``[len(shapes), Q]`` accepted drafts per context for each shape of this expansion's
    top-k (and no more steps than it ran)."""
    out = np.zeros((len(shapes), exp.scores.shape[0]), dtype=np.int64)
    for i, shape in enumerate(shapes):
        if shape.topk != exp.topk or shape.steps > exp.steps:
            raise ValueError(f"tree {shape.label()} is not of this expansion (top-{exp.topk})")
        out[i] = accepted_lengths(exp, tree_nodes(exp, shape), truth)
    return out
