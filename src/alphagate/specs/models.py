"""Model presets and a loader for local Hugging Face ``config.json`` files.

Preset numbers are the published Llama 3.x ``config.json`` values (meta-llama/Llama-3.1-8B,
Llama-3.3-70B, Llama-3.2-1B). Names are case-insensitive slugs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

from alphagate.core.errors import SpecError
from alphagate.core.shapes import TransformerShape

__all__ = ["MODEL_PRESETS", "SpecError", "load_hf_config", "model_preset_names", "resolve_model"]


MODEL_PRESETS: Final[dict[str, TransformerShape]] = {
    "llama-3.1-8b": TransformerShape(
        name="Llama-3.1-8B",
        hidden_size=4096,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=128,
        intermediate_size=14336,
        vocab_size=128256,
        tie_word_embeddings=False,
    ),
    "llama-3.3-70b": TransformerShape(
        name="Llama-3.3-70B",
        hidden_size=8192,
        num_hidden_layers=80,
        num_attention_heads=64,
        num_key_value_heads=8,
        head_dim=128,
        intermediate_size=28672,
        vocab_size=128256,
        tie_word_embeddings=False,
    ),
    "llama-3.2-1b": TransformerShape(
        name="Llama-3.2-1B",
        hidden_size=2048,
        num_hidden_layers=16,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=64,
        intermediate_size=8192,
        vocab_size=128256,
        tie_word_embeddings=True,
    ),
}


def model_preset_names() -> list[str]:
    """The preset slugs, sorted."""
    return sorted(MODEL_PRESETS)


def _require_int(cfg: dict[str, Any], key: str, path: Path) -> int:
    value = cfg.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise SpecError(f"{path}: field {key!r} must be a positive integer, got {value!r}")
    return value


def load_hf_config(path: str | Path) -> TransformerShape:
    """Read a dense Llama/Qwen/Mistral-style Hugging Face ``config.json`` (or its folder)."""
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    if not p.is_file():
        raise SpecError(f"model config not found: {p}")
    try:
        cfg = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SpecError(f"{p}: not a readable JSON file ({exc})") from None
    if not isinstance(cfg, dict):
        raise SpecError(f"{p}: expected a JSON object")
    if "text_config" in cfg and "hidden_size" not in cfg:
        cfg = cfg["text_config"]
    hidden = _require_int(cfg, "hidden_size", p)
    heads = _require_int(cfg, "num_attention_heads", p)
    kv_heads = cfg.get("num_key_value_heads") or heads
    head_dim = cfg.get("head_dim") or hidden // heads
    merged = {**cfg, "num_key_value_heads": kv_heads, "head_dim": head_dim}
    name = cfg.get("_name_or_path") or p.parent.name or "model"
    return TransformerShape(
        name=str(name),
        hidden_size=hidden,
        num_hidden_layers=_require_int(cfg, "num_hidden_layers", p),
        num_attention_heads=heads,
        num_key_value_heads=_require_int(merged, "num_key_value_heads", p),
        head_dim=_require_int(merged, "head_dim", p),
        intermediate_size=_require_int(cfg, "intermediate_size", p),
        vocab_size=_require_int(cfg, "vocab_size", p),
        tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
    )


def resolve_model(name_or_path: str) -> TransformerShape:
    """A preset slug (case-insensitive) or a path to a ``config.json`` / model folder."""
    slug = name_or_path.strip().lower()
    if slug in MODEL_PRESETS:
        return MODEL_PRESETS[slug]
    p = Path(name_or_path)
    if p.suffix == ".json" or p.exists():
        return load_hf_config(p)
    raise SpecError(
        f"unknown model {name_or_path!r}: use a preset ({', '.join(model_preset_names())}) "
        "or a path to a Hugging Face config.json"
    )
