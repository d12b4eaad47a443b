"""Sampled requests: lengths, classes and arrivals, drawn with an explicit Generator.

Open-loop arrivals follow vLLM's benchmark convention (``vllm/benchmarks/serve.py``):
gamma-distributed gaps with shape ``burstiness`` and mean ``1 / rate`` (burstiness 1 = Poisson).
Gaps are never clipped — clipping raises the real arrival rate. :func:`arrival_times` is the one
arrival sampler; ``alphagate bench`` schedules its open-loop requests with it too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import numpy as np
import numpy.typing as npt
from pydantic import Field

from alphagate.core.records import Frozen
from alphagate.core.traffic import TrafficClass
from alphagate.specs.workload import WorkloadConfig, sample_lengths
from alphagate.theory.lengths import chain_joint, draft_lengths, tokens_per_step, truncate_joint

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

__all__ = [
    "Arrivals",
    "ClosedLoop",
    "OpenLoop",
    "RequestSet",
    "arrival_times",
    "draft_steps_table",
    "pooled_lengths",
    "sample_classes",
    "sample_requests",
    "unconditional_table",
]


class ClosedLoop(Frozen):
    """N users, each sending its next request ``think_time_s`` after the previous one finishes."""

    kind: Literal["closed"] = "closed"
    users: int = Field(ge=1)
    think_time_s: float = Field(default=0.0, ge=0, allow_inf_nan=False)


class OpenLoop(Frozen):
    """Requests arrive at ``rate`` per second with gamma gaps (burstiness 1 = Poisson)."""

    kind: Literal["open"] = "open"
    rate: float = Field(gt=0, allow_inf_nan=False)
    burstiness: float = Field(default=1.0, gt=0, allow_inf_nan=False)


Arrivals = Annotated[ClosedLoop | OpenLoop, Field(discriminator="kind")]


@dataclass(frozen=True)
class RequestSet:
    """Sampled requests in admission (index) order. Arrays have shape ``[n_requests]``."""

    prompt_len: IntArray
    output_len: IntArray
    class_idx: IntArray
    arrival_s: FloatArray  # open loop: precomputed; closed loop: NaN (set when a user sends it)

    @property
    def n(self) -> int:
        return int(self.prompt_len.size)

    def with_classes(self, class_idx: IntArray) -> RequestSet:
        """The same requests with other class labels (paired comparisons across mixes)."""
        return RequestSet(self.prompt_len, self.output_len, class_idx, self.arrival_s)


def arrival_times(rng: np.random.Generator, n: int, rate: float, burstiness: float) -> FloatArray:
    """``n`` arrival times (s) with gamma gaps of mean ``1 / rate``; the first request at t = 0."""
    gaps = rng.gamma(burstiness, 1.0 / (rate * burstiness), size=n)
    return np.asarray(np.cumsum(gaps) - gaps[0], dtype=np.float64)


def sample_classes(classes: tuple[TrafficClass, ...], n: int, rng: np.random.Generator) -> IntArray:
    """Class index per request, drawn by the class shares, shape ``[n]``."""
    shares = np.asarray([c.share for c in classes], dtype=np.float64)
    return rng.choice(shares.size, size=n, p=shares / shares.sum()).astype(np.int64)


def sample_requests(
    workload: WorkloadConfig, n: int, arrivals: Arrivals, rng: np.random.Generator
) -> RequestSet:
    """Draw lengths, classes and (open loop) arrival times for ``n`` requests."""
    prompt = sample_lengths(workload.prompt_len, n, rng)
    output = sample_lengths(workload.output_len, n, rng)
    class_idx = sample_classes(workload.classes, n, rng)
    if isinstance(arrivals, OpenLoop):
        arrival = arrival_times(rng, n, arrivals.rate, arrivals.burstiness)
    else:
        arrival = np.full(n, np.nan)
    return RequestSet(prompt, output, class_idx, arrival)


def unconditional_table(classes: tuple[TrafficClass, ...], k: int) -> FloatArray:
    """``[n_classes, max(k, 1)]`` table of P(≥ j drafts accepted), j = 1..k, for the kernels."""
    positions = max(k, 1)
    return np.stack([c.unconditional(positions) for c in classes])


def _steps_of(c: TrafficClass, k: int) -> FloatArray:
    """One class's step joint ``[k + 1, k + 1]`` (L drafted × a accepted): its measured draft
    lengths with at most ``k`` verified, or a chain of ``k`` drafts at its α."""
    if c.draft_steps is None:
        return chain_joint(c.conditional(k))
    big = len(c.draft_steps) - 1
    joint = np.zeros((max(big, k) + 1,) * 2)
    for n, row in enumerate(c.draft_steps):
        joint[n, : n + 1] = row
    return truncate_joint(joint, k)[: k + 1, : k + 1]


def draft_steps_table(classes: tuple[TrafficClass, ...], k: int) -> FloatArray | None:
    """``[n_classes, k + 1, k + 1]`` share of a class's steps that draft L tokens and accept a,
    when some class drafts a variable number of tokens (a measured profile; the others draft
    chains of ``k``); None when every class drafts chains (the kernels' fixed-K path)."""
    if k == 0 or all(c.draft_steps is None for c in classes):
        return None
    return np.stack([_steps_of(c, k) for c in classes])


def pooled_lengths(classes: tuple[TrafficClass, ...]) -> FloatArray | None:
    """The share of all steps that draft L = 0 … K tokens, over classes whose drafts vary in
    length (each class's steps in proportion to its share of tokens ÷ its tokens per step);
    None when every class drafts chains."""
    profiles = [c for c in classes if c.draft_steps is not None]
    if not profiles:
        return None
    k = max(len(c.draft_steps or ()) for c in profiles) - 1
    out = np.zeros(k + 1)
    for c in profiles:
        steps = c.draft_steps or ()
        joint = np.zeros((k + 1, k + 1))
        for n, row in enumerate(steps):
            joint[n, : n + 1] = row
        out += c.share / float(tokens_per_step(joint)) * draft_lengths(joint)
    return np.asarray(out / out.sum(), dtype=np.float64)
