"""The drafters of ``alphagate measure offline``: one proposer per method behind one protocol, as
vLLM has one per method (``vllm/v1/spec_decode/``: ``ngram_proposer.py``, ``draft_model.py``,
``eagle.py``). Each proposes, at every context length T of one request, the drafts the engine's
step would verify there, and — when drafts are sampled — the drafter's probability of the token
that came out:

- :class:`NgramProposer`: vLLM's prompt lookup, exactly (:mod:`alphagate.measure.offline.ngram`);
- :class:`DraftModelProposer`: one teacher-forced pass of the draft LM — draft token i at context
  T is its argmax at position T + i − 1;
- :class:`Eagle3Proposer`: an EAGLE-3 head's chains (:mod:`alphagate.measure.offline.eagle3`),
  each unrolled only as long as a greedy walk can still accept it; and, when asked, SGLang's
  draft trees (:mod:`alphagate.measure.offline.tree`), with each tree's accepted length;
- :class:`SuffixProposer`: suffix decoding through arctic-inference's own cache
  (:mod:`alphagate.measure.offline.suffix`), whose drafts depend on every earlier request: it
  proposes only where the engine's steps start, for requests in log order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np
import numpy.typing as npt
import torch
from transformers import AutoTokenizer

from alphagate.measure.offline.eagle3 import Eagle3Head
from alphagate.measure.offline.models import (
    CausalLM,
    Sampling,
    gather,
    processed_probs,
    read_config,
    resolve,
)
from alphagate.measure.offline.ngram import Drafts, TokenBatch, ngram_drafts
from alphagate.measure.offline.suffix import SuffixReplay
from alphagate.measure.offline.tree import tree_runs
from alphagate.measure.results import MeasureError
from alphagate.specs.deployment import SuffixParams
from alphagate.specs.tree import TreeShape

__all__ = [
    "Context",
    "DraftModelProposer",
    "DrafterSpec",
    "Eagle3Proposer",
    "NgramProposer",
    "Proposal",
    "Proposer",
    "SuffixProposer",
    "load_proposer",
]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

#: positions whose logits are materialised at once (a [chunk, vocab] float32 block)
LOGIT_CHUNK = 256


@dataclass(frozen=True)
class DrafterSpec:
    """Which drafter, and where its weights are."""

    method: Literal["ngram", "draft_model", "eagle3", "suffix"]
    path: str | None = None
    prompt_lookup_min: int = 2
    prompt_lookup_max: int = 5
    suffix: SuffixParams = field(default_factory=SuffixParams)
    trees: tuple[TreeShape, ...] = ()  # SGLang draft trees (EAGLE-3)


@dataclass(frozen=True)
class Context:
    """One request's trajectory and the contexts drafts are proposed at."""

    seq: IntArray  # prompt + output + the target's continuation past it
    prompt_len: int
    contexts: IntArray  # [Q] context lengths T = P + 1 … P + n − 1
    want: IntArray  # [Q, k_max] the index in ``seq`` of the token each draft proposes
    k_max: int
    aux: torch.Tensor | None  # the target's auxiliary hidden states (EAGLE-3), or None
    sampling: Sampling

    @property
    def truth(self) -> IntArray:
        """``[Q, k_max]`` the trajectory's token at each draft's place."""
        return self.seq[self.want]


@dataclass(frozen=True)
class Proposal:
    """The drafts at every context, and — sampled drafts — the drafter's probability of the
    trajectory's token at each (``[Q, k_max]``; zeros otherwise); with draft trees, each tree's
    accepted length at every context (``[trees, Q]``)."""

    drafts: Drafts
    q_y: FloatArray
    tree_run: IntArray | None = None


class Proposer(Protocol):
    """A drafter."""

    @property
    def aux_ids(self) -> tuple[int, ...]:
        """The target layers whose hidden states it reads (EAGLE-3); () for none."""

    def propose(self, c: Context) -> Proposal: ...


def _no_q(c: Context) -> FloatArray:
    return np.zeros((c.contexts.size, c.k_max))


@dataclass(frozen=True)
class NgramProposer:
    """vLLM's n-gram (prompt-lookup) proposer."""

    prompt_lookup_min: int
    prompt_lookup_max: int
    aux_ids: tuple[int, ...] = ()

    def propose(self, c: Context) -> Proposal:
        q = c.contexts.size
        one = np.asarray([0]), np.asarray([c.seq.size]), np.asarray([c.prompt_len + 1])
        drafts = ngram_drafts(
            TokenBatch(c.seq, *one, np.asarray([q])),
            self.prompt_lookup_min,
            self.prompt_lookup_max,
            c.k_max,
        )
        q_y = _no_q(c)
        if c.sampling.sampled_drafts:  # one-hot: accepted with min(p(y), 1{x = y}) / p(y)
            q_y = (drafts.tokens == c.truth).astype(np.float64)
        return Proposal(drafts, q_y)


@dataclass(frozen=True)
class DraftModelProposer:
    """A smaller LM of the same vocabulary, teacher-forced once over the trajectory."""

    draft: CausalLM
    aux_ids: tuple[int, ...] = ()

    def propose(self, c: Context) -> Proposal:
        p, k_max, s = c.prompt_len, c.k_max, c.sampling
        last = int(c.want.max())  # drafted positions: p … (want − 1)
        dh, _, _ = self.draft.hidden(c.seq[:last])
        argmax, probs = [], []
        for lo in range(p, dh.shape[0], LOGIT_CHUNK):
            lg = self.draft.logits(dh[lo : lo + LOGIT_CHUNK])
            argmax.append(lg.argmax(dim=-1).cpu().numpy())
            if s.sampled_drafts:
                nxt = c.seq[lo + 1 : lo + 1 + lg.shape[0]]
                probs.append(gather(processed_probs(lg, s), nxt))
        am = np.concatenate(argmax)
        drafts = Drafts(am[c.want - 1 - p], np.full(c.contexts.size, k_max, dtype=np.int64))
        q_y = np.concatenate(probs)[c.want - 1 - p] if s.sampled_drafts else _no_q(c)
        return Proposal(drafts, q_y)


