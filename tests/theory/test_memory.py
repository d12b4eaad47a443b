"""Draft memory against the derived numbers in the published configs (meta-llama Llama-3.x config.json, EAGLE-3 head configs)."""

from __future__ import annotations

import pytest

from alphagate import theory
from alphagate.specs import MODEL_PRESETS

L8B = MODEL_PRESETS["llama-3.1-8b"]
L70B = MODEL_PRESETS["llama-3.3-70b"]
L1B = MODEL_PRESETS["llama-3.2-1b"]


def test_target_parameter_counts() -> None:
    # from the config.json numbers: Llama-3.3-70B ≈ 70.55 B; Llama-3.2-1B 1.236 B
    assert theory.model_params(L70B) / 1e9 == pytest.approx(70.55, abs=0.01)
    assert theory.model_params(L1B) / 1e9 == pytest.approx(1.236, abs=0.001)
    assert theory.model_params(L8B) / 1e9 == pytest.approx(8.03, abs=0.01)


def test_kv_bytes_per_token() -> None:
    # 2 · layers · KV heads · head dim · bytes: 8B 128 KiB, 70B 320 KiB (bf16); 1B 32 KiB; 70B FP8 160 KiB
    assert theory.kv_bytes_per_token(L8B, "bf16") == 128 * 1024
    assert theory.kv_bytes_per_token(L70B, "bf16") == 320 * 1024
    assert theory.kv_bytes_per_token(L70B, "fp8") == 160 * 1024
    assert theory.kv_bytes_per_token(L1B, "bf16") == 32 * 1024


def test_eagle3_head_8b() -> None:
    # EAGLE-3 head for Llama-3.1-8B (h 4096, draft vocab 32,000): 424.7 M params, 0.85 GB bf16
    fp = theory.eagle3_head_footprint(L8B, "bf16")
    assert fp.params / 1e6 == pytest.approx(424.7, abs=0.1)
    assert fp.weight_bytes / 1e9 == pytest.approx(0.85, abs=0.005)
    assert fp.kv_bytes_per_token == 4 * 1024
    with_embed = theory.eagle3_head_footprint(L8B, "bf16", own_embeddings=True)
    assert with_embed.params / 1e6 == pytest.approx(950.0, abs=0.1)


def test_eagle3_head_70b_vs_llama_1b_draft() -> None:
    # 70B head 1.403 B / 2.81 GB; Llama-3.2-1B draft 1.236 B / 2.47 GB, 32 KiB KV
    head = theory.eagle3_head_footprint(L70B, "bf16")
    draft = theory.model_footprint(L1B, "bf16")
    assert head.params / 1e9 == pytest.approx(1.403, abs=0.001)
    assert head.weight_bytes / 1e9 == pytest.approx(2.81, abs=0.005)
    assert draft.weight_bytes / 1e9 == pytest.approx(2.47, abs=0.005)
    assert (
        draft.kv_bytes_per_token == 8 * head.kv_bytes_per_token
    )  # 16 layers vs 1, 64- vs 128-dim heads


def test_eagle1_head_is_smaller_than_eagle3() -> None:
    e1 = theory.eagle_head_footprint(L8B)
    e3 = theory.eagle3_head_footprint(L8B)
    assert 0.2e9 < e1.params < e3.params
    assert e1.kv_bytes_per_token == e3.kv_bytes_per_token


def test_unknown_dtype_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown dtype 'fp7'"):
        theory.model_footprint(L8B, "fp7")
