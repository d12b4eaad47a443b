"""The EAGLE-3 head as the ``speculators`` library defines it (``speculators/models/eagle3/
core.py``: ``Eagle3DraftModel``, the fused input projection ``fc`` over the auxiliary hidden
states, one decoder layer, the training-time-test forward and its loss; Li et al. 2025,
"EAGLE-3"), built here on the CPU with eager attention, and saved by its own ``save_pretrained``
in the config format vLLM reads as an EAGLE-3 drafter (``vllm/transformers_utils/configs/
speculators/algos.py``).

A head is new (its auxiliary layers vLLM's default (2, L // 2, L − 3) where those are three
layers in order, else three spread over a small target) or started from an existing head in
vLLM's ``LlamaForCausalLMEagle3`` format or the ``speculators`` format, checked against the
target first (:func:`~alphagate.measure.offline.eagle3.eagle3_config`). The embeddings and the
LM head stay frozen, as ``speculators`` keeps them; a weight the starting head lacks is the
target's. This module imports torch and speculators: only a run that trains imports it.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import torch
from transformers import LlamaConfig

from alphagate.measure.offline.eagle3 import eagle3_config, head_weights
from alphagate.measure.offline.models import CausalLM, read_config
from alphagate.measure.results import MeasureError
from alphagate.train.config import TrainError

__all__ = ["INSTALL", "default_aux_layers", "load_head", "new_head", "save_head", "speculators"]

#: how the ``speculators`` library is installed beside a CPU torch (the Makefile's commands):
#: without its dependencies, which ask for torchvision and torchaudio, then those it imports
INSTALL = (
    'pip install "datasets>=4,<=5.1" "openai>=2" "loguru>=0.7.2,<=0.7.3" "pydantic-settings>=2"',
    'pip install --no-deps "speculators==0.9.0" "hs-connectors==0.9.0"',
)
#: weights a head may lack: the target's are used (embeddings, LM head), or they are not the
#: head's (the verifier's own LM head and norm, which recompute the training target)
_FROM_TARGET = frozenset(
    {"embed_tokens.weight", "lm_head.weight", "verifier_lm_head.weight", "verifier_norm.weight"}
)


def speculators() -> Any:
    """``speculators.models.eagle3``, or :class:`TrainError` with the commands that install it."""
    try:
        import speculators.models.eagle3 as eagle3
        from loguru import logger
    except ImportError as exc:
        raise TrainError(
            f"train-head needs the speculators library (not installed: {exc.name or exc}); "
            "install it without its dependencies, which break a CPU torch: " + " && ".join(INSTALL)
        ) from None
    logger.disable("speculators")  # its loader's notices, on stderr, for every head built
    return eagle3


def default_aux_layers(num_layers: int) -> tuple[int, ...]:
    """vLLM's and ``speculators``' default auxiliary layers (2, L // 2, L − 3) where those are
    three distinct layers in order (vLLM hands them to the head in layer order), else 1, L // 2
    and L − 1 (a target of under 7 layers)."""
    for ids in ((2, num_layers // 2, num_layers - 3), (1, num_layers // 2, num_layers - 1)):
        if 0 < ids[0] < ids[1] < ids[2] < num_layers:
            return ids
    raise TrainError(f"--target: {num_layers} layers: too few for three auxiliary layers")


def _layer(
    raw: dict[str, Any], *, vocab: int, intermediate: int, hidden: int, heads: int
) -> LlamaConfig:
    """The decoder layer's config (eager attention: the CPU path of ``speculators``)."""
    keys = (
        "num_key_value_heads",
        "head_dim",
        "rms_norm_eps",
        "rope_theta",
        "rope_scaling",
        "rope_parameters",
        "max_position_embeddings",
        "hidden_act",
    )
    layer = LlamaConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=intermediate,
        num_hidden_layers=1,
        num_attention_heads=heads,
        tie_word_embeddings=False,
        **{k: raw[k] for k in keys if raw.get(k) is not None},
    )
    layer._attn_implementation = "eager"
    return layer


def _model(layer: LlamaConfig, target_path: str, *, aux_ids: tuple[int, ...], **fields: Any) -> Any:
    """An ``Eagle3DraftModel`` reading ``target_path``'s auxiliary layers ``aux_ids``."""
    eagle3 = speculators()
    from speculators.config import SpeculatorsConfig, VerifierConfig
    from speculators.proposals.greedy import GreedyTokenProposalConfig

    arch = read_config(target_path, "--target").get("architectures") or []
    cfg = eagle3.Eagle3SpeculatorConfig(
        transformer_layer_config=layer,
        eagle_aux_hidden_state_layer_ids=list(aux_ids),
        speculators_config=SpeculatorsConfig(
            algorithm="eagle3",
            proposal_methods=[GreedyTokenProposalConfig(speculative_tokens=3)],
            default_proposal_method="greedy",
            verifier=VerifierConfig(name_or_path=target_path, architectures=list(arch)),
        ),
        **fields,
    )
    return eagle3.Eagle3DraftModel(cfg)


