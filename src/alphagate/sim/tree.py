"""SGLang's EAGLE draft trees in the step-time model: what one tree step costs, the acceptance
it gives, and the best tree per batch size.

**Cost.** A tree of ``(num_steps, eagle_topk, num_draft_tokens)`` is priced as a speculative step
of K = ``num_steps`` with two widths changed (:class:`~alphagate.sim.cost.StepCostModel`'s
``verify_width`` and ``draft_rows``):

- the verify pass runs ``num_draft_tokens`` query positions per sequence — the last verified
  token and its ``num_draft_tokens − 1`` nodes — with a tree mask over them, so its GEMMs carry
  B · num_draft_tokens rows and its attention as many query rows (SGLang's
  ``resolve_num_tokens_per_req``, ``python/sglang/srt/speculative/spec_utils.py``: the
  ``target_verify`` width is ``speculative_num_draft_tokens``); those positions also take that
  much of the token budget (:func:`~alphagate.sim.kernel.decode_tokens`, through the model's
  ``draft_slots``);
- the draft phase runs its first forward over those positions (``draft_extend``: the same
  width) and ``num_steps − 1`` forwards over ``eagle_topk`` rows per sequence (``draft_decode``:
  ``speculative_eagle_topk``), each row reading its sequence's whole context (the draft cache is
  one slot line per rank: ``kernels/ops/speculative/cache_locs.py``,
  ``generate_draft_decode_kv_indices``).

**Acceptance.** A step accepts j drafts with the probability its tree's measured histogram gives
(``measure offline --tree``, greedy and exact on the team's log). The tree's gain depends on how
often the trajectory's token is among the drafter's top-k at each node, which a chain's per-position
α (its top-1) does not determine — so a tree is planned from a measured histogram, not modelled
from α. The histogram becomes a class's per-position α, ``α_j = P(a ≥ j) ÷ P(a ≥ j − 1)``
(:func:`tree_alpha_by_pos`), which the acceptance kernel turns back into the same distribution
over K = ``num_steps`` drafts, and whose expected tokens per pass is the measured τ.
"""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

import numpy as np

from alphagate.core.traffic import TrafficClass
from alphagate.sim.cost import StepCostModel
from alphagate.sim.predict import MIN_GAIN, model_speedup
from alphagate.specs.tree import TreeShape
from alphagate.specs.workload import WorkloadConfig
from alphagate.theory.acceptance import alpha_from_mean_acceptance_length

__all__ = [
    "TreeOption",
    "best_tree_model",
    "tree_alpha_by_pos",
    "tree_class",
    "tree_cost",
    "tree_speedup",
]


def tree_cost(cost: StepCostModel, shape: TreeShape) -> StepCostModel:
    """The step-time model of SGLang running ``shape``: K = its steps, its verify width and its
    draft rows (a chain shape prices as the chain of its steps)."""
    return replace(
        cost,
        verify_width=shape.draft_tokens,
        draft_rows=shape.topk,
        draft_slots=cost.draft_slots + shape.draft_tokens - (shape.steps + 1),
    )


def tree_alpha_by_pos(histogram: list[float], steps: int) -> list[float]:
    """Per-position conditional α over ``steps`` drafts from a histogram of verify passes that
    accepted j = 0 … depth drafts: ``α_j = P(a ≥ j) ÷ P(a ≥ j − 1)`` (0 past the depth)."""
    h = np.zeros(steps + 1)
    h[: min(len(histogram), steps + 1)] = histogram[: steps + 1]
    total = float(h.sum())
    if total <= 0:
        raise ValueError("a tree histogram with no verify passes")
    reach = np.cumsum(h[::-1])[::-1] / total  # P(a ≥ j), j = 0 … steps
    with np.errstate(divide="ignore", invalid="ignore"):
        cond = np.where(reach[:-1] > 0, reach[1:] / np.where(reach[:-1] > 0, reach[:-1], 1), 0.0)
    return [float(x) for x in cond]


def tree_class(
    base: TrafficClass,
    shape: TreeShape,
    *,
    histogram: list[float] | None = None,
    tau: float | None = None,
) -> TrafficClass:
    """``base`` (its name and share) drafted by ``shape``: α per position from the measured
    histogram, or — a figure with no histogram, such as a chain's τ at another K — the i.i.d.
    α over its depth whose expected tokens per pass is ``tau``."""
    if histogram is not None:
        by_pos = tree_alpha_by_pos(histogram, shape.steps)
    elif tau is not None:
        a = float(alpha_from_mean_acceptance_length(tau, shape.depth))
        by_pos = [a] * shape.depth + [0.0] * (shape.steps - shape.depth)
    else:
        raise ValueError("a tree class needs its histogram or its τ")
    return base.model_copy(
        update={
            "alpha": None,
            "alpha_by_pos": tuple(by_pos),
            "source": f"measured tree {shape.label()}",
        }
    )


class TreeOption(NamedTuple):
    """A shape with the classes as it drafts them (one per class of the plan)."""

    shape: TreeShape
    classes: tuple[TrafficClass, ...]


def tree_speedup(
    cost: StepCostModel, option: TreeOption, batch: float, workload: WorkloadConfig
) -> float:
    """The closed-form throughput speedup of one shape at a batch size
    (:func:`~alphagate.sim.predict.model_speedup` on its step-time model)."""
    return model_speedup(
        tree_cost(cost, option.shape), option.classes, option.shape.steps, batch, workload
    )


def best_tree_model(
    cost: StepCostModel, options: list[TreeOption], batch: float, workload: WorkloadConfig
) -> tuple[TreeShape | None, float]:
    """The shape with the highest closed-form speedup at ``batch``, as ``(shape, speedup)``;
    ``(None, 1.0)`` — speculation off — when the best gain is below
    :data:`~alphagate.sim.predict.MIN_GAIN` (as :func:`~alphagate.sim.predict.best_k_model`)."""
    speeds = [tree_speedup(cost, o, batch, workload) for o in options]
    if not speeds:
        return None, 1.0
    best = int(np.argmax(speeds))
    return (options[best].shape, speeds[best]) if speeds[best] >= MIN_GAIN else (None, 1.0)
