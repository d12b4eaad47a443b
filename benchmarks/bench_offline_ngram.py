"""n-gram replay for ``measure offline``: vLLM's prompt-lookup proposer at every context of every
request, the acceptance run of each proposal and the engine's walk for every K — numpy, one
core — against vLLM's own proposer (a line-by-line port, one call per engine step, the way the
engine runs it) on the same requests, in the same process.

Wall time and CPU time are both printed: on a shared machine the CPU time is the one-core
figure. Workload: 2,000 requests of a 512-token prompt and a 256-token output over a 32,000-token
vocabulary (Zipf-distributed), the output copying spans of the prompt half the time — the
traffic n-gram drafting is for. Tokens per second count every token replayed (prompt and
output); output tokens per second are printed beside them.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one core
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' port of vLLM's proposer

import numpy as np

from alphagate.measure.offline.ngram import TokenBatch, replay_ngram

PROMPT, OUTPUT, REQUESTS, VOCAB, K = 512, 256, 2000, 32_000, 4


def workload(rng: np.random.Generator) -> TokenBatch:
    seqs = []
    for _ in range(REQUESTS):
        prompt = np.minimum(rng.zipf(1.3, PROMPT), VOCAB) - 1
        out: list[int] = []
        while len(out) < OUTPUT + K:
            if rng.random() < 0.5:  # copy a span of the prompt
                s = int(rng.integers(0, PROMPT - 16))
                out += prompt[s : s + int(rng.integers(4, 16))].tolist()
            else:
                out += (np.minimum(rng.zipf(1.3, int(rng.integers(2, 8))), VOCAB) - 1).tolist()
        seqs.append(np.concatenate([prompt, out[: OUTPUT + K - 1]]))
    length = np.asarray([s.size for s in seqs], dtype=np.int64)
    start = np.concatenate([[0], np.cumsum(length)[:-1]]).astype(np.int64)
    first = np.full(REQUESTS, PROMPT + 1, dtype=np.int64)
    return TokenBatch(
        np.concatenate(seqs).astype(np.int64), start, length, first, np.full(REQUESTS, OUTPUT - 1)
    )


def reference(b: TokenBatch, n_req: int) -> tuple[int, int]:
    """vLLM's proposer, one call per engine step (K = 4): (drafts, accepted) for n_req requests."""
    from tests.measure.offline.vllm_ngram_port import (
        vllm_find_longest_matched_ngram_and_propose_tokens as propose,
    )

    drafts = accepted = 0
    for r in range(n_req):
        seq = b.tokens[b.start[r] : b.start[r] + b.length[r]]
        t = PROMPT + 1
        while t < PROMPT + OUTPUT:
            d = propose(seq[:t], 2, 5, 10**9, K)
            a = 0
            while a < d.size and d[a] == seq[t + a]:
                a += 1
            drafts += d.size > 0
            accepted += a
            t += a + 1
    return drafts, accepted


def main() -> None:
    b = workload(np.random.default_rng(0))
    tokens = REQUESTS * (PROMPT + OUTPUT)
    best = cpu = float("inf")
    for _ in range(3):
        t0, c0 = time.perf_counter(), time.process_time()
        w = replay_ngram(b, 2, 5, K)
        best = min(best, time.perf_counter() - t0)
        cpu = min(cpu, time.process_time() - c0)
    n_ref = 40
    t0 = time.perf_counter()
    d_ref, a_ref = reference(b, n_ref)
    t_ref = (time.perf_counter() - t0) * REQUESTS / n_ref
    assert (d_ref, a_ref) == (w.drafts[:n_ref, K - 1].sum(), w.accepted[:n_ref, K - 1].sum())
    k_only = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        replay_ngram(b, 2, 5, 1)
        k_only = min(k_only, time.perf_counter() - t0)
    rho = w.accepted[:, K - 1].sum() / w.draft_tokens[:, K - 1].sum()
    print(
        f"{REQUESTS:,} requests × ({PROMPT} + {OUTPUT}) tokens, prompt_lookup 2..5, ρ = {rho:.3f} at K = {K}"
    )
    print(
        f"replay, every K = 1..{K}: {tokens / best / 1e6:6.2f} M tokens/s wall, "
        f"{tokens / cpu / 1e6:.2f} M per CPU-second "
        f"({REQUESTS * OUTPUT / best / 1e6:.2f} M output tokens/s wall)"
    )
    print(f"replay, K = 1 only:     {tokens / k_only / 1e6:6.2f} M tokens/s")
    print(f"vLLM's proposer per step (reference): {tokens / t_ref / 1e6:6.3f} M tokens/s")
    print(f"ratio replay / reference: {t_ref / best:.0f}×")  # fmt: skip


if __name__ == "__main__":
    main()