@dataclass(frozen=True)
class Eagle3Proposer:
    """An EAGLE-3 head's chains; a greedy chain stops at its first mismatch. With ``trees``,
    SGLang's draft phase runs once per top-k (to the deepest tree of that top-k) and every tree
    of it is verified from that one expansion."""

    head: Eagle3Head
    trees: tuple[TreeShape, ...] = ()

    @property
    def aux_ids(self) -> tuple[int, ...]:
        return self.head.aux_ids

    def propose(self, c: Context) -> Proposal:
        assert c.aux is not None, "EAGLE-3 reads the target's auxiliary hidden states"
        q, s, truth = c.contexts.size, c.sampling, c.truth
        toks = np.full((q, c.k_max), -1, dtype=np.int64)  # −1: not unrolled (after a mismatch)
        q_y = _no_q(c)

        def take(j: int, rows: IntArray, normed: torch.Tensor) -> npt.NDArray[np.bool_]:
            lg = self.head.draft_logits(normed)
            toks[rows, j] = lg.argmax(dim=-1).cpu().numpy()
            if s.sampled_drafts:
                q_y[rows, j] = gather(processed_probs(lg, s), truth[rows, j])
                return np.ones(rows.size, dtype=bool)
            return np.asarray(toks[rows, j] == truth[rows, j])  # none after a mismatch

        self.head.drafts(c.aux, c.seq, c.contexts, c.k_max, take)
        drafts = Drafts(toks, np.full(q, c.k_max, dtype=np.int64))
        return Proposal(drafts, q_y, self._tree_runs(c) if self.trees else None)

    def _tree_runs(self, c: Context) -> IntArray:
        """``[trees, Q]`` each tree's accepted drafts at every context (greedy)."""
        assert c.aux is not None
        out = np.zeros((len(self.trees), c.contexts.size), dtype=np.int64)
        for topk in sorted({t.topk for t in self.trees}):
            idx = [i for i, t in enumerate(self.trees) if t.topk == topk]
            steps = max(self.trees[i].steps for i in idx)
            exp = self.head.tree_drafts(c.aux, c.seq, c.contexts, topk, steps)
            out[idx] = tree_runs(exp, [self.trees[i] for i in idx], c.truth)
        return out


@dataclass
class SuffixProposer:
    """vLLM's suffix decoding on one server's cache, fed the requests in the order they are
    proposed (the log's). The drafts are set where the engine's steps start with
    ``num_speculative_tokens`` = ``k_max`` (length 0 elsewhere): a walk at that K is exact, a walk
    at any other K is not this drafter's (its drafts depend on the cap)."""

    replay: SuffixReplay
    aux_ids: tuple[int, ...] = ()
    served: int = 0  # requests proposed so far: their ids in the cache

    def propose(self, c: Context) -> Proposal:
        q = c.contexts.size
        w = self.replay.walk(f"request-{self.served}", c.seq, c.prompt_len, q + 1)
        self.served += 1
        toks = np.full((q, c.k_max), -1, dtype=np.int64)
        length = np.zeros(q, dtype=np.int64)
        rows = w.starts - c.prompt_len - 1  # context T = P + 1 + row
        for row, d in zip(rows, w.drafts, strict=True):
            toks[row, : d.size] = d
            length[row] = d.size
        return Proposal(Drafts(toks, length), _no_q(c))


def _same_tokenizer(a: Any, b: Any) -> bool:
    return bool(a.get_vocab() == b.get_vocab())


def _draft_model(
    path: str, target: CausalLM, tokenizer: Any, device: str, dt: torch.dtype
) -> CausalLM:
    """The draft LM, refused when its vocabulary or tokenizer is not the target's."""
    what = "--drafter draft_model"
    vocab = read_config(path, what).get("vocab_size")
    if vocab != target.vocab_size:
        raise MeasureError(
            f"{what}: vocab_size {vocab} ≠ the target's {target.vocab_size} (config.json)"
        )
    draft = CausalLM(path, what, device, dt)
    if (Path(path) / "tokenizer.json").is_file() or (
        Path(path) / "tokenizer_config.json"
    ).is_file():
        own = AutoTokenizer.from_pretrained(path, local_files_only=True)
        if not _same_tokenizer(own, tokenizer):
            raise MeasureError(f"{what}: its tokenizer differs from the target's (vocabulary)")
    return draft


def load_proposer(
    spec: DrafterSpec,
    target: CausalLM,
    tokenizer: Any,
    device: str,
    dtype: torch.dtype,
    *,
    k_max: int = 1,
    max_model_len: int | None = None,
) -> Proposer:
    """The drafter ``spec`` names, loaded for ``target``; refused when it does not fit it
    (suffix decoding: its cap ``k_max`` and the server's context limit)."""
    if spec.method == "ngram":
        return NgramProposer(spec.prompt_lookup_min, spec.prompt_lookup_max)
    if spec.method == "suffix":
        limit = max_model_len or target.max_len
        return SuffixProposer(SuffixReplay(spec.suffix, k=k_max, max_model_len=limit))
    if spec.method == "draft_model":
        path = resolve(spec.path or "", "--drafter draft_model")
        return DraftModelProposer(_draft_model(path, target, tokenizer, device, dtype))
    path = resolve(spec.path or "", "--drafter eagle3")
    return Eagle3Proposer(Eagle3Head(path, target, device, dtype), spec.trees)
