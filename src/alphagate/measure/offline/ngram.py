"""vLLM's n-gram (prompt-lookup) proposer, replayed at every context length of many requests at
once, in numpy.

vLLM V1 (``vllm/v1/spec_decode/ngram_proposer.py``, ``_find_longest_matched_ngram_and_propose_tokens``)
proposes for a context ``c[0:T]`` (the prompt and every output token so far):

- the longest ``n`` in ``[prompt_lookup_min, prompt_lookup_max]`` whose suffix n-gram ``c[T−n:T]``
  also occurs earlier — an occurrence that ends before the last token; occurrences may overlap;
- of that n-gram's occurrences, the earliest one, at ``s``;
- the tokens that follow it, ``c[s+n : s+n+k]`` with ``k = min(K, T − (s+n))``: fewer than K
  near the end of the context;
- nothing when ``T < prompt_lookup_min`` or when no n-gram in the range recurs.

(vLLM finds this with a KMP pass over the reversed context; the test suite checks this module
against a line-by-line port of that function.) Here every context length of every request is
answered at once: each n-gram gets a 64-bit key (a rolling polynomial seeded by its request),
the earliest position of each key comes from a scatter-min into a hash table, the rare positions whose
bucket holds two keys are resolved by sorting only those, and every chosen occurrence is verified
token by token — a 64-bit collision falls back to the direct search, so the result is exact.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from alphagate.measure.offline.walk import WalkCounts, greedy_run, walk_greedy

__all__ = ["Drafts", "TokenBatch", "ngram_drafts", "propose_one", "replay_ngram"]

IntArray = npt.NDArray[np.int64]
_U64 = npt.NDArray[np.uint64]

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing: bucket = top bits of key · φ⁻¹·2⁶⁴
#: the rolling key's multiplier (odd, > 2^33: two n-grams of tokens < 2^32 differing in one
#: token never collide)
_P = np.uint64(0xD6E8FEB86659FD93)
#: tokens per table build: keeps the hash table in cache (≈ 2 MB)
_CHUNK_TOKENS = 1 << 16


@dataclass(frozen=True)
class TokenBatch:
    """Requests as one flat token array: request r is ``tokens[start[r] : start[r] + length[r]]``
    (prompt, output, then the target's continuation past the output, which verification of the
    last step needs). The contexts to propose for are ``T = first_context[r] … + num_contexts[r] − 1``
    (local lengths), in that order, request after request."""

    tokens: IntArray  # [N]
    start: IntArray  # [R]
    length: IntArray  # [R]
    first_context: IntArray  # [R]
    num_contexts: IntArray  # [R]

    def __post_init__(self) -> None:
        last = self.first_context + self.num_contexts
        if np.any(self.num_contexts < 0) or np.any((self.num_contexts > 0) & (last > self.length)):
            raise ValueError("a context runs past the end of its request")

    @property
    def num_requests(self) -> int:
        return int(self.start.size)

    def queries(self) -> tuple[IntArray, IntArray]:
        """Every context as (request index, context length T), shape ``[Q]`` each."""
        req = np.repeat(np.arange(self.num_requests, dtype=np.int64), self.num_contexts)
        first = np.cumsum(self.num_contexts) - self.num_contexts
        t = np.arange(req.size, dtype=np.int64) - np.repeat(first, self.num_contexts)
        return req, t + np.repeat(self.first_context, self.num_contexts)


@dataclass(frozen=True)
class Drafts:
    """What a drafter proposes at each context: ``tokens[q, i]`` is draft token i + 1 at context q
    (−1 past ``length[q]``), in the order of :meth:`TokenBatch.queries`."""

    tokens: IntArray  # [Q, k_max]
    length: IntArray  # [Q]


def _first_occurrence(keys: _U64, idx: IntArray) -> IntArray:
    """For each position, the smallest position holding the same key, shape ``[N]``
    (``idx`` is ``arange(N)``)."""
    n = keys.size
    bits = max(4, int(2 * n - 1).bit_length() + 3)  # ≥ 8 slots per key: few shared buckets
    bucket = ((keys * _GOLDEN) >> np.uint64(64 - bits)).astype(np.intp)
    table = np.full(1 << bits, n, dtype=np.int64)
    np.minimum.at(table, bucket, idx)
    first = table[bucket]
    bad = keys[first] != keys  # the bucket's earliest position holds another key
    if bad.any():
        shared = np.zeros(1 << bits, dtype=bool)
        shared[bucket[bad]] = True
        sub = np.flatnonzero(shared[bucket])
        order = sub[np.argsort(keys[sub], kind="stable")]  # by key, then by position
        k = keys[order]
        new = np.ones(k.size, dtype=bool)
        new[1:] = k[1:] != k[:-1]
        first[order] = order[new][np.cumsum(new) - 1]
    return np.asarray(first, dtype=np.int64)


def propose_one(context: IntArray, min_n: int, max_n: int, k: int) -> IntArray:
    """The proposal for one context, by direct search (the fallback, and readable)."""
    begin = _direct_begin(context, min_n, max_n)
    if begin < 0:
        return np.zeros(0, dtype=np.int64)
    return np.asarray(context[begin : begin + min(k, context.size - begin)], dtype=np.int64)


def _chunk_drafts(
    b: TokenBatch, reqs: IntArray, min_n: int, max_n: int, k_max: int
) -> tuple[IntArray, IntArray]:
    """Proposal start (global index) and length for every context of requests ``reqs``."""
    lo, hi = int(b.start[reqs[0]]), int(b.start[reqs[-1]] + b.length[reqs[-1]])
    tok = b.tokens[lo:hi]
    n_tok = tok.size
    lengths = b.length[reqs]
    idx = np.arange(n_tok, dtype=np.int64)
    starts = b.start[reqs] - lo
    left = np.repeat(starts + lengths, lengths) - idx  # tokens from here to the request's end
    sub = TokenBatch(tok, starts, lengths, b.first_context[reqs], b.num_contexts[reqs])
    q_req, q_t = sub.queries()
    base = sub.start[q_req]
    chosen_n = np.zeros(q_req.size, dtype=np.int64)
    chosen_s = np.zeros(q_req.size, dtype=np.int64)  # where the chosen occurrence starts
    # the key of the n-gram at each position: a rolling polynomial over its tokens, seeded by its
    # request (n-grams of two requests never match)
    key = (np.repeat(np.arange(1, reqs.size + 1, dtype=np.uint64), lengths)) * _GOLDEN
    padded = np.concatenate([tok, np.zeros(max_n, dtype=np.int64)]).astype(np.uint64)
    unique = ~idx.astype(np.uint64)  # keys no n-gram has: for n-grams past their request's end
    firsts: dict[int, IntArray] = {}
    for n in range(1, max_n + 1):
        key *= _P
        key += padded[n - 1 : n - 1 + n_tok] + np.uint64(1)
        if n >= min_n:
            firsts[n] = _first_occurrence(np.where(left >= n, key, unique), idx)
    for n in range(max_n, min_n - 1, -1):
        x = q_t - n
        gx = base + np.maximum(x, 0)
        f = firsts[n][gx]
        hit = (chosen_n == 0) & (x >= 0) & (f < gx)
        chosen_n[hit] = n
        chosen_s[hit] = f[hit]
    # verify every chosen occurrence token by token: a key collision is not a match
    has = chosen_n > 0
    begin = chosen_s + chosen_n
    found = np.flatnonzero(has)
    nn = chosen_n[found]
    wrong = chosen_s[found] < base[found]  # another request's n-gram
    for i in range(max_n):
        m = i < nn
        a = tok[np.where(m, chosen_s[found] + i, 0)]
        c = tok[np.where(m, base[found] + q_t[found] - nn + i, 0)]
        wrong |= m & (a != c)
    for j in found[wrong]:
        direct = _direct_begin(tok[base[j] : base[j] + q_t[j]], min_n, max_n)
        has[j] = direct >= 0
        begin[j] = base[j] + direct
    length = np.where(has, np.minimum(k_max, base + q_t - begin), 0)
    return np.where(has, begin, 0) + lo, length


def _direct_begin(context: IntArray, min_n: int, max_n: int) -> int:
    """Index of the first proposed token for ``context`` (direct search); −1 when none."""
    t = context.size
    for n in range(min(max_n, t - 1), min_n - 1, -1):
        windows = np.lib.stride_tricks.sliding_window_view(context[: t - 1], n)
        hits = np.flatnonzero((windows == context[t - n :]).all(axis=1))
        if hits.size:
            return int(hits[0]) + n
    return -1


def ngram_drafts(batch: TokenBatch, min_n: int, max_n: int, k_max: int) -> Drafts:
    """vLLM's n-gram proposal (up to ``k_max`` tokens) at every context of ``batch``."""
    if not 1 <= min_n <= max_n:
        raise ValueError(f"need 1 ≤ prompt_lookup_min ≤ prompt_lookup_max, got {min_n}, {max_n}")
    if k_max < 1:
        raise ValueError("k_max must be at least 1")
    q_total = int(batch.num_contexts.sum())
    out = np.full((q_total, k_max), -1, dtype=np.int64)
    lengths = np.zeros(q_total, dtype=np.int64)
    # group whole requests into chunks of about _CHUNK_TOKENS tokens
    r_total = batch.num_requests
    cum = np.cumsum(batch.length)
    q_cum = np.concatenate([[0], np.cumsum(batch.num_contexts)])
    r0 = 0
    while r0 < r_total:
        limit = (cum[r0 - 1] if r0 else 0) + _CHUNK_TOKENS
        r1 = max(r0 + 1, int(np.searchsorted(cum, limit, side="right")))
        reqs = np.arange(r0, r1, dtype=np.int64)
        if q_cum[r1] > q_cum[r0]:
            begin, length = _chunk_drafts(batch, reqs, min_n, max_n, k_max)
            rows = slice(int(q_cum[r0]), int(q_cum[r1]))
            lengths[rows] = length
            idx = begin[:, None] + np.arange(k_max)[None, :]
            ok = np.arange(k_max)[None, :] < length[:, None]
            out[rows] = np.where(ok, batch.tokens[np.where(ok, idx, 0)], -1)
        r0 = r1
    return Drafts(out, lengths)


def replay_ngram(batch: TokenBatch, min_n: int, max_n: int, k_max: int) -> WalkCounts:
    """Greedy n-gram replay of whole requests: the proposal at every context, matched against
    the tokens that follow it, walked for every K ≤ k_max. ``batch`` holds each request's
    prompt, output and at least k_max − 1 tokens past the output; its contexts are the engine
    steps' possible starts (``first_context`` = prompt + 1)."""
    d = ngram_drafts(batch, min_n, max_n, k_max)
    q_req, q_t = batch.queries()
    ahead = batch.start[q_req][:, None] + q_t[:, None] + np.arange(k_max)[None, :]
    run = greedy_run(d.tokens, d.length, batch.tokens[ahead])
    return walk_greedy(run, d.length, batch.num_contexts, k_max)
