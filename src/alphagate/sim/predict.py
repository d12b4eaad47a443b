"""Answers from the step-time model in closed form: speedup at a batch size, break-even α,
crossover batch size, best K per batch size.

At batch B and mean context S̄ the emergent cost ratios c(B) and v(B, K) of
:class:`~alphagate.sim.cost.StepCostModel` go into Leviathan's S = E(α, K) / (K·c + v), with the
prefills of the requests that replace finished ones folded into each step. These are fast (no
simulation) and are cross-checked against paired simulations in the tests and in ``simulate``.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from alphagate.core.traffic import TrafficClass
from alphagate.sim.cost import StepCostModel
from alphagate.sim.kernel import decode_capacity
from alphagate.sim.workload import draft_steps_table
from alphagate.specs.workload import WorkloadConfig, length_mean
from alphagate.theory.acceptance import expected_tokens_per_pass_by_pos
from alphagate.theory.lengths import (
    joint_from_lengths,
    mean_drafted,
    profile_class,
    tokens_per_step,
)
from alphagate.theory.roots import bisect

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

__all__ = [
    "MIN_GAIN",
    "best_k_model",
    "breakeven_alpha_model",
    "crossover_batch_model",
    "model_speedup",
    "single_class",
]

#: A gain below 2% is within the model's error: not worth turning speculation on for.
MIN_GAIN = 1.02


def single_class(alpha: float, lengths: FloatArray | None = None) -> tuple[TrafficClass, ...]:
    """All traffic in one class at ``alpha`` — with ``lengths`` (the share of steps drafting
    L = 0 … K tokens), drafts of those lengths at ``alpha`` per reached position."""
    if lengths is None:
        return (TrafficClass(name="all", share=1.0, alpha=alpha),)
    joint = joint_from_lengths(lengths, np.full(lengths.size - 1, alpha))
    return (profile_class("all", 1.0, joint),)


def _poisson_pmf(lam: float) -> tuple[IntArray, FloatArray]:
    """Counts 0..⌈λ + 8√λ + 8⌉ and their Poisson(λ) probabilities, in log space
    (``j·ln λ − λ − ln j!``; ``scipy.stats.poisson.pmf`` gives the same to 1e-12, at ~40× the
    cost per call, and the closed form calls this tens of thousands of times per plan)."""
    from scipy.special import gammaln

    j = np.arange(int(lam + 8.0 * math.sqrt(lam) + 8.0))
    if lam <= 0.0:
        return j, (j == 0).astype(np.float64)
    return j, np.exp(j * math.log(lam) - lam - gammaln(j + 1.0))


def model_speedup(
    cost: StepCostModel,
    classes: tuple[TrafficClass, ...],
    k: int,
    batch: float,
    workload: WorkloadConfig,
) -> float:
    """Steady-state throughput speedup at ``batch`` running sequences, from the step-time model.

    Each step decodes ``batch`` sequences (K drafts each) and, in a closed loop, prefills the
    requests that replace the finished ones: batch · E / L̄_out requests per step with E tokens
    per sequence per step. With several classes the batch holds each class in proportion to how
    long it stays (share / E_i), so tokens per sequence per step is the harmonic blend of the E_i.
    K = 0 gives exactly 1. A step carries at most :func:`~alphagate.sim.kernel.decode_capacity`
    decoding sequences (K + 1 tokens each within ``max_num_batched_tokens``); beyond it the rest
    of the batch waits a step, so each side decodes the smaller of the two. Each side runs at
    most the batch its KV room holds (:meth:`~alphagate.sim.cost.StepCostModel.arm_batch`: the
    speculative server's is shared with the drafter's KV); the sequences beyond it queue, so
    ``batch`` is the load offered and each side's throughput is that of its own batch.
    """
    if k == 0:
        return 1.0
    key = ("speedup", classes, k, batch, workload)
    if key not in cost.memo:  # a plan asks again for the same points (a K sweep, its intervals)
        cost.memo[key] = _model_speedup(cost, classes, k, batch, workload)
    return cost.memo[key]


def _model_speedup(
    cost: StepCostModel,
    classes: tuple[TrafficClass, ...],
    k: int,
    batch: float,
    workload: WorkloadConfig,
) -> float:
    l_out = length_mean(workload.output_len)
    l_in = length_mean(workload.prompt_len)
    ctx = workload.mean_context()
    shares = np.asarray([c.share for c in classes])
    table = draft_steps_table(classes, k)
    if table is None:
        e_cls = np.asarray(
            [float(expected_tokens_per_pass_by_pos(c.conditional(k))) for c in classes]
        )
        drafted = float(k)
    else:  # drafts of variable length: what a step verifies, weighted by the steps of each class
        e_cls, per_cls = tokens_per_step(table), mean_drafted(table)
        steps = shares / e_cls
        drafted = float((steps * per_cls).sum() / steps.sum())
    e = 1.0 / float((shares / shares.sum() / e_cls).sum())

    seq_tokens = workload.mean_sequence_tokens()

    def tokens_per_s(
        arm_k: int, drafts: float, tokens_per_seq: float, proposing: bool = False
    ) -> float:
        running = cost.arm_batch(batch, arm_k, seq_tokens)
        budget = decode_capacity(cost.max_num_batched_tokens, math.ceil(drafts), cost.draft_slots)
        n = min(running, float(budget))
        # requests finishing (and so prefilling) per step ~ Poisson(n · E / L̄_out); the step
        # time is convex in the tokens it carries, so average over the count, not the mean count
        j, pmf = _poisson_pmf(n * tokens_per_seq / l_out)
        step = _StepShape(
            drafts=drafts, n=n, running=running, proposing=proposing, l_in=l_in, ctx=ctx
        )
        t = _step_times(cost, step, j.size)
        return n * tokens_per_seq / float((pmf * t).sum() / pmf.sum())

    key = ("decode tokens/s", batch, l_in, l_out, ctx)
    if key not in cost.memo:
        cost.memo[key] = tokens_per_s(0, 0, 1.0)
    return tokens_per_s(k, drafted, e, table is not None) / cost.memo[key]


class _StepShape(NamedTuple):
    """One arm's decode step at a batch, before the prefills that join it."""

    drafts: float
    n: float
    running: float
    proposing: bool
    l_in: float
    ctx: float


