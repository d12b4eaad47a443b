"""The chain walk: vLLM's counters for every K, against a step-by-step loop and hand-worked cases."""

from __future__ import annotations

import numpy as np

from alphagate import theory
from alphagate.measure.offline.walk import WalkCounts, greedy_run, walk_expected, walk_greedy


def _loop(run: np.ndarray, length: np.ndarray, nc: np.ndarray, k: int) -> list[tuple[int, ...]]:
    """The engine, one step at a time."""
    out, q0 = [], 0
    for m in nc:
        d = dt = a_sum = 0
        t = 0
        while t < m:
            kk = min(int(length[q0 + t]), k)
            a = min(int(run[q0 + t]), kk)
            if kk:
                d, dt, a_sum = d + 1, dt + kk, a_sum + a
            t += a + 1
        out.append((d, dt, a_sum))
        q0 += int(m)
    return out


def test_hand_worked_request() -> None:
    # 6 contexts; K = 3: step at 0 accepts 2 (→ 3), step at 3 accepts 0 (→ 4), at 4 accepts 3
    # (→ 8, past the end): 3 drafts, 9 draft tokens, 5 accepted; positions 3/2/1… as below
    run = np.asarray([2, 3, 3, 0, 3, 1])
    length = np.full(6, 3)
    w = walk_greedy(run, length, np.asarray([6]), 3)
    assert w.drafts[0, 2] == 3 and w.draft_tokens[0, 2] == 9 and w.accepted[0, 2] == 5
    assert w.accepted_per_pos[0, 2].tolist() == [2, 2, 1]
    assert w.histogram[0, 2].tolist() == [1, 0, 1, 1]


def test_every_k_equals_the_step_loop() -> None:
    rng = np.random.default_rng(0)
    for _ in range(50):
        nc = rng.integers(0, 30, rng.integers(1, 6))
        k_max = int(rng.integers(1, 6))
        length = rng.integers(0, k_max + 1, nc.sum())
        run = np.minimum(rng.integers(0, k_max + 1, nc.sum()), length)
        w = walk_greedy(run, length, nc, k_max)
        for k in range(1, k_max + 1):
            got = list(
                zip(w.drafts[:, k - 1], w.draft_tokens[:, k - 1], w.accepted[:, k - 1], strict=True)
            )
            assert got == _loop(run, length, nc, k)
        # the histogram and per-position counts describe the same steps
        assert np.allclose(w.histogram.sum(axis=2), w.drafts)
        assert np.allclose(w.accepted_per_pos.sum(axis=2), w.accepted)
        # an expected walk with certain outcomes is the greedy walk
        acc = (np.arange(k_max)[None, :] < run[:, None]).astype(float)
        e = walk_expected(acc, length, nc, k_max)
        for f in WalkCounts.__dataclass_fields__:
            assert np.allclose(getattr(e, f), getattr(w, f)), f


def test_expected_walk_matches_the_closed_form_per_step() -> None:
    # i.i.d. acceptance α at every draft: τ per step is E(α, K) (Leviathan et al. 2023, Eq. 1)
    alpha, k, n = 0.6, 4, 4000
    acc = np.full((n, k), alpha)
    e = walk_expected(acc, np.full(n, k), np.asarray([n]), k)
    tau = 1.0 + e.accepted[0, k - 1] / e.drafts[0, k - 1]
    assert abs(tau - float(theory.expected_tokens_per_pass(alpha, k))) < 1e-9


def test_greedy_run_counts_leading_matches_within_the_draft_length() -> None:
    drafts = np.asarray([[5, 6, 7], [5, 0, 7], [5, 6, 7]])
    target = np.asarray([[5, 6, 7], [5, 6, 7], [5, 6, 7]])
    assert greedy_run(drafts, np.asarray([3, 3, 2]), target).tolist() == [3, 1, 2]


def test_concat_and_take_merge_shards() -> None:
    rng = np.random.default_rng(1)
    nc = rng.integers(1, 20, 6)
    run = rng.integers(0, 3, nc.sum())
    length = np.full(nc.sum(), 2)
    whole = walk_greedy(run, length, nc, 2)
    cut = int(nc[:3].sum())
    parts = WalkCounts.concat(
        [
            walk_greedy(run[:cut], length[:cut], nc[:3], 2),
            walk_greedy(run[cut:], length[cut:], nc[3:], 2),
        ]
    )
    for f in WalkCounts.__dataclass_fields__:
        assert np.array_equal(getattr(parts, f), getattr(whole, f))
    assert np.array_equal(whole.take(np.asarray([4])).drafts, whole.drafts[4:5])
