"""Traffic classes: one type for every verb, parsed and validated in one place.

A class is a share of the *output tokens* and, when known, its conditional acceptance α — one
i.i.d. value or one value per draft position (EAGLE's n-α, whose acceptance falls with position);
for drafts of variable length (suffix decoding), also the measured share of engine steps that
drafted L tokens and accepted a of them, which the simulator draws each step from.
``source`` says where the α came from: typed on the command line (``given``), a documented prior,
or a measurement file; every rendering prints it.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
from pydantic import Field, field_validator, model_validator

from alphagate.core.errors import ConfigError
from alphagate.core.fmt import num
from alphagate.core.records import Frozen

__all__ = [
    "SHARE_TOLERANCE",
    "TrafficClass",
    "parse_traffic_class",
    "validate_classes",
]

SHARE_TOLERANCE = 1e-3

FloatArray = npt.NDArray[np.float64]


class TrafficClass(Frozen):
    """One request class: its share of output tokens and, when known, its conditional α."""

    name: str = Field(min_length=1, description="class name, e.g. chat or code")
    share: float = Field(gt=0.0, le=1.0, description="fraction of output tokens (classes sum to 1)")
    alpha: float | None = Field(
        default=None, ge=0.0, le=1.0, description="i.i.d. conditional acceptance α"
    )
    alpha_by_pos: tuple[float, ...] | None = Field(
        default=None,
        min_length=1,
        description="conditional α per draft position; a K longer than the vector repeats its last value",
    )
    draft_steps: tuple[tuple[float, ...], ...] | None = Field(
        default=None,
        min_length=2,
        description="drafts of variable length (suffix decoding): the share of engine steps "
        "that drafted L tokens and accepted a, row L = 0…K, entry a = 0…L (what the simulator "
        "draws); alpha is then the α per reached position that gives its τ at its lengths",
    )
    source: str = Field(
        default="given", description="given | prior … | measured (FILE) — where α came from"
    )

    @field_validator("name")
    @classmethod
    def _no_colon(cls, v: str) -> str:
        if ":" in v:
            raise ValueError("class name must not contain ':'")
        return v

    @field_validator("draft_steps")
    @classmethod
    def _shares(
        cls, v: tuple[tuple[float, ...], ...] | None
    ) -> tuple[tuple[float, ...], ...] | None:
        """Row L holds L + 1 shares ≥ 0; they are scaled to sum to 1 (counts are welcome)."""
        if v is None:
            return v
        if any(len(row) != n + 1 for n, row in enumerate(v)):
            raise ValueError("draft_steps: row L must hold L + 1 entries (a = 0…L)")
        total = sum(sum(row) for row in v)
        if any(x < 0 or not math.isfinite(x) for row in v for x in row) or total <= 0:
            raise ValueError("draft_steps: shares must be finite, ≥ 0 and not all 0")
        return tuple(tuple(x / total for x in row) for row in v)

    @model_validator(mode="after")
    def _one_alpha(self) -> TrafficClass:
        if self.alpha is not None and self.alpha_by_pos is not None:
            raise ValueError(f"class {self.name!r}: give alpha or alpha_by_pos, not both")
        if self.draft_steps is not None and self.alpha is None and self.alpha_by_pos is None:
            raise ValueError(
                f"class {self.name!r}: draft_steps go with an α per reached position "
                "(alphagate.theory.lengths.profile_class computes it from them)"
            )
        if self.alpha_by_pos is not None and not all(0.0 <= a <= 1.0 for a in self.alpha_by_pos):
            raise ValueError(f"class {self.name!r}: alpha_by_pos values must lie in [0, 1]")
        return self

    @property
    def has_alpha(self) -> bool:
        return self.alpha is not None or self.alpha_by_pos is not None or bool(self.draft_steps)

    def conditional(self, k: int) -> FloatArray:
        """Conditional α at positions 1..k (shape ``[k]``; drafts of variable length: given a
        draft reaches the position)."""
        if self.alpha_by_pos is not None:
            a = np.asarray(self.alpha_by_pos, dtype=np.float64)
            if a.size < k:
                a = np.concatenate([a, np.full(k - a.size, a[-1])])
            return a[:k]
        if self.alpha is None:
            raise ConfigError(f"class {self.name!r} has no α (give one, or a measurement)")
        return np.full(k, float(self.alpha))

    def unconditional(self, k: int) -> FloatArray:
        """P(at least j drafts accepted), j = 1..k: the cumulative product of conditional rates."""
        return np.asarray(np.cumprod(self.conditional(k)))

    def alpha_label(self) -> str:
        """α as printed: one value, or the per-position vector (drafts of variable length: τ
        and the longest draft of the measured profile)."""
        if self.draft_steps is not None:
            drafting = sum(sum(row) for row in self.draft_steps[1:])
            accepted = sum(a * x for row in self.draft_steps for a, x in enumerate(row))
            tau = 1.0 + accepted / drafting if drafting else 1.0
            return f"τ {tau:.2f}, drafts ≤ {len(self.draft_steps) - 1}"
        if self.alpha_by_pos is not None:
            return ",".join(f"{a:.2f}" for a in self.alpha_by_pos)
        return num(self.alpha)


def _number(text: str, what: str, spec: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise ConfigError(f"{spec!r}: {what} {text!r} is not a number") from None
    if not math.isfinite(x):
        raise ConfigError(f"{spec!r}: {what} must be a finite number, got {text}")
    return x


def parse_traffic_class(text: str, *, require_alpha: bool) -> TrafficClass:
    """Parse ``NAME:SHARE[:ALPHA]`` or ``NAME:SHARE:A1,A2,…`` (per-position α).

    Examples: ``chat:0.7:0.7``, ``code:0.3`` (α from a prior or a measurement),
    ``chat:1:0.8,0.7,0.6``. Raises :class:`ConfigError` naming what is wrong.
    """
    parts = text.split(":")
    want = "NAME:SHARE:ALPHA" if require_alpha else "NAME:SHARE[:ALPHA]"
    if len(parts) not in (2, 3) or (require_alpha and len(parts) != 3):
        raise ConfigError(f"{text!r} is not {want} (for example chat:0.7:0.7)")
    name = parts[0].strip()
    if not name:
        raise ConfigError(f"{text!r}: NAME is empty")
    share = _number(parts[1], "SHARE", text)
    if not 0.0 < share <= 1.0:
        raise ConfigError(f"{text!r}: SHARE {share:g} must be in (0, 1]")
    alpha: float | None = None
    by_pos: tuple[float, ...] | None = None
    if len(parts) == 3:
        values = [_number(x, "ALPHA", text) for x in parts[2].split(",")]
        bad = [x for x in values if not 0.0 <= x <= 1.0]
        if bad:
            raise ConfigError(f"{text!r}: ALPHA {bad[0]:g} is outside [0, 1]")
        if len(values) == 1:
            alpha = values[0]
        else:
            by_pos = tuple(values)
    return TrafficClass(name=name, share=share, alpha=alpha, alpha_by_pos=by_pos)


def validate_classes(classes: tuple[TrafficClass, ...] | list[TrafficClass]) -> None:
    """At least one class, unique names, shares summing to 1 (within 0.001)."""
    if not classes:
        raise ConfigError("at least one traffic class is needed")
    names = [c.name for c in classes]
    if len(set(names)) != len(names):
        raise ConfigError(f"class names must be unique, got {', '.join(names)}")
    total = sum(c.share for c in classes)
    if abs(total - 1.0) > SHARE_TOLERANCE:
        raise ConfigError(f"class shares must sum to 1, got {total:.4g}")
