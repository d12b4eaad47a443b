"""Typed presets and loaders for models (and, later, GPUs and drafters)."""

from alphagate.specs.models import (
    MODEL_PRESETS,
    SpecError,
    load_hf_config,
    model_preset_names,
    resolve_model,
)

__all__ = ["MODEL_PRESETS", "SpecError", "load_hf_config", "model_preset_names", "resolve_model"]
