"""The hand-written EAGLE-3 forward of ``measure offline`` (:class:`alphagate.measure.offline.
eagle3.Eagle3Head`) against the reference implementation it follows: the ``speculators``
library's ``Eagle3DraftModel`` (``speculators/models/eagle3/core.py``), the model definition
that trains the heads vLLM serves.

One head, initialised by ``speculators`` with random weights and written by its own
``save_pretrained`` (its config format, its tensor names), is read back by our loader; both are
given the same target auxiliary hidden states and tokens. ``speculators``' training-time-test
forward (``ttt_steps``) is the chain our replay unrolls: step 0 reads the target's features and
the next token, step j its own previous hidden state and the token j further on, attending to
step 0's keys up to its position and to its own earlier steps. Every position's logits at every
step must agree to float32 rounding. The target has six layers, so vLLM's default auxiliary
layers (2, L // 2, L − 3) = (2, 3, 3) name one layer twice.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from alphagate.measure.offline.eagle3 import Eagle3Head  # noqa: E402
from alphagate.measure.offline.models import CausalLM  # noqa: E402

VOCAB, HIDDEN, LAYERS, TOKENS, STEPS = 96, 32, 6, 40, 3


def _target(out: Path) -> Path:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(1)
    cfg = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        intermediate_size=64,
        num_hidden_layers=LAYERS,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        tie_word_embeddings=False,
    )
    LlamaForCausalLM(cfg).save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def speculators_eagle3() -> Any:
    """speculators' EAGLE-3 module, imported by the test that uses it (~8 s of imports: not at
    collection, in every worker)."""
    return pytest.importorskip("speculators.models.eagle3")


def _reference_head(
    speculators_eagle3: Any, out: Path, *, norm_before_residual: bool, aux_ids: list[int]
) -> Any:
    """A speculators EAGLE-3 head with every weight drawn at random (norms too), saved."""
    from speculators.config import SpeculatorsConfig, VerifierConfig
    from speculators.proposals.greedy import GreedyTokenProposalConfig
    from transformers import LlamaConfig

    layer = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        intermediate_size=48,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
    )
    layer._attn_implementation = "eager"  # the CPU path; flex attention's masks are the same
    cfg = speculators_eagle3.Eagle3SpeculatorConfig(
        transformer_layer_config=layer,
        draft_vocab_size=VOCAB,
        norm_before_residual=norm_before_residual,
        eagle_aux_hidden_state_layer_ids=aux_ids,
        speculators_config=SpeculatorsConfig(
            algorithm="eagle3",
            proposal_methods=[GreedyTokenProposalConfig(speculative_tokens=STEPS)],
            default_proposal_method="greedy",
            verifier=VerifierConfig(name_or_path=None, architectures=["LlamaForCausalLM"]),
        ),
    )
    torch.manual_seed(2)
    head = speculators_eagle3.Eagle3DraftModel(cfg)
    with torch.no_grad():
        for name, p in head.named_parameters():
            # norms around 1, matrices at a scale that keeps activations O(1)
            base = 1.0 if name.endswith("norm.weight") else 0.0
            p.copy_(base + 0.3 * torch.randn_like(p) / (1.0 if base else p.shape[-1] ** 0.5))
    head.eval()
    head.save_pretrained(out)
    return head


def _ours(head_dir: Path, target: CausalLM, seq: np.ndarray, steps: int) -> list[np.ndarray]:
    """Our head's logits ``[steps][positions, V]``: every chain start T = 2 … len − 1 unrolled
    ``steps`` deep (every chain continued, as a walk that always matches would)."""
    head = Eagle3Head(str(head_dir), target, "cpu", torch.float32)
    _, aux, _ = target.hidden(seq, aux_ids=head.aux_ids)
    assert aux is not None
    contexts = np.arange(2, seq.size - steps + 1, dtype=np.int64)
    out = [np.zeros((contexts.size, VOCAB)) for _ in range(steps)]

    def score(step: int, rows: np.ndarray, normed: Any) -> np.ndarray:
        out[step][rows] = head.draft_logits(normed).double().numpy()
        return np.ones(rows.size, dtype=bool)

    head.drafts(aux, seq, contexts, steps, score)
    return out


def _reference(head: Any, target: CausalLM, seq: np.ndarray, steps: int) -> list[np.ndarray]:
    """speculators' forward over the same sequence: position p pairs the features at p with the
    token at p + 1 (our context T = p + 2); its ``ttt_steps`` logits, captured from lm_head."""
    _, aux, _ = target.hidden(seq, aux_ids=tuple(head.config.eagle_aux_hidden_state_layer_ids))
    n = seq.size - 1
    captured: list[Any] = []
    hook = head.lm_head.register_forward_hook(lambda _m, _i, o: captured.append(o.detach()))
    try:
        with torch.no_grad():
            head(
                aux[None, :n].float(),
                torch.as_tensor(seq[1 : n + 1])[None],
                torch.zeros(1, n, dtype=torch.long),
                ttt_steps=steps,
            )
    finally:
        hook.remove()
    starts = seq.size - steps - 1  # the chain starts T = 2 … len − steps that _ours unrolls
    return [c[0, :starts].double().numpy() for c in captured]


# speculators 0.9 passes the cache by the name transformers 5.2x deprecates
@pytest.mark.filterwarnings("ignore:`past_key_values` is deprecated:FutureWarning")
@pytest.mark.parametrize("norm_before_residual", [False, True])
def test_our_eagle3_forward_equals_the_speculators_reference(
    tmp_path: Path, norm_before_residual: bool, speculators_eagle3: Any
) -> None:
    target = CausalLM(str(_target(tmp_path / "target")), "--target", "cpu", torch.float32)
    head = _reference_head(
        speculators_eagle3,
        tmp_path / "head",
        norm_before_residual=norm_before_residual,
        aux_ids=[2, LAYERS // 2, LAYERS - 3],
    )
    seq = np.random.default_rng(3).integers(0, VOCAB, TOKENS).astype(np.int64)

    ours = _ours(tmp_path / "head", target, seq, STEPS)
    ref = _reference(head, target, seq, STEPS)

    for step in range(STEPS):
        assert ours[step].shape == ref[step].shape
        scale = np.abs(ref[step]).max()
        np.testing.assert_allclose(ours[step], ref[step], rtol=0, atol=2e-5 * scale)
        # and the greedy draft each would propose
        assert (ours[step].argmax(-1) == ref[step].argmax(-1)).all()
    # a chain step that differs from the first (its input is the head's own hidden state)
    assert not np.allclose(ours[1], ours[0], atol=1e-3)
