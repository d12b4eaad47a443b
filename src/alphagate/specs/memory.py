"""``alphagate model memory``: weights and KV per token of a target and its drafter, compared."""

from __future__ import annotations

from alphagate.core.errors import ConfigError
from alphagate.core.records import Frozen
from alphagate.specs.deployment import METHODS, DraftModelDrafter, Eagle3Drafter, drafter_for
from alphagate.specs.models import native_dtype, resolve_model
from alphagate.theory.memory import Footprint, model_footprint

__all__ = ["MemoryAnswer", "memory_answer"]


class MemoryAnswer(Frozen):
    """Weights and KV per token of a target and its drafter, and what the drafter displaces."""

    weight_dtype: str
    kv_dtype: str
    target: Footprint
    draft: Footprint
    draft_weight_fraction_of_target: float
    draft_kv_fraction_of_target: float
    tokens_of_target_kv_displaced_by_draft_weights: float


def memory_answer(
    target: str,
    draft: str,
    weight_dtype: str | None = None,
    kv_dtype: str = "bf16",
    draft_vocab_size: int = 32_000,
) -> MemoryAnswer:
    """``draft``: eagle3, eagle, mtp, or a draft model (a preset or a local config.json);
    ``weight_dtype`` None: the target checkpoint's own."""
    t_shape = resolve_model(target)
    weight_dtype = weight_dtype or native_dtype(target)
    key = draft.strip().lower()
    if key in ("ngram", "suffix"):
        name = "n-gram" if key == "ngram" else "suffix"
        raise ConfigError(f"{name} drafting has no weights and no KV cache: nothing to compare")
    drafter = drafter_for(key) if key in METHODS else DraftModelDrafter(model=draft)
    if isinstance(drafter, Eagle3Drafter):
        drafter = drafter.model_copy(update={"draft_vocab_size": draft_vocab_size})
    t = model_footprint(t_shape, weight_dtype, kv_dtype=kv_dtype, kind="target")
    d = drafter.footprint(t_shape, weight_dtype, kv_dtype)
    if d is None:  # pragma: no cover - only n-gram has no footprint, refused above
        raise ConfigError(f"{draft!r} has no weights to compare")
    return MemoryAnswer(
        weight_dtype=weight_dtype,
        kv_dtype=kv_dtype,
        target=t,
        draft=d,
        draft_weight_fraction_of_target=d.weight_bytes / t.weight_bytes,
        draft_kv_fraction_of_target=d.kv_bytes_per_token / t.kv_bytes_per_token,
        tokens_of_target_kv_displaced_by_draft_weights=d.weight_bytes / t.kv_bytes_per_token,
    )
