"""The tiny model builder: deterministic, cached, and loadable by the real from_pretrained path."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from alphagate.testing.tiny_models import TinyModelSettings, build_tiny_models, cache_key  # noqa: E402

FAST = TinyModelSettings(
    corpus_chars=150_000, target_steps=3, draft_steps=2, eagle_steps=2, batch_size=4, seq_len=32
)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_build_is_deterministic_cached_and_loadable(tmp_path: Path) -> None:
    a = build_tiny_models(tmp_path / "a", FAST)
    b = build_tiny_models(tmp_path / "b", FAST)
    for name in ("target", "draft", "eagle3", "eagle3_untrained"):
        fa = next(getattr(a, name).glob("*.safetensors"))
        fb = next(getattr(b, name).glob("*.safetensors"))
        assert _digest(fa) == _digest(fb), name
    # reused when present: the DONE marker short-circuits the build
    assert build_tiny_models(tmp_path / "a", FAST).report == a.report
    assert a.root.name == cache_key(FAST) != cache_key(replace(FAST, seed=1))

    tok = transformers.AutoTokenizer.from_pretrained(a.tokenizer)
    model = transformers.AutoModelForCausalLM.from_pretrained(a.target)
    ids = tok("def main():\n    return 0\n", return_tensors="pt").input_ids
    assert model(ids).logits.shape[-1] == len(tok)
    assert "<|assistant|>" in tok.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True
    )
    draft = transformers.AutoModelForCausalLM.from_pretrained(a.draft)
    assert draft.config.num_hidden_layers == FAST.draft_layers

    cfg = json.loads((a.eagle3 / "config.json").read_text())
    assert cfg["architectures"] == ["LlamaForCausalLMEagle3"]
    assert (
        cfg["num_hidden_layers"] == 1
        and len(cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"]) == 3
    )
    from safetensors.torch import load_file

    w = load_file(str(a.eagle3 / "model.safetensors"))
    h = cfg["hidden_size"]
    assert w["fc.weight"].shape == (h, 3 * h)
    assert w["midlayer.self_attn.q_proj.weight"].shape[1] == 2 * h
    assert {
        "norm.weight",
        "lm_head.weight",
        "embed_tokens.weight",
        "midlayer.hidden_norm.weight",
    } <= set(w)
    assert not torch.equal(
        w["fc.weight"], load_file(str(a.eagle3_untrained / "model.safetensors"))["fc.weight"]
    )
