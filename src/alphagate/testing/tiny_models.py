"""Build tiny, real, locally trained models for speculative decoding — no model hub needed.

``build_tiny_models(root)`` produces, deterministically from a seed and within a bounded training
budget, four folders loadable by Hugging Face ``from_pretrained`` and by vLLM:

- ``tokenizer`` — a byte-level BPE (``tokenizers``) trained on the Python standard library's own
  ``.py`` files, wrapped as ``PreTrainedTokenizerFast`` with a chat template;
- ``target`` — a small ``LlamaForCausalLM`` trained on the same text;
- ``draft`` — a smaller ``LlamaForCausalLM`` (a classic draft model);
- ``eagle3`` / ``eagle3-untrained`` — EAGLE-3 heads in the ``LlamaForCausalLMEagle3`` checkpoint
  format vLLM loads (``fc``, ``midlayer.*``, ``norm``, ``lm_head``, ``embed_tokens``, ``d2t``;
  ``vllm/model_executor/models/llama_eagle3.py``), one trained against the target's hidden states,
  one not.

Everything lands in ``root/<key>/``, where the key hashes this file's source and the settings,
and is reused when present. torch / transformers / tokenizers are imported lazily.
"""

from __future__ import annotations

import hashlib
import json
import random
import sysconfig
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

__all__ = ["TinyModelSettings", "TinyModels", "build_tiny_models", "cache_key"]


@dataclass(frozen=True)
class TinyModelSettings:
    seed: int = 0
    vocab_size: int = 4096
    corpus_chars: int = 4_000_000
    seq_len: int = 128
    batch_size: int = 16
    target_hidden: int = 256
    target_layers: int = 4
    target_heads: int = 4
    target_kv_heads: int = 2
    target_intermediate: int = 688
    draft_hidden: int = 128
    draft_layers: int = 2
    draft_heads: int = 2
    draft_intermediate: int = 344
    target_steps: int = 400
    draft_steps: int = 300
    eagle_steps: int = 300
    max_position_embeddings: int = 2048
    lr: float = 3e-3


@dataclass(frozen=True)
class TinyModels:
    root: Path
    tokenizer: Path
    target: Path
    draft: Path
    eagle3: Path
    eagle3_untrained: Path
    report: dict[str, Any]


def cache_key(settings: TinyModelSettings) -> str:
    """Hash of the builder's source (this module and the EAGLE-3 head) and the settings."""
    h = hashlib.sha256(Path(__file__).read_bytes())
    h.update(Path(__file__).with_name("eagle3.py").read_bytes())
    h.update(json.dumps(asdict(settings), sort_keys=True).encode())
    return h.hexdigest()[:16]


