"""Model presets and local checkpoints: a Hugging Face config.json read into a shape (with its
defaults and each refusal naming the field), the dtype its weights are stored in, and what an
engine loads to serve it in a dtype."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from alphagate.core.errors import SpecError
from alphagate.specs.models import (
    checkpoint_for,
    load_hf_config,
    model_preset_names,
    native_dtype,
    preset_family,
    resolve_model,
)

LLAMA_8B = {
    "_name_or_path": "lab/llama-8b",
    "hidden_size": 4096,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "intermediate_size": 14336,
    "vocab_size": 128256,
}


def _config(folder: Path, cfg: dict[str, Any]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(cfg))
    return folder


def test_a_local_config_reads_as_the_preset_it_matches(tmp_path: Path) -> None:
    local = load_hf_config(_config(tmp_path / "m", LLAMA_8B))
    preset = resolve_model("Llama-3.1-8B")
    fields = ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads")
    assert all(getattr(local, f) == getattr(preset, f) for f in fields)
    assert local.head_dim == 128 and local.name == "lab/llama-8b"  # hidden ÷ heads by default
    assert resolve_model(str(tmp_path / "m" / "config.json")) == local


def test_defaults_and_a_multimodal_text_config(tmp_path: Path) -> None:
    no_kv = {k: v for k, v in LLAMA_8B.items() if k != "num_key_value_heads"}
    assert load_hf_config(_config(tmp_path / "a", no_kv)).num_key_value_heads == 32  # MHA
    wrapped = {"architectures": ["Llava"], "text_config": {**LLAMA_8B, "head_dim": 64}}
    assert load_hf_config(_config(tmp_path / "b", wrapped)).head_dim == 64


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"hidden_size": 0}, "'hidden_size' must be a positive integer, got 0"),
        ({"vocab_size": True}, "'vocab_size' must be a positive integer, got True"),
        ({"num_hidden_layers": "32"}, "'num_hidden_layers' must be a positive integer"),
    ],
)
def test_a_bad_field_is_named(tmp_path: Path, change: dict[str, Any], says: str) -> None:
    with pytest.raises(SpecError, match=says):
        load_hf_config(_config(tmp_path, {**LLAMA_8B, **change}))


def test_missing_unreadable_and_unknown_models_are_refused(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="model config not found"):
        load_hf_config(tmp_path)
    (tmp_path / "config.json").write_text("[1, 2]")
    with pytest.raises(SpecError, match="expected a JSON object"):
        load_hf_config(tmp_path)
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(SpecError, match="not a readable JSON file"):
        load_hf_config(tmp_path)
    with pytest.raises(SpecError) as info:
        resolve_model("llama-9b")
    assert all(name in str(info.value) for name in model_preset_names())


@pytest.mark.parametrize(
    ("quant", "dtype"),
    [
        (None, "bf16"),
        ({"quant_method": "fp8"}, "fp8"),
        ({"quant_method": "gptq", "bits": 4}, "int4"),
        (
            {
                "quant_method": "compressed-tensors",
                "config_groups": {"g": {"weights": {"num_bits": 8, "type": "float"}}},
            },
            "fp8",
        ),
        (
            {
                "quant_method": "compressed-tensors",
                "config_groups": {"g": {"weights": {"num_bits": 4, "type": "int"}}},
            },
            "int4",
        ),
        (
            {
                "quant_method": "compressed-tensors",
                "config_groups": {"g": {"weights": {"num_bits": 8, "type": "int"}}},
            },
            "bf16",
        ),
    ],
)
def test_a_local_checkpoints_dtype_is_its_quantization(
    tmp_path: Path, quant: dict[str, Any] | None, dtype: str
) -> None:
    cfg = LLAMA_8B if quant is None else {**LLAMA_8B, "quantization_config": quant}
    assert native_dtype(str(_config(tmp_path, cfg))) == dtype


def test_a_presets_dtype_is_its_checkpoints() -> None:
    assert native_dtype("llama-3.3-70b-fp8") == "fp8" and native_dtype("LLAMA-3.1-8B") == "bf16"
    assert native_dtype("no/such/model") == "bf16"
    assert preset_family("llama-3.3-70b-fp8") == "llama-3.3-70b"
    assert preset_family("llama-3.1-8b") == "llama-3.1-8b" and preset_family("gpt-9") is None


def test_what_an_engine_loads_for_each_dtype(tmp_path: Path) -> None:
    assert checkpoint_for("llama-3.3-70b-fp8", "fp8") == (
        "RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic", None,
    )  # fmt: skip
    assert checkpoint_for("llama-3.3-70b-fp8", "bf16") == (
        "meta-llama/Llama-3.3-70B-Instruct",
        None,
    )
    assert checkpoint_for("llama-3.1-8b", "int4")[1] is None  # a published GPTQ checkpoint
    assert checkpoint_for("llama-3.2-1b", "fp8") == ("meta-llama/Llama-3.2-1B-Instruct", "fp8")
    with pytest.raises(SpecError, match="no INT4 checkpoint"):
        checkpoint_for("llama-3.2-1b", "int4")
    local = str(_config(tmp_path, LLAMA_8B))
    assert checkpoint_for(local, "bf16") == (local, None)
    assert checkpoint_for(local, "fp8") == (local, "fp8")  # quantized online as it loads
