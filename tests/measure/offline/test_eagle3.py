"""An EAGLE-3 head's ``config.json`` parsed against its target, without loading a model: vLLM's
format and the ``speculators`` one (the layer's settings under ``transformer_layer_config``),
vLLM's defaults, and each refusal naming its field."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from alphagate.measure.offline.eagle3 import eagle3_config
from alphagate.measure.results import MeasureError

TARGET = {"target_hidden": 64, "target_layers": 8, "target_vocab": 500}
VLLM = {
    "architectures": ["LlamaForCausalLMEagle3"],
    "hidden_size": 64,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 500,
    "draft_vocab_size": 200,
    "rope_theta": 10000.0,
}


def test_vllm_format_with_vllms_defaults() -> None:
    c = eagle3_config(dict(VLLM), **TARGET)
    # llama_eagle3.py: aux layers (2, L // 2, L − 3) unless the config names them
    assert c.aux_ids == (2, 4, 5)
    assert (c.hidden, c.heads, c.kv_heads, c.head_dim) == (64, 4, 2, 16)
    assert (c.vocab, c.draft_vocab, c.target_hidden) == (500, 200, 64)
    assert c.fc_shape == (64, 3 * 64)
    assert c.rope == {"rope_theta": 10000.0}
    assert not c.norm_before_residual and not c.norm_output


def test_speculators_format_reads_the_layer_config_and_the_eagle_settings() -> None:
    raw: dict[str, Any] = {
        "speculators_model_type": "eagle3",
        "transformer_layer_config": {**VLLM, "head_dim": 32, "rms_norm_eps": 1e-5},
        "draft_vocab_size": 300,
        "target_hidden_size": 64,
        "norm_before_residual": True,
        "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 3, 7]},
    }
    c = eagle3_config(raw, **TARGET)
    assert c.head_dim == 32 and c.eps == 1e-5
    assert c.draft_vocab == 300  # the outer settings win over the layer's
    assert c.aux_ids == (1, 3, 7) and c.norm_before_residual


@pytest.mark.parametrize(
    ("change", "names"),
    [
        ({"num_hidden_layers": 2}, "num_hidden_layers = 2"),
        ({"hidden_size": None}, "hidden_size"),
        ({"vocab_size": 501}, "vocab_size 501"),
        ({"target_hidden_size": 32}, "target_hidden_size 32"),
        ({"eagle_aux_hidden_state_layer_ids": [2, 9]}, "outside the target's 0..8"),
        ({"eagle_config": {"use_aux_hidden_state": False}}, "use_aux_hidden_state"),
        ({"norm_before_fc": True}, "norm_before_fc"),
        ({"num_attention_heads": "four"}, "config.json"),
    ],
)
def test_a_head_that_does_not_fit_or_is_not_implemented_is_refused_naming_the_field(
    change: dict[str, Any], names: str
) -> None:
    raw = {**VLLM, **change}
    raw = {k: v for k, v in raw.items() if v is not None}
    with pytest.raises(MeasureError, match="--drafter eagle3") as e:
        eagle3_config(raw, **TARGET)
    assert names in str(e.value)
