"""One request replayed through the target and the drafter (``alphagate measure offline``).

Per request (:func:`score_request`) one teacher-forced target pass over prompt + output gives
the target's final hidden states (its logits, chunk by chunk), the auxiliary hidden states an
EAGLE-3 head reads, and a KV cache from which the target continues the output by ``k_max``
tokens (the last engine step verifies drafts past the end of the output, and vLLM counts them).
Then the drafter (:mod:`alphagate.measure.offline.proposers`) proposes at every context length.

The chain is fed the trajectory's tokens, which equal its own drafts for as long as they are
accepted — all a greedy walk looks at. Acceptance per (context, draft): greedy, whether the draft
equals the trajectory's token; sampling, the target's probability of the draft token after the
engine's temperature / top-k / top-p (vLLM's default ``draft_sample_method="greedy"`` treats the
draft as one-hot, ``vllm/v1/sample/rejection_sampler.py``), or Σ_x min(p(x), q(x)) when drafts
are sampled (Leviathan et al. 2023, Thm 3.5).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from transformers import AutoTokenizer
from transformers.utils import logging as hf_logging

from alphagate.measure.offline.models import (
    CausalLM,
    Sampling,
    gather,
    make_sampler,
    processed_probs,
    resolve,
    torch_dtype,
)
from alphagate.measure.offline.ngram import Drafts
from alphagate.measure.offline.proposers import (
    LOGIT_CHUNK,
    Context,
    DrafterSpec,
    Proposal,
    Proposer,
    SuffixProposer,
    load_proposer,
)
from alphagate.measure.offline.requests import LoggedRequest
from alphagate.measure.offline.walk import greedy_run
from alphagate.measure.results import MeasureError

__all__ = ["Encoded", "Models", "Scored", "encode", "load_models", "score_request"]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


@dataclass
class Models:
    """Everything loaded once for a run."""

    tokenizer: Any
    target: CausalLM
    drafter: DrafterSpec
    proposer: Proposer
    max_model_len: int


def load_models(
    target: str,
    drafter: DrafterSpec,
    *,
    tokenizer: str | None = None,
    device: str = "auto",
    dtype: str = "auto",
    max_model_len: int | None = None,
    threads: int | None = None,
    k_max: int = 1,
) -> Models:
    """Load the target, its tokenizer and the drafter (``k_max``: the most draft tokens a step
    verifies); refuse a drafter that does not fit."""
    if threads is not None:  # CPU threads for torch (small models on busy cores: 1 is fastest)
        torch.set_num_threads(threads)
    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]

    dev = ("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else device
    dt = torch_dtype(dtype, dev)
    tpath = resolve(target, "--target")
    tok_path = resolve(tokenizer, "--tokenizer") if tokenizer else tpath
    try:
        tok = AutoTokenizer.from_pretrained(tok_path, local_files_only=True)
    except (OSError, ValueError) as exc:
        raise MeasureError(
            f"--tokenizer: cannot load a tokenizer from {tok_path} ({exc})"
        ) from None
    tgt = CausalLM(tpath, "--target", dev, dt)
    if len(tok) > tgt.vocab_size:
        raise MeasureError(
            f"--target: the tokenizer has {len(tok)} tokens, the model's vocab_size is {tgt.vocab_size}"
        )
    limit = max_model_len or tgt.max_len
    proposer = load_proposer(drafter, tgt, tok, dev, dt, k_max=k_max, max_model_len=limit)
    return Models(tok, tgt, drafter, proposer, limit)


@dataclass(frozen=True)
class Encoded:
    """One request as token ids."""

    prompt: IntArray
    output: IntArray
    retokenized: bool  # the output ids came from re-tokenizing text, not from the log
    truncated: bool


def encode(r: LoggedRequest, tokenizer: Any, limit: int, k_max: int) -> Encoded | None:
    """Token ids as the server saw them: a chat request through the tokenizer's chat template
    with the generation prompt, tokenized without special tokens (vLLM's chat default); a
    completion with them (its default). The output is cut so the request and the ``k_max``
    continued tokens fit the context; None when the prompt alone does not."""
    if r.prompt_token_ids is not None:
        prompt = list(r.prompt_token_ids)
    elif r.messages is not None:
        text = tokenizer.apply_chat_template(
            list(r.messages), add_generation_prompt=True, tokenize=False
        )
        prompt = tokenizer(text, add_special_tokens=False)["input_ids"]
    else:
        prompt = tokenizer(r.prompt or "", add_special_tokens=True)["input_ids"]
    if r.output_token_ids is not None:
        out, retok = list(r.output_token_ids), False
    else:
        out, retok = tokenizer(r.output or "", add_special_tokens=False)["input_ids"], True
    room = limit - len(prompt) - k_max - 1
    if not prompt or room < 1:
        return None
    truncated = len(out) > room
    return Encoded(
        np.asarray(prompt, dtype=np.int64), np.asarray(out[:room], dtype=np.int64), retok, truncated
    )


@dataclass(frozen=True)
class Scored:
    """A scored request: its contexts' drafts and their acceptance."""

    num_contexts: int  # T = P + 1 … P + n − 1
    length: IntArray  # [Q] drafts proposed at each context
    run: IntArray | None  # [Q] leading drafts equal to the trajectory's tokens
    accept: FloatArray | None  # [Q, k_max] P(draft i accepted | the trajectory, earlier accepted)
    prompt_tokens: int
    output_tokens: int
    agree: int  # output positions where the target's argmax equals the logged token
    encoded: Encoded | None = None  # what was scored
    tree_run: IntArray | None = None  # [trees, Q] each draft tree's accepted drafts (greedy)


def _posterior(p_y: FloatArray, q_y: FloatArray) -> FloatArray:
    """P(a sampled draft was accepted | the token emitted was y) = min(p(y), q(y)) ÷ p(y): the
    draft x ~ q is kept with probability min(1, p(x)/q(x)), else the token is drawn from
    norm(max(0, p − q)) (Leviathan et al. 2023, Algorithm 1)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(p_y > 0, np.minimum(p_y, q_y) / np.where(p_y > 0, p_y, 1.0), 0.0)


def _target_pass(
    m: Models, s: Sampling, hid: torch.Tensor, seq: IntArray, p: int, n: int, want: IntArray | None
) -> tuple[int, FloatArray | None]:
    """The target's logits from position p − 1 on, chunk by chunk, each used twice: how many
    output tokens are its argmax (positions p − 1 … p + n − 2 predict the output), and — when
    ``want`` (``[Q, k_max]`` token indices) is given — its processed probability of each drafted
    token (position ``want − 1`` predicts it), computed once per position."""
    end = p + n - 1 if want is None else int(hid.shape[0])
    agree = 0
    p_y = None if want is None else np.zeros(want.shape)
    flat = None if want is None else (want - 1).ravel()
    for lo in range(p - 1, end, LOGIT_CHUNK):
        hi = min(lo + LOGIT_CHUNK, end)
        lg = m.target.logits(hid[lo:hi])
        top = min(hi, p + n - 1)
        if top > lo:
            am = lg[: top - lo].argmax(dim=-1).cpu().numpy()
            agree += int((am == seq[lo + 1 : top + 1]).sum())
        if want is None or p_y is None or flat is None:
            continue
        sel = np.flatnonzero((flat >= lo) & (flat < hi))
        if sel.size:
            first = int(flat[sel].min())  # the rows drafted tokens are read from
            probs = processed_probs(lg[first - lo :], s)
            rows = torch.as_tensor(flat[sel] - first, device=probs.device)
            p_y.flat[sel] = gather(probs[rows], seq[want].ravel()[sel])
    return agree, p_y


def score_request(
    m: Models,
    enc: Encoded,
    k_max: int,
    s: Sampling,
    seed: int,
    *,
    regenerate: bool = False,
) -> Scored:
    """Drafts and acceptance at every context of one request (see the module docstring).

    Acceptance is judged against the trajectory — the logged output (or the target's own, with
    ``regenerate``) and the target's continuation past it. Greedy drafts (temperature 0, or
    vLLM's default one-hot drafts when sampling): a draft is accepted exactly when it equals the
    trajectory's token, since a rejected one-hot draft is replaced by a token drawn from the
    target without it. Sampled drafts: the probability that the draft was accepted given the
    token that came out, :func:`_posterior`.
    """
    sampler = make_sampler(s, torch.Generator(device="cpu").manual_seed(seed))
    out = enc.output
    if regenerate:
        out = m.target.generate(enc.prompt, int(out.size), sampler, m.tokenizer.eos_token_id)
    p, n = int(enc.prompt.size), int(out.size)
    seq0 = np.concatenate([enc.prompt, out])
    # the last step verifies up to k_max − 1 tokens past the output: the target continues it
    # (one more for suffix decoding, whose cache keeps the last step's bonus token too)
    past = k_max if isinstance(m.proposer, SuffixProposer) else k_max - 1
    hid, aux, ext = m.target.hidden(seq0, aux_ids=m.proposer.aux_ids, extend=past, sampler=sampler)
    seq = np.concatenate([seq0, ext])
    q = max(n - 1, 0)
    contexts = np.arange(p + 1, p + 1 + q, dtype=np.int64)
    want = contexts[:, None] + np.arange(k_max)[None, :]  # the token index each draft proposes
    sampled = s.sampled_drafts
    # 1. the trajectory check — the target's own greedy choice at each output position — and,
    # for sampled drafts, the target's p(y) at every drafted token, from one logits pass
    agree, p_y = _target_pass(m, s, hid, seq, p, n, want if sampled else None)
    # 2. the drafts at every context
    if q == 0:
        proposal = Proposal(
            Drafts(np.zeros((0, k_max), np.int64), np.zeros(0, np.int64)), np.zeros((0, k_max))
        )
    else:
        proposal = m.proposer.propose(Context(seq, p, contexts, want, k_max, aux, s))
    drafts = proposal.drafts
    # 3. acceptance; the scheduler never schedules a draft past the context limit
    length = np.minimum(drafts.length, np.maximum(m.max_model_len - contexts - 1, 0))
    if not sampled:
        run = greedy_run(drafts.tokens, length, seq[want])
        trees = proposal.tree_run
        if trees is not None:
            trees = np.minimum(trees, length[None, :])
        return Scored(q, length, run, None, p, n, agree, enc, trees)
    assert p_y is not None
    accept = _posterior(p_y, proposal.q_y)
    accept = np.where(np.arange(k_max)[None, :] < length[:, None], accept, 0.0)
    return Scored(q, length, None, accept, p, n, agree, enc)
