"""The n-gram replay equals vLLM's proposer (a line-by-line port, the oracle) at every context."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import alphagate.measure.offline.ngram as ng
from alphagate.measure.offline.ngram import TokenBatch, ngram_drafts, propose_one
from tests.measure.offline.vllm_ngram_port import (
    vllm_find_longest_matched_ngram_and_propose_tokens as vllm,
)


def _batch(seqs: list[list[int]], first: list[int]) -> TokenBatch:
    length = np.asarray([len(s) for s in seqs], dtype=np.int64)
    start = np.concatenate([[0], np.cumsum(length)[:-1]]).astype(np.int64)
    fc = np.asarray(first, dtype=np.int64)
    return TokenBatch(
        np.concatenate([np.asarray(s, dtype=np.int64) for s in seqs]),
        start,
        length,
        fc,
        length - fc,
    )


def _check(seqs: list[list[int]], first: list[int], lo: int, hi: int, k: int) -> None:
    b = _batch(seqs, first)
    d = ngram_drafts(b, lo, hi, k)
    for q, (r, t) in enumerate(zip(*b.queries(), strict=True)):
        ctx = np.asarray(seqs[r][:t], dtype=np.int64)
        want = vllm(ctx, lo, hi, 10**9, k)
        assert d.tokens[q, : d.length[q]].tolist() == want.tolist(), (seqs[r][:t], lo, hi, k)
        assert (d.tokens[q, d.length[q] :] == -1).all()
        assert propose_one(ctx, lo, hi, k).tolist() == want.tolist()


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.lists(st.integers(0, 3), min_size=1, max_size=40), min_size=1, max_size=4),
    st.integers(1, 3),
    st.integers(0, 3),
    st.integers(1, 5),
    st.data(),
)
def test_every_context_equals_vllm(
    seqs: list[list[int]], lo: int, extra: int, k: int, data: st.DataObject
) -> None:
    first = [data.draw(st.integers(1, len(s))) for s in seqs]
    _check(seqs, first, lo, lo + extra, k)


def test_hand_worked_case() -> None:
    # context "a b c a b": the suffix bigram "a b" recurs at 0, so the proposal is "c a b"[:K]
    # (tokens after it, up to the end of the context) — vLLM's docstring example shape
    b = _batch([[1, 2, 3, 1, 2, 9, 9]], [5])
    d = ngram_drafts(b, 2, 3, 4)
    assert d.tokens[0, : d.length[0]].tolist() == [3, 1, 2]


def test_hash_collisions_fall_back_to_the_exact_search(monkeypatch: pytest.MonkeyPatch) -> None:
    # keys that collide all the time (only the last token, any request): every chosen
    # occurrence must still be verified, and another request's n-gram refused
    monkeypatch.setattr(ng, "_P", np.uint64(0))
    monkeypatch.setattr(ng, "_GOLDEN", np.uint64(0))
    rng = np.random.default_rng(0)
    seqs = [rng.integers(0, 4, 60).tolist() for _ in range(3)]
    _check(seqs, [5, 10, 30], 2, 4, 3)
