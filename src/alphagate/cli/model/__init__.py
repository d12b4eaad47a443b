"""``alphagate model``: closed forms — speedup, break-even α, α for a target, optimal K, blends,
α/ρ/τ conversions, draft memory. No hardware needed; starts in well under half a second.

Importing this package registers every sub-verb on ``alphagate model``."""

from __future__ import annotations

from alphagate.cli.model import acceptance, memory, speedup
from alphagate.cli.model._common import model_app

__all__ = ["acceptance", "memory", "model_app", "speedup"]