def _corpus(max_chars: int) -> list[str]:
    """The standard library's own source, in a fixed order (same Python ⇒ same text)."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in stdlib.glob("*.py") if p.is_file())
    texts: list[str] = []
    total = 0
    for p in files:
        try:
            t = p.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        texts.append(t)
        total += len(t)
        if total >= max_chars:
            break
    return texts


CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


def _train_tokenizer(texts: list[str], s: TinyModelSettings, out: Path) -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    specials = ["<|endoftext|>", "<|user|>", "<|assistant|>", "<|system|>"]
    trainer = trainers.BpeTrainer(
        vocab_size=s.vocab_size,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    fast = PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=tok,
        bos_token="<|endoftext|>",
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
        unk_token="<|endoftext|>",
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)
    return fast


# RoPE base 10,000 (transformers 4 takes rope_theta; 5 moved it into rope_parameters)
_ROPE: dict[str, Any] = {"rope_theta": 10000.0}


def _llama(
    s: TinyModelSettings,
    hidden: int,
    layers: int,
    heads: int,
    kv_heads: int,
    inter: int,
    vocab: int,
) -> Any:
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=inter,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=s.max_position_embeddings,
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=0,
        **_ROPE,
    )
    return LlamaForCausalLM(cfg)


def _batches(ids: Any, s: TinyModelSettings, gen: Any) -> Any:
    import torch

    n = ids.numel() - s.seq_len - 2
    while True:
        starts = torch.randint(0, n, (s.batch_size,), generator=gen)
        yield torch.stack([ids[i : i + s.seq_len + 1] for i in starts])


def _train_lm(
    model: Any, ids: Any, s: TinyModelSettings, steps: int, seed: int
) -> dict[str, float]:
    """Train on seeded random windows for a fixed number of steps (deterministic on one machine)."""
    import torch

    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=s.lr, weight_decay=0.0)
    model.train()
    batches = _batches(ids, s, gen)
    t0 = time.perf_counter()
    loss_v = float("nan")
    for _ in range(steps):
        x = next(batches)
        out = model(input_ids=x[:, :-1], labels=x[:, :-1])
        opt.zero_grad()
        out.loss.backward()
        opt.step()
        loss_v = out.loss.item()
    model.eval()
    return {"steps": steps, "final_loss": loss_v, "seconds": time.perf_counter() - t0}


def build_tiny_models(
    root: str | Path, settings: TinyModelSettings | None = None, *, log: Any = None
) -> TinyModels:
    """Build (or reuse) the tiny model set under ``root``; returns the paths and a training report."""
    import torch

    s = settings or TinyModelSettings()
    base = Path(root) / cache_key(s)
    done = base / "DONE.json"
    paths = TinyModels(
        base,
        base / "tokenizer",
        base / "target",
        base / "draft",
        base / "eagle3",
        base / "eagle3-untrained",
        {},
    )
    if done.exists():
        return TinyModels(**{**asdict(paths), "report": json.loads(done.read_text())})
    base.mkdir(parents=True, exist_ok=True)
    say = log or (lambda _msg: None)
    random.seed(s.seed)
    torch.manual_seed(s.seed)
    torch.set_num_threads(max(1, torch.get_num_threads()))
    texts = _corpus(s.corpus_chars)
    say(
        f"tokenizer: training BPE (vocab {s.vocab_size}) on {sum(map(len, texts)):,} characters of the stdlib"
    )
    tok = _train_tokenizer(texts, s, paths.tokenizer)
    ids = torch.tensor(tok("\n\n".join(texts))["input_ids"], dtype=torch.long)
    report: dict[str, Any] = {"corpus_tokens": int(ids.numel())}

    target, trained = _build_language_models(s, paths, tok, ids, say)
    report.update(trained)
    report.update(_build_eagle3_heads(s, paths, tok, ids, target, say))
    done.write_text(json.dumps(report, indent=2))
    return TinyModels(**{**asdict(paths), "report": report})


def _build_language_models(
    s: TinyModelSettings, paths: TinyModels, tok: Any, ids: Any, say: Any
) -> tuple[Any, dict[str, Any]]:
    """Train and save the target and the small draft model; returns the target and the reports."""
    say(
        f"target: training a {s.target_layers}-layer, {s.target_hidden}-wide Llama for {s.target_steps} steps"
    )
    vocab = len(tok)
    target = _llama(
        s,
        s.target_hidden,
        s.target_layers,
        s.target_heads,
        s.target_kv_heads,
        s.target_intermediate,
        vocab,
    )
    report = {"target": _train_lm(target, ids, s, s.target_steps, s.seed + 1)}
    target.save_pretrained(paths.target, safe_serialization=True)
    tok.save_pretrained(paths.target)

    say(
        f"draft: training a {s.draft_layers}-layer, {s.draft_hidden}-wide Llama for {s.draft_steps} steps"
    )
    draft = _llama(
        s, s.draft_hidden, s.draft_layers, s.draft_heads, s.draft_heads, s.draft_intermediate, vocab
    )
    report["draft"] = _train_lm(draft, ids, s, s.draft_steps, s.seed + 2)
    draft.save_pretrained(paths.draft, safe_serialization=True)
    tok.save_pretrained(paths.draft)
    return target, report


def _build_eagle3_heads(
    s: TinyModelSettings, paths: TinyModels, tok: Any, ids: Any, target: Any, say: Any
) -> dict[str, Any]:
    """Train the EAGLE-3 head against the target (and save an untrained one beside it)."""
    from alphagate.testing.eagle3 import save_eagle3_head, train_eagle3_head

    say(f"EAGLE-3 head: training against the target's hidden states for {s.eagle_steps} steps")
    untrained = train_eagle3_head(target, ids, s, steps=0, seed=s.seed + 3)
    save_eagle3_head(untrained, target, paths.eagle3_untrained)
    tok.save_pretrained(paths.eagle3_untrained)
    head = train_eagle3_head(target, ids, s, steps=s.eagle_steps, seed=s.seed + 3)
    save_eagle3_head(head, target, paths.eagle3)
    tok.save_pretrained(paths.eagle3)
    return {"eagle3": head.report}
