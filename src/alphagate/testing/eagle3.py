"""A trainable EAGLE-3 head in plain torch, saved in the ``LlamaForCausalLMEagle3`` format.

The forward pass follows vLLM's ``Eagle3LlamaForCausalLM`` (``llama_eagle3.py``) for one decoder
layer with ``norm_before_residual = False``:

    hidden   = fc(concat(aux_1, aux_2, aux_3))                 # target hidden states, 3h → h
    residual = hidden
    x        = concat(input_layernorm(embed(next_token)), hidden_norm(hidden))   # 2h
    residual = self_attn(x) + residual                          # q/k/v read 2h, causal, RoPE
    h        = mlp(post_attention_layernorm(residual)) + residual
    logits   = lm_head(norm(h))

Training is single-step teacher forcing (Li et al. 2025, EAGLE-3, without training-time test):
at position i the head sees the target's auxiliary hidden states at i and the token at i + 1, and
learns the token at i + 2 — what vLLM's proposer asks of it for the first draft.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["Eagle3Head", "save_eagle3_head", "train_eagle3_head"]


def _aux_layer_ids(num_layers: int) -> list[int]:
    """Inputs to layers 1, ⌊L/2⌋, L−1 (distinct, as vLLM records ``hidden_states + residual``)."""
    ids = sorted({1, num_layers // 2, num_layers - 1})
    while len(ids) < 3:
        ids.append(ids[-1])
    return ids[:3]


def _rope_theta(config: Any) -> float:
    """``rope_theta`` (transformers 4) or ``rope_parameters["rope_theta"]`` (transformers 5)."""
    theta = getattr(config, "rope_theta", None)
    if theta is None:
        params = getattr(config, "rope_parameters", None) or {}
        theta = params.get("rope_theta", 10000.0)
    return float(theta)


class _RMSNorm(nn.Module):
    def __init__(self, h: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(h))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        var = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(var + self.eps))


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


class Eagle3Head(nn.Module):
    def __init__(self, target_config: Any) -> None:
        super().__init__()
        c = target_config
        h = c.hidden_size
        self.h, self.heads, self.kv_heads = h, c.num_attention_heads, c.num_key_value_heads
        self.head_dim = getattr(c, "head_dim", None) or h // self.heads
        self.inter, self.vocab, self.eps = c.intermediate_size, c.vocab_size, c.rms_norm_eps
        self.theta = float(_rope_theta(c))
        self.aux_ids = _aux_layer_ids(c.num_hidden_layers)
        self.fc = nn.Linear(3 * h, h, bias=False)
        self.q_proj = nn.Linear(2 * h, self.heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(2 * h, self.kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(2 * h, self.kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.heads * self.head_dim, h, bias=False)
        self.gate_proj = nn.Linear(h, self.inter, bias=False)
        self.up_proj = nn.Linear(h, self.inter, bias=False)
        self.down_proj = nn.Linear(self.inter, h, bias=False)
        self.input_layernorm = _RMSNorm(h, self.eps)
        self.hidden_norm = _RMSNorm(h, self.eps)
        self.post_attention_layernorm = _RMSNorm(h, self.eps)
        self.norm = _RMSNorm(h, self.eps)
        self.lm_head = nn.Linear(h, self.vocab, bias=False)
        self.report: dict[str, float] = {}

    def _rope(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        inv = 1.0 / (
            self.theta ** (torch.arange(0, self.head_dim, 2, dtype=torch.float32) / self.head_dim)
        )
        freqs = positions[:, None].float() * inv[None, :]  # [S, hd/2]
        emb = torch.cat((freqs, freqs), dim=-1)
        return x * emb.cos() + _rotate_half(x) * emb.sin()

    def forward(
        self, aux: torch.Tensor, embeds: torch.Tensor, positions: torch.Tensor
    ) -> torch.Tensor:
        """``aux`` [B, S, 3h], ``embeds`` [B, S, h] (of the next tokens), ``positions`` [S] → logits."""
        b, s, _ = embeds.shape
        hidden = self.fc(aux)
        residual = hidden
        x = torch.cat(
            [self.input_layernorm(embeds), self.hidden_norm(hidden)], dim=-1
        )  # [B, S, 2h]
        q = self.q_proj(x).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = self._rope(q, positions), self._rope(k, positions)
        rep = self.heads // self.kv_heads
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # [B, heads, S, hd]
        residual = self.o_proj(a.transpose(1, 2).reshape(b, s, -1)) + residual
        y = self.post_attention_layernorm(residual)
        out = self.down_proj(F.silu(self.gate_proj(y)) * self.up_proj(y)) + residual
        return self.lm_head(self.norm(out))  # type: ignore[no-any-return]


def _aux(target: Any, ids: torch.Tensor, layer_ids: list[int]) -> torch.Tensor:
    with torch.no_grad():
        hs = target(input_ids=ids, output_hidden_states=True).hidden_states
    return torch.cat([hs[i] for i in layer_ids], dim=-1)


def train_eagle3_head(
    target: Any, ids: torch.Tensor, s: Any, *, steps: int, seed: int
) -> Eagle3Head:
    """Initialise (seeded) and train a head for ``steps`` steps on seeded windows of ``ids``."""
    torch.manual_seed(seed)
    head = Eagle3Head(target.config)
    embed = target.get_input_embeddings()
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(head.parameters(), lr=s.lr, weight_decay=0.0)
    n = ids.numel() - s.seq_len - 3
    t0 = time.perf_counter()
    loss_v = float("nan")
    head.train()
    for _ in range(steps):
        starts = torch.randint(0, n, (s.batch_size,), generator=gen)
        x = torch.stack([ids[i : i + s.seq_len + 2] for i in starts])  # [B, S + 2]
        aux = _aux(target, x[:, :-2], head.aux_ids)  # hidden states at positions 0..S−1
        with torch.no_grad():
            emb = embed(x[:, 1:-1])  # the token at i + 1
        logits = head(aux, emb, torch.arange(1, s.seq_len + 1))
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 2:].reshape(-1))
        opt.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]
        opt.step()
        loss_v = loss.item()
    head.eval()
    head.report = {"steps": steps, "final_loss": loss_v, "seconds": time.perf_counter() - t0}
    return head


def save_eagle3_head(head: Eagle3Head, target: Any, out: Path) -> None:
    """Write ``config.json`` and ``model.safetensors`` in the LlamaForCausalLMEagle3 layout."""
    from safetensors.torch import save_file

    out.mkdir(parents=True, exist_ok=True)
    c = target.config
    cfg = {
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
        "hidden_size": head.h,
        "intermediate_size": head.inter,
        "num_attention_heads": head.heads,
        "num_key_value_heads": head.kv_heads,
        "head_dim": head.head_dim,
        "num_hidden_layers": 1,
        "vocab_size": head.vocab,
        "draft_vocab_size": head.vocab,
        "rms_norm_eps": head.eps,
        "rope_theta": head.theta,
        "max_position_embeddings": c.max_position_embeddings,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "torch_dtype": "float32",
        "bos_token_id": c.bos_token_id,
        "eos_token_id": c.eos_token_id,
        "eagle_config": {
            "eagle_aux_hidden_state_layer_ids": head.aux_ids,
            "use_aux_hidden_state": True,
        },
    }
    (out / "config.json").write_text(json.dumps(cfg, indent=2))
    m = "midlayer."
    tensors = {
        "fc.weight": head.fc.weight,
        f"{m}self_attn.q_proj.weight": head.q_proj.weight,
        f"{m}self_attn.k_proj.weight": head.k_proj.weight,
        f"{m}self_attn.v_proj.weight": head.v_proj.weight,
        f"{m}self_attn.o_proj.weight": head.o_proj.weight,
        f"{m}mlp.gate_proj.weight": head.gate_proj.weight,
        f"{m}mlp.up_proj.weight": head.up_proj.weight,
        f"{m}mlp.down_proj.weight": head.down_proj.weight,
        f"{m}input_layernorm.weight": head.input_layernorm.weight,
        f"{m}hidden_norm.weight": head.hidden_norm.weight,
        f"{m}post_attention_layernorm.weight": head.post_attention_layernorm.weight,
        "norm.weight": head.norm.weight,
        "lm_head.weight": head.lm_head.weight,
        "embed_tokens.weight": target.get_input_embeddings().weight,
    }
    save_file(
        {k: v.detach().contiguous().clone() for k, v in tensors.items()},
        str(out / "model.safetensors"),
    )
