"""Suffix-decoding replay for ``measure offline --drafter suffix``, against the n-gram replay in
the same process.

1. The replays alone (no model): 400 requests of a 512-token prompt and a 256-token output over a
   32,000-token vocabulary (Zipf-distributed), the output copying spans of its prompt or of an
   earlier request's output half the time — agentic traffic that repeats itself. The suffix
   replay serves them through arctic-inference's cache one engine step at a time (vLLM's
   defaults: trees of depth 24, drafts of up to 24 tokens) and walks them; the n-gram replay
   proposes at every context (prompt lookup 2..5) and walks every K ≤ 4 — its figure is the
   reference. Tokens per second count every token replayed (prompt and output).
2. What a user runs: ``measure offline`` over one log of the tiny test target's own greedy
   outputs (built here, as the tests build them), ``--drafter suffix`` against
   ``--drafter ngram``. Both run the same teacher-forced target pass; the suffix replay also has
   the target continue each output by K = 24 tokens, one decode step each (vLLM caches the last
   step's accepted tokens past the end of the output), where n-gram at K = 4 needs 3: on the
   tiny CPU target those steps are most of the difference.
3. The host cost of suffix decoding per sequence per step (``SuffixDrafter.cpu_cost_ms``): one
   ``speculate`` on the prompt's tree and the responses' tree, as vLLM's proposer calls it.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one core
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' tiny models

import numpy as np

from alphagate.measure.offline.ngram import TokenBatch, replay_ngram

PROMPT, OUTPUT, REQUESTS, VOCAB = 512, 256, 400, 32_000
K_NGRAM, K_SUFFIX = 4, 24


def _zipf(rng: np.random.Generator, n: int) -> np.ndarray:
    return np.minimum(rng.zipf(1.3, n), VOCAB) - 1


def workload(rng: np.random.Generator) -> list[np.ndarray]:
    """Each request: prompt, output, and K_SUFFIX tokens past it (the target's continuation)."""
    seqs: list[np.ndarray] = []
    for _ in range(REQUESTS):
        prompt = _zipf(rng, PROMPT)
        out: list[int] = []
        while len(out) < OUTPUT + K_SUFFIX:
            u = rng.random()
            if u < 0.3:  # copy a span of the prompt
                s = int(rng.integers(0, PROMPT - 16))
                out += prompt[s : s + int(rng.integers(4, 16))].tolist()
            elif u < 0.5 and seqs:  # copy a span of an earlier request's output
                src = seqs[int(rng.integers(0, len(seqs)))][PROMPT:]
                s = int(rng.integers(0, OUTPUT - 32))
                out += src[s : s + int(rng.integers(8, 32))].tolist()
            else:
                out += _zipf(rng, int(rng.integers(2, 8))).tolist()
        seqs.append(np.concatenate([prompt, out[: OUTPUT + K_SUFFIX]]).astype(np.int64))
    return seqs


def ngram_batch(seqs: list[np.ndarray]) -> TokenBatch:
    cut = [s[: PROMPT + OUTPUT + K_NGRAM - 1] for s in seqs]
    length = np.asarray([s.size for s in cut], dtype=np.int64)
    start = np.concatenate([[0], np.cumsum(length)[:-1]]).astype(np.int64)
    return TokenBatch(
        np.concatenate(cut), start, length, np.full(len(cut), PROMPT + 1),
        np.full(len(cut), OUTPUT - 1),
    )  # fmt: skip


def suffix_replay(seqs: list[np.ndarray]) -> tuple[int, int, int]:
    """(drafts, draft tokens, accepted) over every request, through one server's cache."""
    from alphagate.measure.offline.suffix import SuffixReplay
    from alphagate.specs.deployment import SuffixParams

    replay = SuffixReplay(SuffixParams(), k=K_SUFFIX, max_model_len=1 << 20)
    drafts = tokens = accepted = 0
    for i, s in enumerate(seqs):
        w = replay.walk(f"r{i}", s, PROMPT, OUTPUT)
        sizes = np.asarray([d.size for d in w.drafts])
        drafts += int((sizes > 0).sum())
        tokens += int(sizes.sum())
        accepted += int(w.accepted.sum())
    return drafts, tokens, accepted


def replays() -> float:
    seqs = workload(np.random.default_rng(0))
    tokens = REQUESTS * (PROMPT + OUTPUT)
    b = ngram_batch(seqs)
    ngram = suffix = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        w = replay_ngram(b, 2, 5, K_NGRAM)
        ngram = min(ngram, time.perf_counter() - t0)
        t0 = time.perf_counter()
        d, dt, a = suffix_replay(seqs)
        suffix = min(suffix, time.perf_counter() - t0)
    rho_n = w.accepted[:, -1].sum() / w.draft_tokens[:, -1].sum()
    print(
        f"{REQUESTS} requests × ({PROMPT} + {OUTPUT}) tokens, agentic (copies prompt and past outputs)"
    )
    print(f"n-gram replay, prompt lookup 2..5, every K ≤ {K_NGRAM}: {tokens / ngram / 1e6:6.3f} M tokens/s (reference; ρ {rho_n:.3f} at K {K_NGRAM})")  # fmt: skip
    print(f"suffix replay, vLLM's defaults (K ≤ {K_SUFFIX}):        {tokens / suffix / 1e6:6.3f} M tokens/s (ρ {a / dt:.3f}, τ {1 + a / d:.2f})")  # fmt: skip
    print(f"ratio suffix / n-gram replay: {ngram / suffix:.3f}×")
    return suffix / (REQUESTS * OUTPUT)


def end_to_end() -> None:
    from tests.measure.offline.fixtures import build, greedy_log

    from alphagate.measure.offline.config import OfflineConfig
    from alphagate.measure.offline.run import measure_offline

    root = Path(tempfile.mkdtemp())
    tiny = build(root)
    prompts = ["def wrap(text, width=70, **kwargs):\n    ", "((((((((", "The quick brown fox"] * 4
    log = root / "log.jsonl"
    greedy_log(tiny, log, prompts, 96, ["x"] * len(prompts))
    took = {}
    for name, fields in (
        ("ngram", {"drafter": "ngram", "k": 4}),
        ("suffix", {"drafter": "suffix"}),
    ):
        cfg = OfflineConfig(logs=(log,), target=str(tiny.target), threads=1, **fields)  # type: ignore[arg-type]
        best = float("inf")
        for _ in range(2):
            t0 = time.perf_counter()
            r = measure_offline(cfg)
            best = min(best, time.perf_counter() - t0)
        took[name] = best
        assert r.offline is not None
        tok = r.offline.prompt_tokens + r.offline.output_tokens
        print(
            f"measure offline --drafter {name:6s} (tiny target, {len(prompts)} requests): {tok / best:8.0f} tokens/s"
        )
    print(f"ratio suffix / n-gram, end to end: {took['ngram'] / took['suffix']:.3f}×")


def main() -> None:
    per_step = replays()
    print(
        f"suffix decoding's host time per sequence per engine step (speculate + append): {per_step * 1e6:.1f} µs"
    )
    end_to_end()


if __name__ == "__main__":
    main()