def _step_times(cost: StepCostModel, step: _StepShape, count: int) -> FloatArray:
    """Seconds of ``step`` with 0, 1, … ``count`` − 1 prompts prefilled in it. They depend on the
    step's shape only, not on α: a break-even search or a K sweep prices the same steps with
    other Poisson weights, so they are kept with the cost model and extended when a search
    reaches further counts."""
    key = ("step times by prefills", *step)
    held = cost.arrays.get(key)
    if held is None or held.size < count:
        pre = np.arange(max(count, 2 * (0 if held is None else held.size)), dtype=np.float64)
        pre *= step.l_in
        held = cost.arrays[key] = cost.step_time(
            k=step.drafts, n_decode=step.n, ctx_decode=step.n * step.ctx, prefill_tokens=pre,
            prefill_ctx=0.0, prefill_pairs=pre * 0.5 * step.l_in, n_running=step.running,
            proposing=step.proposing,
        )  # fmt: skip
    return held[:count]


def breakeven_alpha_model(
    cost: StepCostModel,
    k: int,
    batch: float,
    workload: WorkloadConfig,
    lengths: FloatArray | None = None,
) -> float | None:
    """α where the model speedup at ``batch`` reaches 1; 0 when any α pays, None when α = 1 does
    not (``lengths``: drafts of those lengths, :func:`single_class`)."""
    if model_speedup(cost, single_class(0.0, lengths), k, batch, workload) >= 1.0:
        return 0.0
    if model_speedup(cost, single_class(1.0, lengths), k, batch, workload) < 1.0:
        return None
    return bisect(
        lambda a: model_speedup(cost, single_class(a, lengths), k, batch, workload) >= 1.0,
        0.0,
        1.0,
        tol=1e-9,
    )


def crossover_batch_model(
    cost: StepCostModel,
    classes: tuple[TrafficClass, ...],
    k: int,
    workload: WorkloadConfig,
    b_max: int,
) -> float | None:
    """Batch size at which the model speedup falls to 1 (log-scale bisection).

    None when speculation still pays at ``b_max`` (the largest batch the deployment holds);
    1.0 when it never pays.
    """
    if model_speedup(cost, classes, k, 1.0, workload) <= 1.0:
        return 1.0
    if model_speedup(cost, classes, k, float(b_max), workload) > 1.0:
        return None
    return bisect(
        lambda b: model_speedup(cost, classes, k, b, workload) <= 1.0,
        1.0,
        float(b_max),
        tol=1e-9,
        scale="log",
    )


def best_k_model(
    cost: StepCostModel,
    classes: tuple[TrafficClass, ...],
    batch: float,
    workload: WorkloadConfig,
    k_max: int,
) -> tuple[int, float]:
    """The K in 1..k_max with the highest model speedup at ``batch``, as ``(K, speedup)``;
    ``(0, 1.0)`` — speculation off — when the best gain is below :data:`MIN_GAIN`."""
    speeds = [model_speedup(cost, classes, k, batch, workload) for k in range(1, k_max + 1)]
    best = int(np.argmax(speeds))
    return (best + 1, speeds[best]) if speeds[best] >= MIN_GAIN else (0, 1.0)
