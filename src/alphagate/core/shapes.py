"""The numbers of a dense decoder-only transformer that set its size and KV-cache footprint."""

from __future__ import annotations

from pydantic import Field

from alphagate.core.records import Frozen

__all__ = ["TransformerShape"]


class TransformerShape(Frozen):
    """The numbers of a dense decoder-only transformer that set its size and KV-cache footprint.

    Field names follow Hugging Face ``config.json`` (Llama / Qwen / Mistral style).
    """

    name: str
    hidden_size: int = Field(gt=0)
    num_hidden_layers: int = Field(gt=0)
    num_attention_heads: int = Field(gt=0)
    num_key_value_heads: int = Field(gt=0)
    head_dim: int = Field(gt=0)
    intermediate_size: int = Field(gt=0)
    vocab_size: int = Field(gt=0)
    tie_word_embeddings: bool = False
