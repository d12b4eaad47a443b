"""Tiny models for the offline tests, built in seconds (random but correlated weights, saved
with ``save_pretrained`` and read back by the real loading code), and a brute-force reference
engine: vLLM's draft → verify → accept loop run step by step, every forward recomputed from
scratch — no teacher forcing, no KV caches, no batching over positions."""

from __future__ import annotations

import functools
import json
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from alphagate.testing.eagle3 import Eagle3Head, save_eagle3_head
from alphagate.testing.tiny_models import CHAT_TEMPLATE

VOCAB = 320


@dataclass(frozen=True)
class Tiny:
    target: Path
    draft: Path
    eagle3: Path
    eagle3_small_vocab: Path

    @classmethod
    def at(cls, root: Path) -> Tiny:
        """The models :func:`build` wrote under ``root``."""
        return cls(root / "target", root / "draft", root / "eagle3", root / "eagle3-small")


def _tokenizer(out: Path) -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    text = (Path(sysconfig.get_paths()["stdlib"]) / "textwrap.py").read_text(encoding="utf-8")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB,
        special_tokens=["<|endoftext|>", "<|user|>", "<|assistant|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator([text], trainer=trainer)
    fast = PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=tok, eos_token="<|endoftext|>", pad_token="<|endoftext|>"
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def _llama(vocab: int, hidden: int, layers: int, seed: int) -> Any:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        tie_word_embeddings=False,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=0,
    )
    m = LlamaForCausalLM(cfg)
    with torch.no_grad():  # spread the logits so that argmax ties never happen
        m.lm_head.weight.mul_(8.0)
    return m.eval()


def build(root: Path) -> Tiny:
    """Target (4 layers), a draft (the target with perturbed layers), and EAGLE-3 heads (full
    and reduced vocabulary) that lean on the target's last aux state, so drafts are accepted
    often enough to reach every position."""
    tok = _tokenizer(root / "tok")
    vocab = len(tok)
    target = _llama(vocab, 64, 4, 0)
    target.save_pretrained(root / "target")
    tok.save_pretrained(root / "target")
    draft = _llama(vocab, 64, 4, 0)
    with torch.no_grad():
        g = torch.Generator().manual_seed(1)
        for p in draft.model.layers[2:].parameters():
            p.add_(0.002 * torch.randn(p.shape, generator=g))
    draft.save_pretrained(root / "draft")
    tok.save_pretrained(root / "draft")
    torch.manual_seed(2)
    head = Eagle3Head(target.config)
    with torch.no_grad():
        h = head.h
        head.fc.weight.zero_()
        head.fc.weight[:, 2 * h :] = torch.eye(h)  # the residual stream entering the last layer
        for lin in (head.o_proj, head.down_proj):
            lin.weight.mul_(0.1)
        head.norm.weight.copy_(target.model.norm.weight)
        head.lm_head.weight.copy_(target.lm_head.weight)
    save_eagle3_head(head, target, root / "eagle3")
    # the same head with a reduced draft vocabulary: the first 200 ids of a permutation
    from safetensors.torch import load_file, save_file

    w = load_file(str(root / "eagle3" / "model.safetensors"))
    keep = torch.randperm(vocab, generator=torch.Generator().manual_seed(3))[:200].sort().values
    w["lm_head.weight"] = w["lm_head.weight"][keep].contiguous()
    w["d2t"] = (keep - torch.arange(keep.numel())).to(torch.int64)
    small = root / "eagle3-small"
    small.mkdir()
    save_file(w, str(small / "model.safetensors"))
    cfg = json.loads((root / "eagle3" / "config.json").read_text())
    cfg["draft_vocab_size"] = 200
    (small / "config.json").write_text(json.dumps(cfg))
    return Tiny.at(root)


