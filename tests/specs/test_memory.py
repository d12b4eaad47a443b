"""``alphagate model memory``: a target's and its drafter's weights and KV per token, and the
target KV tokens the drafter's weights displace — checked against the shapes by hand."""

from __future__ import annotations

import pytest

from alphagate.core.errors import ConfigError
from alphagate.specs.memory import memory_answer
from alphagate.specs.models import resolve_model


def test_an_eagle3_head_beside_the_70b_target() -> None:
    a = memory_answer("llama-3.3-70b", "eagle3")
    t = resolve_model("llama-3.3-70b")
    # KV per token: K and V, every layer, every KV head, BF16
    kv = 2 * t.num_hidden_layers * t.num_key_value_heads * t.head_dim * 2
    assert a.target.kv_bytes_per_token == kv == 327_680
    assert a.weight_dtype == "bf16" and a.kv_dtype == "bf16"  # the checkpoint's own dtype
    assert a.draft.layers_with_kv == 1  # one decoder layer
    assert a.draft.kv_bytes_per_token == pytest.approx(kv / t.num_hidden_layers)
    assert a.draft_kv_fraction_of_target == pytest.approx(1 / t.num_hidden_layers)
    assert a.draft_weight_fraction_of_target == pytest.approx(
        a.draft.weight_bytes / a.target.weight_bytes
    )
    assert a.tokens_of_target_kv_displaced_by_draft_weights == pytest.approx(
        a.draft.weight_bytes / kv
    )
    # a smaller draft vocabulary is a smaller LM head
    small = memory_answer("llama-3.3-70b", "eagle3", draft_vocab_size=8_000)
    assert small.draft.weight_bytes < a.draft.weight_bytes
    assert a.draft.weight_bytes - small.draft.weight_bytes == 24_000 * t.hidden_size * 2


def test_fp8_weights_and_kv_halve_their_bytes() -> None:
    bf16 = memory_answer("llama-3.1-8b", "llama-3.2-1b", weight_dtype="bf16")
    fp8 = memory_answer("llama-3.1-8b", "llama-3.2-1b", weight_dtype="fp8", kv_dtype="fp8")
    assert fp8.target.weight_bytes == pytest.approx(bf16.target.weight_bytes / 2)
    assert fp8.target.kv_bytes_per_token == pytest.approx(bf16.target.kv_bytes_per_token / 2)
    assert memory_answer("llama-3.3-70b-fp8", "eagle3").weight_dtype == "fp8"
    # a whole draft model keeps a KV cache in every one of its layers
    assert bf16.draft.layers_with_kv == resolve_model("llama-3.2-1b").num_hidden_layers


def test_n_gram_has_nothing_to_compare() -> None:
    with pytest.raises(ConfigError, match="n-gram drafting has no weights"):
        memory_answer("llama-3.1-8b", "ngram")


def test_suffix_decoding_has_nothing_to_compare() -> None:
    with pytest.raises(ConfigError, match="suffix drafting has no weights"):
        memory_answer("llama-3.1-8b", "suffix")
