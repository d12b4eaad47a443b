"""The traffic a deployment serves: prompt and output length distributions and the request classes.

:class:`WorkloadConfig` is validated once (shares, names, lengths) and handed to the simulator,
the plan and the twin. Length distributions are parsed from the flag form
``fixed:N | uniform:LO:HI | lognormal:MEAN[:SIGMA] | file:PATH`` by :func:`parse_length`.
Lengths are rounded *up* to whole tokens when sampled (so never below 1).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
import numpy.typing as npt
from pydantic import Field, ValidationError, model_validator

from alphagate.core.errors import ConfigError
from alphagate.core.records import Frozen
from alphagate.core.traffic import TrafficClass, validate_classes

IntArray = npt.NDArray[np.int64]

__all__ = [
    "MAX_LENGTH",
    "EmpiricalLength",
    "FixedLength",
    "LengthDist",
    "LognormalLength",
    "UniformLength",
    "WorkloadConfig",
    "length_mean",
    "length_second_moment",
    "length_spec",
    "parse_length",
    "sample_lengths",
]

#: The longest prompt or output alphagate models (tokens); longer requests are a typo or a bug.
MAX_LENGTH = 1_048_576


class FixedLength(Frozen):
    """Every request has the same length."""

    kind: Literal["fixed"] = "fixed"
    value: int = Field(ge=1, le=MAX_LENGTH)


class UniformLength(Frozen):
    """Lengths drawn uniformly from the integers LO..HI."""

    kind: Literal["uniform"] = "uniform"
    low: int = Field(ge=1, le=MAX_LENGTH)
    high: int = Field(ge=1, le=MAX_LENGTH)

    @model_validator(mode="after")
    def _ordered(self) -> UniformLength:
        if self.high < self.low:
            raise ValueError(f"uniform length needs low <= high, got {self.low} > {self.high}")
        return self


class LognormalLength(Frozen):
    """Lognormal with the given *mean* (not median) and log-space standard deviation ``sigma``."""

    kind: Literal["lognormal"] = "lognormal"
    mean: float = Field(gt=0, le=MAX_LENGTH, allow_inf_nan=False)
    sigma: float = Field(default=0.6, ge=0, le=3.0, allow_inf_nan=False)


class EmpiricalLength(Frozen):
    """Resample (with replacement) from observed lengths, e.g. read from a file."""

    kind: Literal["empirical"] = "empirical"
    values: tuple[int, ...] = Field(min_length=1)
    source: str | None = Field(default=None, description="the file the lengths were read from")

    @model_validator(mode="after")
    def _positive(self) -> EmpiricalLength:
        if min(self.values) < 1 or max(self.values) > MAX_LENGTH:
            raise ValueError(f"empirical lengths must lie in 1..{MAX_LENGTH:,}")
        return self


LengthDist = Annotated[
    FixedLength | UniformLength | LognormalLength | EmpiricalLength, Field(discriminator="kind")
]


def sample_lengths(dist: LengthDist, n: int, rng: np.random.Generator) -> IntArray:
    """Draw ``n`` token lengths (>= 1), shape ``[n]``."""
    if isinstance(dist, FixedLength):
        return np.full(n, dist.value, dtype=np.int64)
    if isinstance(dist, UniformLength):
        return rng.integers(dist.low, dist.high + 1, size=n, dtype=np.int64)
    if isinstance(dist, LognormalLength):
        mu = np.log(dist.mean) - 0.5 * dist.sigma**2
        draws = np.ceil(rng.lognormal(mu, dist.sigma, size=n))
        return np.minimum(draws, MAX_LENGTH).astype(np.int64)
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


def _read_lengths(path: Path) -> tuple[int, ...]:
    if not path.is_file():
        raise ConfigError(f"length file not found (or not a file): {path}")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a UTF-8 text file") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror})") from None
    values: list[int] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            v = int(line)
        except ValueError:
            raise ConfigError(f"{path}:{lineno}: {line!r} is not an integer length") from None
        if not 1 <= v <= MAX_LENGTH:
            raise ConfigError(f"{path}:{lineno}: length {v} must be in 1..{MAX_LENGTH:,}")
        values.append(v)
    if not values:
        raise ConfigError(f"{path}: no lengths found")
    return tuple(values)


def _finite(text: str, spec: str) -> float:
    x = float(text)
    if not math.isfinite(x):
        raise ConfigError(f"{spec!r}: {text} is not a finite number")
    return x


def length_spec(dist: LengthDist) -> str | None:
    """The ``--prompt-len`` / ``--output-len`` text that gives ``dist`` (None: lengths given as
    values, not read from a file)."""
    if isinstance(dist, FixedLength):
        return f"fixed:{dist.value}"
    if isinstance(dist, UniformLength):
        return f"uniform:{dist.low}:{dist.high}"
    if isinstance(dist, LognormalLength):
        return f"lognormal:{dist.mean:g}:{dist.sigma:g}"
    return None if dist.source is None else f"file:{dist.source}"


def parse_length(text: str) -> LengthDist:
    """``fixed:N``, ``uniform:LO:HI``, ``lognormal:MEAN[:SIGMA]`` or ``file:PATH`` (one per line).

    Raises :class:`ConfigError` naming the problem.
    """
    kind, _, rest = text.partition(":")
    parts = rest.split(":") if rest else []
    try:
        if kind == "fixed" and len(parts) == 1:
            return FixedLength(value=int(parts[0]))
        if kind == "uniform" and len(parts) == 2:
            return UniformLength(low=int(parts[0]), high=int(parts[1]))
        if kind == "lognormal" and len(parts) in (1, 2):
            mean = _finite(parts[0], text)
            if len(parts) == 2:
                return LognormalLength(mean=mean, sigma=_finite(parts[1], text))
            return LognormalLength(mean=mean)
        if kind == "file" and rest:
            return EmpiricalLength(values=_read_lengths(Path(rest)), source=rest)
    except ValueError as exc:
        if isinstance(exc, ConfigError):
            raise
        if isinstance(exc, ValidationError):
            first = exc.errors()[0]
            where = ".".join(str(x) for x in first["loc"])
            raise ConfigError(f"{text!r}: {where} {first['msg'].lower()}") from None
        raise ConfigError(f"{text!r}: {exc}") from None
    raise ConfigError(
        f"{text!r} is not fixed:N, uniform:LO:HI, lognormal:MEAN[:SIGMA] or file:PATH"
    )


def _default_classes() -> tuple[TrafficClass, ...]:
    return (TrafficClass(name="default", share=1.0, alpha=0.7),)


class WorkloadConfig(Frozen):
    """Prompt and output lengths and the request classes of the traffic, validated once."""

    prompt_len: LengthDist = Field(
        default_factory=lambda: LognormalLength(mean=512, sigma=0.6),
        description="prompt tokens per request",
    )
    output_len: LengthDist = Field(
        default_factory=lambda: LognormalLength(mean=256, sigma=0.6),
        description="output tokens per request (when the request does not cap it)",
    )
    classes: tuple[TrafficClass, ...] = Field(
        default_factory=_default_classes,
        min_length=1,
        description="request classes: share of output tokens and α (or none, to be filled)",
    )

    @model_validator(mode="after")
    def _classes(self) -> WorkloadConfig:
        validate_classes(self.classes)
        return self

    def mean_sequence_tokens(self) -> float:
        """Mean prompt + output tokens of a request: the KV room one sequence needs at its end."""
        return length_mean(self.prompt_len) + length_mean(self.output_len)

    def mean_context(self) -> float:
        """Mean KV context of a sequence in flight at steady state.

        Sequences are sampled by how long they stay in the batch (∝ output length), so the tokens
        generated so far average E[L_out²] / (2·E[L_out]), not E[L_out] / 2.
        """
        out_mean = length_mean(self.output_len)
        return length_mean(self.prompt_len) + 0.5 * length_second_moment(self.output_len) / out_mean

    def with_classes(self, classes: tuple[TrafficClass, ...]) -> WorkloadConfig:
        """The same lengths with other classes (validated)."""
        return WorkloadConfig(
            prompt_len=self.prompt_len, output_len=self.output_len, classes=classes
        )