def greedy_log(tiny: Tiny, path: Path, prompts: list[str], n: int, cls: list[str]) -> None:
    """The target's own greedy outputs, as an OpenAI request/response JSONL with token ids."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny.target)
    m = AutoModelForCausalLM.from_pretrained(tiny.target).eval()
    lines = []
    for p, c in zip(prompts, cls, strict=True):
        ids = tok(p)["input_ids"]
        out = generate(m, ids, n)
        lines.append(
            json.dumps(
                {
                    "request": {"prompt": p, "max_tokens": n, "meta": {"cls": c}},
                    "response": {
                        "choices": [{"text": tok.decode(out), "token_ids": out}],
                        "prompt_token_ids": ids,
                    },
                }
            )
        )
    path.write_text("\n".join(lines) + "\n")


@torch.no_grad()
def generate(m: Any, ids: list[int], n: int) -> list[int]:
    seq = list(ids)
    for _ in range(n):
        seq.append(int(m(torch.tensor([seq])).logits[0, -1].argmax()))
    return seq[len(ids) :]


# ---------------------------------------------------------------- the reference engine
@functools.lru_cache(maxsize=4)
def _ref_head(path: Path, target: Path) -> _RefHead:
    return _RefHead(path, _load(target))


class _RefHead(nn.Module):
    """The testing package's EAGLE-3 head run on explicit per-position hidden inputs."""

    def __init__(self, path: Path, target: Any) -> None:
        super().__init__()
        from safetensors.torch import load_file

        self.head = Eagle3Head(target.config)
        w = load_file(str(path / "model.safetensors"))
        h = self.head
        m = "midlayer."
        pairs = {
            "fc.weight": h.fc.weight,
            f"{m}self_attn.q_proj.weight": h.q_proj.weight,
            f"{m}self_attn.k_proj.weight": h.k_proj.weight,
            f"{m}self_attn.v_proj.weight": h.v_proj.weight,
            f"{m}self_attn.o_proj.weight": h.o_proj.weight,
            f"{m}mlp.gate_proj.weight": h.gate_proj.weight,
            f"{m}mlp.up_proj.weight": h.up_proj.weight,
            f"{m}mlp.down_proj.weight": h.down_proj.weight,
            f"{m}input_layernorm.weight": h.input_layernorm.weight,
            f"{m}hidden_norm.weight": h.hidden_norm.weight,
            f"{m}post_attention_layernorm.weight": h.post_attention_layernorm.weight,
            "norm.weight": h.norm.weight,
        }
        with torch.no_grad():
            for k, p in pairs.items():
                p.copy_(w[k])
        self.lm_head = w["lm_head.weight"]
        self.embed = w["embed_tokens.weight"]
        self.to_target = None if "d2t" not in w else torch.arange(w["d2t"].numel()) + w["d2t"]

    @torch.no_grad()
    def run(self, hidden: torch.Tensor, tokens: list[int], positions: list[int]) -> Any:
        """Causal pass over items (hidden_i, token_i, position_i) → (prenorm outputs, drafts)."""
        h = self.head
        s = hidden.shape[0]
        e = self.embed[torch.tensor(tokens)]
        x = torch.cat([h.input_layernorm(e), h.hidden_norm(hidden)], dim=-1)[None]
        pos = torch.tensor(positions)
        q = h.q_proj(x).view(1, s, h.heads, h.head_dim).transpose(1, 2)
        k = h.k_proj(x).view(1, s, h.kv_heads, h.head_dim).transpose(1, 2)
        v = h.v_proj(x).view(1, s, h.kv_heads, h.head_dim).transpose(1, 2)
        q, k = h._rope(q, pos), h._rope(k, pos)
        rep = h.heads // h.kv_heads
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        res = h.o_proj(a.transpose(1, 2).reshape(1, s, -1)) + hidden[None]
        y = h.post_attention_layernorm(res)
        out = h.down_proj(torch.nn.functional.silu(h.gate_proj(y)) * h.up_proj(y)) + res
        logits = h.norm(out) @ self.lm_head.T
        ids = logits.argmax(-1)[0]
        return out[0], ids if self.to_target is None else self.to_target[ids]


@functools.lru_cache(maxsize=8)
def _load(path: Path) -> Any:
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(path).eval()


@torch.no_grad()
def reference_counts(
    tiny: Tiny, method: str, prompt: list[int], n: int, k: int, ngram: tuple[int, int] = (2, 3)
) -> dict[str, Any]:
    """vLLM's counters for one request served greedily with speculation, step by step."""
    from tests.measure.offline.vllm_ngram_port import (
        vllm_find_longest_matched_ngram_and_propose_tokens as vllm_ngram,
    )

    target = _load(tiny.target)
    draft = _load(tiny.draft) if method == "draft" else None
    head = _ref_head(tiny.eagle3 if method == "eagle3" else tiny.eagle3_small_vocab, tiny.target)
    seq = list(prompt)
    seq.append(int(target(torch.tensor([seq])).logits[0, -1].argmax()))  # the prefill's token
    out = {"drafts": 0, "draft_tokens": 0, "accepted": 0, "per_pos": [0] * k}
    while len(seq) - len(prompt) < n:
        if method == "ngram":
            d = [int(x) for x in vllm_ngram(np.asarray(seq), ngram[0], ngram[1], 10**9, k)]
        elif method == "draft":
            d = []
            for _ in range(k):
                d.append(int(draft(torch.tensor([seq + d])).logits[0, -1].argmax()))  # type: ignore[misc]
        else:
            t = len(seq)
            hs = target(torch.tensor([seq]), output_hidden_states=True).hidden_states
            aux = torch.cat([hs[i][0] for i in head.head.aux_ids], dim=-1)
            hidden = [*head.head.fc(aux[: t - 1])]
            tokens, positions = seq[1:t], list(range(t - 1))
            d = []
            for _ in range(k):
                outs, ids = head.run(torch.stack(hidden), tokens, positions)
                d.append(int(ids[-1]))
                hidden.append(outs[-1])  # the chain feeds the head its own output
                tokens.append(d[-1])
                positions.append(positions[-1] + 1)
        verify = target(torch.tensor([seq + d])).logits[0, len(seq) - 1 :].argmax(-1).tolist()
        a = 0
        while a < len(d) and d[a] == verify[a]:
            a += 1
        if d:
            out["drafts"] += 1
            out["draft_tokens"] += len(d)
            out["accepted"] += a
            for i in range(a):
                out["per_pos"][i] += 1
        seq += verify[: a + 1]
    return out
