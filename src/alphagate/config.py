"""Typed configuration shared by the verbs, validated once at the edge (pydantic v2, frozen)."""

from __future__ import annotations

from pydantic import Field, field_validator

from alphagate.quantities import Frozen

__all__ = ["ConfigError", "CostModel", "TrafficClass", "parse_traffic_class", "validate_shares"]

SHARE_TOLERANCE = 1e-3


class ConfigError(ValueError):
    """Invalid user configuration; the message names the field or flag."""


class CostModel(Frozen):
    """Draft and verify cost ratios in plain-decode-step units (see :mod:`alphagate.quantities`)."""

    draft_cost: float = Field(
        default=0.0, ge=0.0, description="c: one draft forward ÷ one decode step"
    )
    verify_cost: float = Field(
        default=1.0, gt=0.0, description="v: K+1-token verify ÷ one decode step"
    )


class TrafficClass(Frozen):
    """One request class: a share of output tokens and, when measured or assumed, its α."""

    name: str = Field(min_length=1)
    share: float = Field(ge=0.0, le=1.0)
    alpha: float | None = Field(default=None, ge=0.0, le=1.0)

    @field_validator("name")
    @classmethod
    def _no_colon(cls, v: str) -> str:
        if ":" in v:
            raise ValueError("class name must not contain ':'")
        return v


def parse_traffic_class(text: str, *, require_alpha: bool) -> TrafficClass:
    """Parse ``NAME:SHARE[:ALPHA]`` (e.g. ``chat:0.7:0.7``). Raises :class:`ConfigError`."""
    parts = text.split(":")
    if len(parts) not in (2, 3) or (require_alpha and len(parts) != 3):
        want = "NAME:SHARE:ALPHA" if require_alpha else "NAME:SHARE[:ALPHA]"
        raise ConfigError(f"{text!r} is not {want} (for example chat:0.7:0.7)")
    name = parts[0].strip()
    try:
        share = float(parts[1])
        alpha = float(parts[2]) if len(parts) == 3 else None
    except ValueError:
        raise ConfigError(f"{text!r}: SHARE and ALPHA must be numbers") from None
    if not name:
        raise ConfigError(f"{text!r}: NAME is empty")
    if not 0.0 <= share <= 1.0:
        raise ConfigError(f"{text!r}: SHARE {share} is outside [0, 1]")
    if alpha is not None and not 0.0 <= alpha <= 1.0:
        raise ConfigError(f"{text!r}: ALPHA {alpha} is outside [0, 1]")
    return TrafficClass(name=name, share=share, alpha=alpha)


def validate_shares(classes: list[TrafficClass]) -> None:
    """Shares must sum to 1 (within 0.001) and names must be unique."""
    if not classes:
        raise ConfigError("at least one class is needed")
    names = [c.name for c in classes]
    if len(set(names)) != len(names):
        raise ConfigError(f"class names must be unique, got {names}")
    total = sum(c.share for c in classes)
    if abs(total - 1.0) > SHARE_TOLERANCE:
        raise ConfigError(f"class shares must sum to 1, got {total:.4g}")
