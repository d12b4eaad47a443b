"""The head ``train-head`` trains: ``speculators``' EAGLE-3 model, new or started from a head in
vLLM's format — the same function after the move, and saved in the format vLLM serves — and a
starting head that does not fit the target refused, naming ``--init``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from alphagate.train.config import TrainError
from tests.train.synthetic import Synthetic, target, tokenizer

torch = pytest.importorskip("torch")


@pytest.mark.parametrize(
    ("layers", "ids"), [(32, (2, 16, 29)), (8, (2, 4, 5)), (6, (1, 3, 5)), (4, (1, 2, 3))]
)
def test_a_new_heads_layers_are_vllms_default_where_they_are_three_in_order(
    layers: int, ids: tuple[int, ...]
) -> None:
    from alphagate.train.head import default_aux_layers

    assert default_aux_layers(layers) == ids
    with pytest.raises(TrainError, match="--target: 3 layers"):
        default_aux_layers(3)


def _vllm_head(target_dir: Path, out: Path) -> Path:
    """A head in vLLM's LlamaForCausalLMEagle3 format, written by the real-engine tier's fixture
    writer (its weights random, its norms away from 1 so that one left behind shows)."""
    from types import SimpleNamespace

    from transformers import LlamaForCausalLM

    from alphagate.testing.eagle3 import save_eagle3_head, train_eagle3_head

    lm = LlamaForCausalLM.from_pretrained(target_dir)
    ids = torch.randint(0, lm.config.vocab_size, (400,), generator=torch.Generator().manual_seed(0))
    s = SimpleNamespace(lr=3e-3, batch_size=2, seq_len=32)
    head = train_eagle3_head(lm, ids, s, steps=0, seed=5)
    with torch.no_grad():
        for name, p in head.named_parameters():
            if name.endswith("weight") and p.dim() == 1:
                p.mul_(1.0 + 0.3 * torch.rand_like(p))
    save_eagle3_head(head, lm, out)
    return out


def _draft_logits(head_dir: Path, target_dir: Path, seq: np.ndarray, k: int) -> list[Any]:
    from alphagate.measure.offline.eagle3 import Eagle3Head
    from alphagate.measure.offline.models import CausalLM

    lm = CausalLM(str(target_dir), "--target", "cpu", torch.float32)
    head = Eagle3Head(str(head_dir), lm, "cpu", torch.float32)
    _, aux, _ = lm.hidden(seq, aux_ids=head.aux_ids)
    contexts = np.arange(2, seq.size - k + 1, dtype=np.int64)
    out = [np.zeros((contexts.size, lm.vocab_size)) for _ in range(k)]

    def score(step: int, rows: np.ndarray, normed: Any) -> np.ndarray:
        out[step][rows] = head.draft_logits(normed).double().numpy()
        return np.ones(rows.size, dtype=bool)

    head.drafts(aux, seq, contexts, k, score)
    return out


def test_a_head_moved_into_speculators_and_saved_drafts_as_before(
    synthetic: Synthetic, tmp_path: Path
) -> None:
    from alphagate.measure.offline.models import CausalLM
    from alphagate.train.head import load_head, save_head

    vllm = _vllm_head(synthetic.target, tmp_path / "vllm-head")
    lm = CausalLM(str(synthetic.target), "--target", "cpu", torch.float32)
    model = load_head(str(vllm), lm, str(synthetic.target), "--init")
    save_head(model, tmp_path / "moved")
    cfg = json.loads((tmp_path / "moved" / "config.json").read_text())
    assert cfg["speculators_model_type"] == "eagle3"  # the format vLLM reads as speculators'
    assert cfg["eagle_aux_hidden_state_layer_ids"] == [1, 2, 3]
    assert cfg["norm_before_fc"] is False and cfg["fc_norm"] is False
    seq = np.random.default_rng(4).integers(0, lm.vocab_size, 40).astype(np.int64)
    before = _draft_logits(vllm, synthetic.target, seq, 3)
    after = _draft_logits(tmp_path / "moved", synthetic.target, seq, 3)
    for a, b in zip(after, before, strict=True):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-5 * np.abs(b).max())
    # the frozen parts are the head's own, not the target's (a head may have trained its LM head)
    lm_head = model.lm_head.weight.detach()
    assert not torch.equal(lm_head, lm.lm_head.weight.detach())
    assert not any(p.requires_grad for p in (model.lm_head.weight, model.embed_tokens.weight))


def test_a_new_head_is_the_targets_width_with_its_lm_head(synthetic: Synthetic) -> None:
    from alphagate.measure.offline.models import CausalLM
    from alphagate.train.head import new_head

    lm = CausalLM(str(synthetic.target), "--target", "cpu", torch.float32)
    model = new_head(lm, str(synthetic.target), seed=0)
    assert model.config.eagle_aux_hidden_state_layer_ids == [1, 2, 3]
    assert torch.equal(model.lm_head.weight, lm.lm_head.weight)
    assert torch.equal(model.verifier_lm_head.weight, lm.lm_head.weight)
    assert tuple(model.fc.weight.shape) == (32, 96)
    again = new_head(lm, str(synthetic.target), seed=0)
    assert torch.equal(again.fc.weight, model.fc.weight)  # seeded


@pytest.mark.parametrize("what", ["hidden size", "vocabulary"])
def test_a_starting_head_of_another_target_is_refused_naming_init(
    synthetic: Synthetic, tmp_path: Path, what: str
) -> None:
    from alphagate.measure.offline.models import CausalLM
    from alphagate.train.head import load_head

    other = tmp_path / "other"
    if what == "hidden size":
        tok = tokenizer(other)
        target(other, len(tok), hidden=48)  # type: ignore[arg-type]
    else:
        tok = tokenizer(other, vocab=280)
        target(other, len(tok))  # type: ignore[arg-type]
    head = _vllm_head(other, tmp_path / "head")
    lm = CausalLM(str(synthetic.target), "--target", "cpu", torch.float32)
    msg = (
        r"--init: hidden_size 48 ≠ the target's hidden_size 32"
        if what == "hidden size"
        else (r"--init: vocab_size 280 ≠ the target's 300")
    )
    with pytest.raises(TrainError, match=msg):
        load_head(str(head), lm, str(synthetic.target), "--init")
