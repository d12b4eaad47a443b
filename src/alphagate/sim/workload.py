"""Workload: request lengths, traffic classes and arrivals, sampled with an explicit Generator.

Open-loop arrivals follow vLLM's benchmark convention: gamma-distributed gaps with shape
``burstiness`` and mean ``1 / rate`` (burstiness 1 = Poisson). Gaps are never clipped — clipping
raises the real arrival rate. Lengths are rounded *up* to whole tokens (so never below 1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import numpy as np
import numpy.typing as npt
from pydantic import Field, model_validator

from alphagate.quantities import Frozen

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

__all__ = [
    "Arrivals",
    "ClosedLoop",
    "EmpiricalLength",
    "FixedLength",
    "LengthDist",
    "LognormalLength",
    "OpenLoop",
    "RequestSet",
    "SimClass",
    "UniformLength",
    "WorkloadConfig",
    "length_mean",
    "length_second_moment",
    "sample_requests",
]


class FixedLength(Frozen):
    kind: Literal["fixed"] = "fixed"
    value: int = Field(ge=1)


class UniformLength(Frozen):
    kind: Literal["uniform"] = "uniform"
    low: int = Field(ge=1)
    high: int = Field(ge=1)

    @model_validator(mode="after")
    def _ordered(self) -> UniformLength:
        if self.high < self.low:
            raise ValueError(f"uniform length needs low <= high, got {self.low} > {self.high}")
        return self


class LognormalLength(Frozen):
    """Lognormal with the given *mean* (not median) and log-space standard deviation ``sigma``."""

    kind: Literal["lognormal"] = "lognormal"
    mean: float = Field(gt=0)
    sigma: float = Field(default=0.6, ge=0)


class EmpiricalLength(Frozen):
    """Resample (with replacement) from observed lengths, e.g. read from a file by the CLI."""

    kind: Literal["empirical"] = "empirical"
    values: tuple[int, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _positive(self) -> EmpiricalLength:
        if min(self.values) < 1:
            raise ValueError("empirical lengths must all be >= 1")
        return self


LengthDist = Annotated[
    FixedLength | UniformLength | LognormalLength | EmpiricalLength, Field(discriminator="kind")
]


def sample_lengths(dist: LengthDist, n: int, rng: np.random.Generator) -> IntArray:
    """Draw ``n`` token lengths (>= 1)."""
    if isinstance(dist, FixedLength):
        return np.full(n, dist.value, dtype=np.int64)
    if isinstance(dist, UniformLength):
        return rng.integers(dist.low, dist.high + 1, size=n, dtype=np.int64)
    if isinstance(dist, LognormalLength):
        mu = np.log(dist.mean) - 0.5 * dist.sigma**2
        return np.ceil(rng.lognormal(mu, dist.sigma, size=n)).astype(np.int64)
    values = np.asarray(dist.values, dtype=np.int64)
    return values[rng.integers(0, values.size, size=n)]


def length_mean(dist: LengthDist) -> float:
    """Expected length (before rounding up)."""
    if isinstance(dist, FixedLength):
        return float(dist.value)
    if isinstance(dist, UniformLength):
        return 0.5 * (dist.low + dist.high)
    if isinstance(dist, LognormalLength):
        return dist.mean
    return float(np.mean(dist.values))


def length_second_moment(dist: LengthDist) -> float:
    """E[L²] of a length distribution (before rounding up)."""
    if isinstance(dist, FixedLength):
        return float(dist.value) ** 2
    if isinstance(dist, UniformLength):
        lo, hi = dist.low, dist.high
        return (lo * lo + lo * hi + hi * hi) / 3.0
    if isinstance(dist, LognormalLength):
        return dist.mean**2 * float(np.exp(dist.sigma**2))
    return float(np.mean(np.square(np.asarray(dist.values, dtype=np.float64))))


class SimClass(Frozen):
    """A traffic class: share of requests and its conditional acceptance (i.i.d. or per position)."""

    name: str = Field(min_length=1)
    share: float = Field(gt=0, le=1)
    alpha: float | None = Field(default=None, ge=0, le=1)
    alpha_by_pos: tuple[float, ...] | None = None

    @model_validator(mode="after")
    def _one_alpha(self) -> SimClass:
        if (self.alpha is None) == (self.alpha_by_pos is None):
            raise ValueError(f"class {self.name!r}: give exactly one of alpha or alpha_by_pos")
        if self.alpha_by_pos is not None and not all(0.0 <= a <= 1.0 for a in self.alpha_by_pos):
            raise ValueError(f"class {self.name!r}: alpha_by_pos values must lie in [0, 1]")
        return self

    def unconditional(self, k_max: int) -> FloatArray:
        """P(at least j drafts accepted), j = 1..k_max: cumulative product of conditional rates.

        A per-position vector shorter than k_max repeats its last value.
        """
        if self.alpha_by_pos is not None:
            a = np.asarray(self.alpha_by_pos, dtype=np.float64)
            if a.size < k_max:
                a = np.concatenate([a, np.full(k_max - a.size, a[-1])])
            cond = a[:k_max]
        else:
            cond = np.full(k_max, float(self.alpha or 0.0))
        return np.asarray(np.cumprod(cond))


class ClosedLoop(Frozen):
    """N users, each sending its next request ``think_time_s`` after the previous one finishes."""

    kind: Literal["closed"] = "closed"
    users: int = Field(ge=1)
    think_time_s: float = Field(default=0.0, ge=0)


class OpenLoop(Frozen):
    """Requests arrive at ``rate`` per second with gamma gaps (burstiness 1 = Poisson)."""

    kind: Literal["open"] = "open"
    rate: float = Field(gt=0)
    burstiness: float = Field(default=1.0, gt=0)


Arrivals = Annotated[ClosedLoop | OpenLoop, Field(discriminator="kind")]


class WorkloadConfig(Frozen):
    """Lengths, classes, arrivals and request count of one simulated workload."""

    prompt_len: LengthDist = Field(default_factory=lambda: LognormalLength(mean=512, sigma=0.6))
    output_len: LengthDist = Field(default_factory=lambda: LognormalLength(mean=256, sigma=0.6))
    classes: tuple[SimClass, ...] = Field(
        default=(SimClass(name="default", share=1.0, alpha=0.7),), min_length=1
    )
    num_requests: int = Field(default=1000, ge=1)

    @model_validator(mode="after")
    def _shares(self) -> WorkloadConfig:
        total = sum(c.share for c in self.classes)
        if abs(total - 1.0) > 1e-3:
            raise ValueError(f"class shares must sum to 1, got {total:.4g}")
        names = [c.name for c in self.classes]
        if len(set(names)) != len(names):
            raise ValueError(f"class names must be unique, got {names}")
        return self

    def mean_context(self) -> float:
        """Mean KV context of a sequence in flight at steady state.

        Sequences are sampled by how long they stay in the batch (∝ output length), so the tokens
        generated so far average E[L_out²] / (2·E[L_out]), not E[L_out] / 2.
        """
        out_mean = length_mean(self.output_len)
        return length_mean(self.prompt_len) + 0.5 * length_second_moment(self.output_len) / out_mean


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


def sample_requests(
    workload: WorkloadConfig, arrivals: Arrivals, rng: np.random.Generator
) -> RequestSet:
    """Draw lengths, classes and (open loop) arrival times for ``workload.num_requests`` requests."""
    n = workload.num_requests
    prompt = sample_lengths(workload.prompt_len, n, rng)
    output = sample_lengths(workload.output_len, n, rng)
    shares = np.asarray([c.share for c in workload.classes], dtype=np.float64)
    class_idx = rng.choice(shares.size, size=n, p=shares / shares.sum()).astype(np.int64)
    if isinstance(arrivals, OpenLoop):
        gaps = rng.gamma(arrivals.burstiness, 1.0 / (arrivals.rate * arrivals.burstiness), size=n)
        arrival = np.cumsum(gaps) - gaps[0]  # first request at t = 0
    else:
        arrival = np.full(n, np.nan)
    return RequestSet(prompt, output, class_idx, np.asarray(arrival, dtype=np.float64))
