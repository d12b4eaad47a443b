"""Parameter, weight-byte and KV-cache-byte counts for targets and drafters, from config numbers.

Counts follow the Hugging Face Llama layout (``LlamaForCausalLM``) and the EAGLE heads as vLLM
loads them (``vllm/model_executor/models/llama_eagle.py`` and ``llama_eagle3.py``):

- dense target / classic draft model: embeddings, per layer q/k/v/o + gated MLP + 2 RMSNorms,
  final norm, and an LM head unless tied;
- EAGLE-1 head (Li et al. 2024, arXiv 2401.15077): ``fc`` fusing [embedding ; hidden] (2h → h)
  plus one standard decoder layer; embeddings and LM head are shared with the target;
- EAGLE-3 head (Li et al. 2025, arXiv 2503.01840): ``fc`` fusing three target hidden states
  (3h → h), one decoder layer whose q/k/v read [embedding ; hidden] (2h wide), an extra
  ``hidden_norm``, a final norm and an LM head over the draft vocabulary (32,000 for the public
  Llama heads). Embeddings are shared unless the checkpoint stores its own.

Biases are not counted (Llama has none). KV bytes per token = 2 (K and V) · layers · KV heads ·
head dim · bytes per element.
"""

from __future__ import annotations

from typing import Final

from alphagate.core.records import Frozen
from alphagate.core.shapes import TransformerShape

__all__ = [
    "BYTES_PER_PARAM",
    "Footprint",
    "decoder_layer_params",
    "eagle3_head_footprint",
    "eagle_head_footprint",
    "kv_bytes_per_token",
    "model_footprint",
    "model_params",
]

#: Bytes per weight or KV element for the dtypes alphagate models.
BYTES_PER_PARAM: Final[dict[str, float]] = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "int4": 0.5,
}


class Footprint(Frozen):
    """Memory of one model or draft head.

    ``params`` excludes weights shared with the target; ``streamed_params`` counts every weight one
    forward pass reads (the layers and the LM head — shared ones included, the embedding lookup
    being a gather), which is what the step-time model charges for.
    """

    name: str
    kind: str
    params: int
    weight_bytes: float
    kv_bytes_per_token: float
    layers_with_kv: int
    streamed_params: int


def _bytes_per(dtype: str) -> float:
    try:
        return BYTES_PER_PARAM[dtype]
    except KeyError:
        known = ", ".join(sorted(BYTES_PER_PARAM))
        raise ValueError(f"unknown dtype {dtype!r}; expected one of {known}") from None


def decoder_layer_params(shape: TransformerShape, attn_input_width: int | None = None) -> int:
    """One Llama decoder layer: q/k/v/o projections, gated MLP, two RMSNorm weights.

    ``attn_input_width`` overrides the q/k/v input width (EAGLE-3 feeds 2·hidden).
    """
    h = shape.hidden_size
    width = attn_input_width if attn_input_width is not None else h
    q_out = shape.num_attention_heads * shape.head_dim
    kv_out = shape.num_key_value_heads * shape.head_dim
    attn = width * q_out + 2 * width * kv_out + q_out * h
    mlp = 3 * h * shape.intermediate_size
    return attn + mlp + 2 * h


def model_params(shape: TransformerShape) -> int:
    """Total parameters of a dense decoder-only model (embeddings and LM head included)."""
    h = shape.hidden_size
    embed = shape.vocab_size * h
    lm_head = 0 if shape.tie_word_embeddings else shape.vocab_size * h
    return embed + shape.num_hidden_layers * decoder_layer_params(shape) + h + lm_head


def kv_bytes_per_token(
    shape: TransformerShape, kv_dtype: str = "bf16", layers: int | None = None
) -> float:
    """KV-cache bytes one token occupies: 2 · layers · KV heads · head dim · bytes."""
    n_layers = shape.num_hidden_layers if layers is None else layers
    return 2.0 * n_layers * shape.num_key_value_heads * shape.head_dim * _bytes_per(kv_dtype)


def model_footprint(
    shape: TransformerShape,
    dtype: str = "bf16",
    kv_dtype: str | None = None,
    kind: str = "draft_model",
) -> Footprint:
    """Footprint of a whole model: a classic draft model, or (``kind="target"``) the target."""
    params = model_params(shape)
    return Footprint(
        name=shape.name,
        kind=kind,
        params=params,
        weight_bytes=params * _bytes_per(dtype),
        kv_bytes_per_token=kv_bytes_per_token(shape, kv_dtype or dtype),
        layers_with_kv=shape.num_hidden_layers,
        streamed_params=shape.num_hidden_layers * decoder_layer_params(shape)
        + shape.vocab_size * shape.hidden_size,
    )


def eagle3_head_footprint(
    target: TransformerShape,
    dtype: str = "bf16",
    draft_vocab_size: int = 32_000,
    own_embeddings: bool = False,
    kv_dtype: str | None = None,
) -> Footprint:
    """EAGLE-3 head for ``target``: fc (3h → h), one layer with 2h-wide q/k/v, norms, LM head."""
    h = target.hidden_size
    fc = 3 * h * h
    layer = decoder_layer_params(target, attn_input_width=2 * h) + h  # + hidden_norm
    final_norm = h
    lm_head = draft_vocab_size * h
    embed = target.vocab_size * h if own_embeddings else 0
    params = fc + layer + final_norm + lm_head + embed
    return Footprint(
        name=f"EAGLE-3 head for {target.name}",
        kind="eagle3",
        params=params,
        weight_bytes=params * _bytes_per(dtype),
        kv_bytes_per_token=kv_bytes_per_token(target, kv_dtype or dtype, layers=1),
        layers_with_kv=1,
        streamed_params=params - embed,
    )


def eagle_head_footprint(
    target: TransformerShape,
    dtype: str = "bf16",
    kv_dtype: str | None = None,
    kind: str = "eagle",
) -> Footprint:
    """EAGLE-1 head (or an MTP module, ``kind="mtp"``) for ``target``: fc (2h → h) and one
    standard decoder layer; the LM head is the target's, read again by every draft forward."""
    h = target.hidden_size
    params = 2 * h * h + decoder_layer_params(target)
    label = "MTP module" if kind == "mtp" else "EAGLE head"
    return Footprint(
        name=f"{label} for {target.name}",
        kind=kind,
        params=params,
        weight_bytes=params * _bytes_per(dtype),
        kv_bytes_per_token=kv_bytes_per_token(target, kv_dtype or dtype, layers=1),
        layers_with_kv=1,
        streamed_params=params + target.vocab_size * h,
    )
