"""``plan --engine sglang``: SGLang's EAGLE draft shape — ``(num_steps, eagle_topk,
num_draft_tokens)`` — per concurrency, chosen from measured acceptance as the K-by-batch search
chooses K (:func:`~alphagate.sim.predict.best_k_model`, closed form), and the one SGLang runs.

The shapes are those ``measure offline`` replayed for every class of the plan: its ``--tree``
shapes, and the chain of every K it replayed (top-k 1, K + 1 draft tokens). A tree's gain rests
on how often the trajectory's token is among the drafter's top-k, which no per-position α
determines, so shapes are never extrapolated from α (:mod:`alphagate.sim.tree`). SGLang sets
one shape for every batch size (its adaptive mode varies only the steps of a top-k 1 chain,
``python/sglang/srt/speculative/adaptive_spec_params.py``), so the plan ships the target's best
shape and shows where another would be better.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from alphagate.core.errors import ConfigError, invalid
from alphagate.core.traffic import TrafficClass
from alphagate.plan.engine_config import default_draft, sglang_flags
from alphagate.plan.predictions import Predictor, plan_levels
from alphagate.plan.records import MeasuredTree, PlanRequest, TreeLevel, TreePlan
from alphagate.sim.tree import TreeOption, best_tree_model, tree_class, tree_speedup
from alphagate.specs.tree import TreeShape, chain_shape
from alphagate.theory.roots import bisect

__all__ = ["TAU_GATE_MARGIN", "load_trees", "plan_trees", "tree_policy_text"]

#: Added to the shipped tree's break-even τ to make the gate's: about twice the 95% half-width of
#: a τ measured over the 2,000 verify passes Stage 2 asks for (a pass's accepted drafts vary by
#: about one: 1.96 / √2000 ≈ 0.044), so that a tree does not clear the gate on noise alone —
#: :data:`~alphagate.plan.build.GATE_MARGIN`'s rule, in tokens per pass.
TAU_GATE_MARGIN = 0.1

#: the drafters SGLang drafts a tree with (``--speculative-eagle-topk`` > 1)
_TREE_METHODS = frozenset({"eagle", "eagle3"})


def _measured(path: Path) -> list[MeasuredTree]:
    """The shapes a ``measure offline`` result holds, per class and for all its traffic."""
    from alphagate.measure.results import MeasureResult

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        m = MeasureResult.model_validate(data)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return []  # not for trees: plan's --alpha-from reader names what is wrong with it
    except ValidationError as exc:
        raise invalid(path, "measure result", exc) from None
    if m.offline is None:
        return []
    out: list[MeasuredTree] = []
    for name, c in [(None, m.offline.overall), *m.offline.classes.items()]:
        rows: list[tuple[TreeShape, float | None, list[float] | None]] = [
            (chain_shape(r.k), r.mean_acceptance_length, None) for r in c.by_k
        ]
        rows += [
            (t.shape, t.mean_acceptance_length, t.acceptance_length_histogram) for t in c.trees
        ]
        out += [
            MeasuredTree(
                class_name=name,
                shape=shape,
                mean_acceptance_length=tau,
                histogram=h,
                source=path.name,
            )
            for shape, tau, h in rows
            if tau is not None
        ]
    return out


def load_trees(paths: list[Path]) -> tuple[MeasuredTree, ...]:
    """Every measured shape in the ``--alpha-from`` files (none: no ``measure offline`` result
    among them); a shape measured for a class in two files is refused."""
    out: dict[tuple[str | None, TreeShape], MeasuredTree] = {}
    for p in paths:
        # one file: a --tree of top-k 1 is its chain at K again, with its histogram: it wins
        mine = {(t.class_name, t.shape): t for t in _measured(p)}
        for key, t in mine.items():
            if key in out and t.class_name is not None:
                raise ConfigError(
                    f"class {t.class_name}: shape {t.shape.label()} is measured in both "
                    f"{out[key].source} and {t.source}: give one"
                )
            out[key] = t
    return tuple(out.values())


def _options(req: PlanRequest) -> tuple[list[TreeOption], str]:
    """Each shape measured for every class of the plan (its own figure, else the all-traffic
    one when the measurement has no classes), with the classes as it drafts them."""
    classes = req.workload.classes
    by_key = {(t.class_name, t.shape): t for t in req.trees}
    shapes = sorted({t.shape for t in req.trees}, key=lambda s: (s.steps, s.topk, s.draft_tokens))
    per_class = any(t.class_name is not None for t in req.trees)
    options = []
    for shape in shapes:
        picked = [by_key.get((c.name if per_class else None, shape)) for c in classes]
        if any(m is None for m in picked):
            continue
        drafted = tuple(
            tree_class(
                TrafficClass(name=c.name, share=c.share),
                shape,
                histogram=m.histogram,
                tau=m.mean_acceptance_length,
            )
            for c, m in zip(classes, picked, strict=True)
            if m is not None
        )
        options.append(TreeOption(shape, drafted))
    sources = ", ".join(sorted({t.source for t in req.trees}))
    return options, sources + ("" if per_class else " (all traffic, applied to every class)")


def _tau_breakeven(pred: Predictor, shape: TreeShape, concurrency: int) -> float | None:
    """The τ at which ``shape`` breaks even at ``concurrency`` (the closed form reads only τ)."""

    def gain(tau: float) -> float:
        cls = tree_class(TrafficClass(name="all", share=1.0), shape, tau=tau)
        return tree_speedup(
            pred.cost, TreeOption(shape, (cls,)), pred.batch(concurrency), pred.workload
        )

    top = 1.0 + shape.depth
    if gain(top) < 1.0:
        return None
    if gain(1.0) >= 1.0:
        return 1.0
    return bisect(lambda t: gain(t) >= 1.0, 1.0, top, tol=1e-6)


def _blend_tau(option: TreeOption) -> float:
    """τ over the classes as the batch holds them: the share-weighted harmonic mean."""
    from alphagate.theory.acceptance import expected_tokens_per_pass_by_pos

    inv = sum(
        c.share / float(expected_tokens_per_pass_by_pos(c.conditional(option.shape.steps)))
        for c in option.classes
    )
    return sum(c.share for c in option.classes) / inv


def plan_trees(pred: Predictor, req: PlanRequest) -> TreePlan | None:
    """The best measured shape at each of the plan's concurrencies, and the target's, with its
    flags; None when no shape is measured for every class."""
    options, source = _options(req)
    if req.deployment.drafter.method not in _TREE_METHODS:  # SGLang's trees are EAGLE's
        options = [o for o in options if o.shape.is_chain]
    if not options:
        return None
    chains = [o for o in options if o.shape.is_chain]
    levels = []
    for c in plan_levels(req.concurrency, req.peak):
        shape, speed = best_tree_model(pred.cost, options, pred.batch(c), pred.workload)
        chain, chain_speed = best_tree_model(pred.cost, chains, pred.batch(c), pred.workload)
        levels.append(
            TreeLevel(
                concurrency=c,
                shape=shape,
                speedup=speed,
                chain_k=0 if chain is None else chain.steps,
                chain_speedup=chain_speed,
            )
        )
    at = next(x for x in levels if x.concurrency == req.concurrency)
    shipped = next((o for o in options if o.shape == at.shape), None)
    drafter = req.deployment.drafter
    draft = drafter.checkpoint or default_draft(drafter.method, req.deployment.model)
    be = None if at.shape is None else _tau_breakeven(pred, at.shape, req.concurrency)
    return TreePlan(
        shipped=at.shape,
        concurrency=req.concurrency,
        speedup=at.speedup,
        chain_speedup=at.chain_speedup,
        mean_acceptance_length=None if shipped is None else _blend_tau(shipped),
        tau_breakeven=be,
        tau_gate=None
        if be is None or at.shape is None
        else min(1.0 + at.shape.depth, be + TAU_GATE_MARGIN),
        levels=levels,
        shapes=[o.shape for o in options],
        source=source,
        flags=[] if at.shape is None else sglang_flags(drafter, draft, at.shape.steps, at.shape),
    )


def tree_policy_text(t: TreePlan) -> str:
    """The shipped shape in words, as the plan names its policy."""
    if t.shipped is None:
        return f"no speculation at concurrency {t.concurrency} (no measured shape gains 2%)"
    kind = "chain" if t.shipped.is_chain else "draft tree"
    off = [lv.concurrency for lv in t.levels if lv.shape is None]
    tail = f"; no shape pays from concurrency {min(off)}" if off else ""
    return (
        f"SGLang EAGLE {kind} {t.shipped.label()} (num_steps/eagle_topk/num_draft_tokens) at "
        f"every batch size{tail}"
    )