def new_head(target: CausalLM, target_path: str, seed: int) -> Any:
    """A head initialised at random (seeded) for ``target``, its embeddings and LM head the
    target's."""
    raw = read_config(target_path, "--target")
    c = target.config
    layer = _layer(
        raw,
        vocab=target.vocab_size,
        intermediate=int(c.intermediate_size),
        hidden=int(c.hidden_size),
        heads=int(c.num_attention_heads),
    )
    torch.manual_seed(seed)
    model = _model(
        layer,
        target_path,
        aux_ids=default_aux_layers(target.num_layers),
        draft_vocab_size=target.vocab_size,
        norm_before_residual=False,
    )
    model.load_verifier_weights()
    return model


def load_head(path: str, target: CausalLM, target_path: str, what: str) -> Any:
    """The head in ``path`` (vLLM's or the ``speculators`` format) as an ``Eagle3DraftModel``;
    :class:`TrainError` naming ``what`` (its flag) for one that does not fit the target."""
    try:
        raw = read_config(path, what)
        cfg = eagle3_config(
            raw,
            target_hidden=int(target.config.hidden_size),
            target_layers=target.num_layers,
            target_vocab=target.vocab_size,
            what=what,
        )
        w = head_weights(path, what)
    except MeasureError as exc:
        raise TrainError(str(exc)) from None
    if cfg.hidden != cfg.target_hidden:
        raise TrainError(
            f"{what}: a head {cfg.hidden} wide over a target {cfg.target_hidden} wide; speculators "
            "trains heads as wide as their target"
        )
    up = w.get("layers.0.mlp.gate_proj.weight")
    if up is None:
        raise TrainError(f"{what}: weight 'midlayer.mlp.gate_proj.weight' missing from {path}")
    layer_raw = raw.get("transformer_layer_config") or raw
    layer = _layer(
        {**layer_raw, **cfg.rope},
        vocab=cfg.vocab,
        intermediate=int(up.shape[0]),
        hidden=cfg.hidden,
        heads=cfg.heads,
    )
    model = _model(
        layer,
        target_path,
        aux_ids=cfg.aux_ids,
        draft_vocab_size=cfg.draft_vocab,
        norm_before_residual=cfg.norm_before_residual,
        norm_output=cfg.norm_output,
    )
    _load_weights(model, w, cfg.vocab, cfg.draft_vocab, what)
    model.load_verifier_weights()
    return model


def _load_weights(
    model: Any, w: dict[str, torch.Tensor], vocab: int, draft_vocab: int, what: str
) -> None:
    """The starting head's tensors into ``model``: refused when one of the layer's is missing or
    of another shape, or one is not a head's."""
    w = dict(w)
    if draft_vocab == vocab:
        w.pop("d2t", None)
        w.pop("t2d", None)
    elif "t2d" not in w and "d2t" in w:  # vLLM reads d2t (offsets) only; speculators both
        t2d = torch.zeros(vocab, dtype=torch.bool)
        t2d[torch.arange(draft_vocab) + w["d2t"].long()] = True
        w["t2d"] = t2d
    own = model.state_dict()
    bad = sorted(k for k, v in w.items() if k in own and tuple(v.shape) != tuple(own[k].shape))
    if bad:
        raise TrainError(f"{what}: {', '.join(bad[:3])} of another shape than the head's config")
    # a weight left out keeps its NaN: load_verifier_weights fills it from the target
    missing, unexpected = model.load_state_dict(w, strict=False)
    missing = sorted(set(missing) - _FROM_TARGET)
    if missing or unexpected:
        parts = [
            f"missing {', '.join(missing[:3])}" if missing else "",
            f"not a head's: {', '.join(sorted(unexpected)[:3])}" if unexpected else "",
        ]
        raise TrainError(
            f"{what}: weights that are not an EAGLE-3 head's: " + "; ".join(p for p in parts if p)
        )


def save_head(model: Any, folder: Path) -> None:
    """``save_pretrained`` into ``folder``: its files replace the previous ones one by one, each
    whole (written beside, then renamed)."""
    tmp = folder.with_name(f".{folder.name}.saving")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        model.save_pretrained(str(tmp))
        folder.mkdir(parents=True, exist_ok=True)
        for f in sorted(tmp.iterdir()):
            f.chmod(0o644)  # safetensors writes 0600: a head is served, and shared
            os.replace(f, folder / f.name)
    except OSError as exc:
        raise TrainError(f"--out {folder}: cannot save the head ({exc.strerror or exc})") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
