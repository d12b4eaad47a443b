"""A target small enough to train a head on in seconds, built here from nothing downloaded: a
byte-level BPE tokenizer trained on a few standard-library files, a randomly initialised
four-layer Llama, and a request log of its own greedy continuations (on-policy, token ids
included) in two classes."""

from __future__ import annotations

import json
import sysconfig
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

HIDDEN, LAYERS, OUTPUT_TOKENS = 32, 4, 24
#: requests per class in the log
CODE, PROSE = 64, 24


@dataclass(frozen=True)
class Synthetic:
    target: Path
    log: Path  # OpenAI request/response pairs; the class in the "cls" field


def _corpus() -> str:
    std = Path(sysconfig.get_paths()["stdlib"])
    return "\n".join(
        (std / f).read_text(encoding="utf-8") for f in ("json/encoder.py", "textwrap.py")
    )


def tokenizer(out: Path, *, vocab: int = 300, text: str | None = None) -> object:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab,
        special_tokens=["<|endoftext|>"],
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator([text or _corpus()], trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>")  # type: ignore[no-untyped-call]
    fast.save_pretrained(out)
    return fast


def target(
    out: Path, vocab: int, *, hidden: int = HIDDEN, seed: int = 1, init: float = 0.02
) -> Path:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=LAYERS,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        tie_word_embeddings=False,
        initializer_range=init,
    )
    LlamaForCausalLM(cfg).save_pretrained(out)
    return out


def _prompts(n: int, seed: int) -> list[str]:
    words = _corpus().split()
    rng = np.random.default_rng(seed)
    return [" ".join(words[i : i + 12]) for i in rng.integers(0, len(words) - 12, n)]


def write_log(
    path: Path, target_dir: Path, tok: object, *, vocab_of: Callable[[int], int] | None = None
) -> Path:
    """The target's greedy continuations of ``CODE + PROSE`` prompts, with their token ids —
    each id mapped by ``vocab_of`` (another tokenizer's vocabulary) when given."""
    import torch

    from alphagate.measure.offline.models import CausalLM, Sampling, make_sampler

    lm = CausalLM(str(target_dir), "--target", "cpu", torch.float32)
    greedy = make_sampler(Sampling(), torch.Generator().manual_seed(0))
    lines = []
    for i, p in enumerate(_prompts(CODE + PROSE, seed=2)):
        ids = tok(p)["input_ids"]  # type: ignore[operator]
        out = lm.generate(np.asarray(ids), OUTPUT_TOKENS, greedy, None).tolist()
        text = tok.decode(out, skip_special_tokens=True)  # type: ignore[attr-defined]
        m = vocab_of or (lambda t: t)
        rec = {
            "request": {"prompt": p, "max_tokens": OUTPUT_TOKENS},
            "response": {
                "prompt_token_ids": [m(t) for t in ids],
                "choices": [{"text": text, "token_ids": [m(t) for t in out]}],
            },
            "cls": "code" if i < CODE else "prose",
        }
        lines.append(json.dumps(rec))
    path.write_text("\n".join(lines) + "\n")
    return path


def code_class(s: Synthetic) -> list[str]:
    """``alphagate train-head`` on the code class of the synthetic log, with its target (the
    caller adds ``--out`` and what it tests)."""
    return ["train-head", "--log", str(s.log), "--class-field", "cls", "--class", "code",
            "--target", str(s.target)]  # fmt: skip


def build(root: Path) -> Synthetic:
    import torch

    torch.set_num_threads(1)  # a 32-wide model on a shared machine: one thread is fastest
    tdir = root / "target"
    tok = tokenizer(tdir)
    target(tdir, len(tok))  # type: ignore[arg-type]
    return Synthetic(tdir, write_log(root / "log.jsonl", tdir, tok))
