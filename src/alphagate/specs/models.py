"""Model presets and a loader for local Hugging Face ``config.json`` files.

Preset numbers are the published Llama 3.x ``config.json`` values (meta-llama/Llama-3.1-8B,
Llama-3.3-70B, Llama-3.2-1B). Names are case-insensitive slugs. A preset is a *checkpoint*: its
weights come in one dtype (:data:`PRESET_CHECKPOINTS`), which is a deployment's default dtype —
``llama-3.3-70b`` is Meta's BF16 release, ``llama-3.3-70b-fp8`` the FP8 one (Red Hat's
``FP8-dynamic`` quantization, which vLLM and SGLang load as it is). A local ``config.json`` tells
its dtype by its ``quantization_config`` (:func:`native_dtype`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final, NamedTuple

from alphagate.core.errors import SpecError
from alphagate.core.shapes import TransformerShape

__all__ = [
    "MODEL_PRESETS",
    "PRESET_CHECKPOINTS",
    "Checkpoint",
    "SpecError",
    "checkpoint_for",
    "load_hf_config",
    "model_preset_names",
    "native_dtype",
    "preset_family",
    "resolve_model",
]


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
MODEL_PRESETS["llama-3.1-8b-fp8"] = MODEL_PRESETS["llama-3.1-8b"]
MODEL_PRESETS["llama-3.3-70b-fp8"] = MODEL_PRESETS["llama-3.3-70b"]


class Checkpoint(NamedTuple):
    """A published checkpoint: the id an engine loads, and the dtype its weights are stored in."""

    repo: str
    dtype: str


#: Each preset's own checkpoint (model cards on the Hugging Face hub).
PRESET_CHECKPOINTS: Final[dict[str, Checkpoint]] = {
    "llama-3.1-8b": Checkpoint("meta-llama/Llama-3.1-8B-Instruct", "bf16"),
    "llama-3.1-8b-fp8": Checkpoint("RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8-dynamic", "fp8"),
    "llama-3.3-70b": Checkpoint("meta-llama/Llama-3.3-70B-Instruct", "bf16"),
    "llama-3.3-70b-fp8": Checkpoint("RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic", "fp8"),
    "llama-3.2-1b": Checkpoint("meta-llama/Llama-3.2-1B-Instruct", "bf16"),
}
#: Other published quantizations of a preset's weights, by dtype (INT4: GPTQ w4a16).
_QUANTIZED: Final[dict[str, dict[str, str]]] = {
    "llama-3.1-8b": {
        "fp8": "RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8-dynamic",
        "int4": "RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w4a16",
    },
    "llama-3.3-70b": {
        "fp8": "RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic",
        "int4": "RedHatAI/Llama-3.3-70B-Instruct-quantized.w4a16",
    },
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


def preset_family(slug: str) -> str | None:
    """The BF16 preset a preset quantizes (``llama-3.3-70b-fp8`` → ``llama-3.3-70b``); None for a
    name that is not a preset."""
    key = slug.strip().lower()
    if key not in MODEL_PRESETS:
        return None
    return key.removesuffix("-fp8")


def _local_dtype(path: Path) -> str:
    """bf16, fp8 or int4 from a config.json's ``quantization_config`` (bf16 when it has none)."""
    p = path / "config.json" if path.is_dir() else path
    try:
        cfg = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return "bf16"
    q = cfg.get("quantization_config") if isinstance(cfg, dict) else None
    if not isinstance(q, dict):
        return "bf16"
    method = str(q.get("quant_method", "")).lower()
    if method in ("fp8", "fbgemm_fp8", "modelopt"):
        return "fp8"
    if method in ("awq", "gptq", "awq_marlin", "gptq_marlin", "bitsandbytes"):
        return "int4"
    if method == "compressed-tensors":
        for group in (q.get("config_groups") or {}).values():
            w = group.get("weights") if isinstance(group, dict) else None
            if isinstance(w, dict) and w.get("num_bits") == 8 and w.get("type") == "float":
                return "fp8"
            if isinstance(w, dict) and w.get("num_bits") == 4:
                return "int4"
    return "bf16"


def native_dtype(model: str) -> str:
    """The dtype a model's weights are stored in: a preset's checkpoint's, or a local
    config.json's (bf16 without a ``quantization_config``, or for a name that is neither)."""
    key = model.strip().lower()
    if key in PRESET_CHECKPOINTS:
        return PRESET_CHECKPOINTS[key].dtype
    p = Path(model)
    return _local_dtype(p) if p.exists() else "bf16"


def checkpoint_for(model: str, dtype: str) -> tuple[str, str | None]:
    """What an engine loads to serve ``model`` in ``dtype``: the checkpoint (a preset's repo id or
    the local path) and the online quantization to ask for (``fp8``: vLLM and SGLang quantize
    BF16 weights to FP8 as they load them), or None when the checkpoint is already in that dtype.
    A preset whose weights are published in that dtype gets that checkpoint. Raises
    :class:`SpecError` for INT4 without an INT4 checkpoint (no engine quantizes to INT4 online)."""
    key = model.strip().lower()
    family = preset_family(key)
    if key in PRESET_CHECKPOINTS and PRESET_CHECKPOINTS[key].dtype == dtype:
        return PRESET_CHECKPOINTS[key].repo, None
    if family is not None:
        if dtype == "bf16":
            return PRESET_CHECKPOINTS[family].repo, None
        repo = _QUANTIZED.get(family, {}).get(dtype)
        if repo is not None:
            return repo, None
        base = PRESET_CHECKPOINTS[family].repo
    else:
        base = model
        if native_dtype(model) == dtype:
            return base, None
    if dtype == "fp8":
        return base, "fp8"
    if dtype == "bf16":
        return base, None
    raise SpecError(
        f"{model} has no INT4 checkpoint known here and engines do not quantize to INT4 while "
        "loading: give --model the config.json of an INT4 (AWQ/GPTQ) checkpoint"
    )
