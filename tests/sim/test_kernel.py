"""The step kernel: acceptance from one uniform, vLLM's counters, prefill allocation."""

from __future__ import annotations

import numpy as np
import pytest

from alphagate.sim.kernel import (
    acceptance_histogram,
    accepted_drafts,
    accepted_per_position,
    decode_budget,
    prefill_allocation,
    prefill_chunks,
)


def test_accepted_drafts_counts_thresholds_above_the_uniform() -> None:
    thr = np.array([[0.9, 0.6, 0.3], [0.5, 0.25, 0.1]])  # P(a ≥ j) per class
    u = np.array([0.95, 0.7, 0.4, 0.2, 0.95, 0.3, 0.2, 0.05])
    cls = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    np.testing.assert_array_equal(accepted_drafts(u, thr, cls), [0, 1, 2, 3, 0, 1, 2, 3])


def test_vllm_counters_from_a_histogram() -> None:
    a = np.array([0, 3, 1, 1, 2, 0, 3])
    hist = acceptance_histogram(a, 3)
    np.testing.assert_array_equal(hist, [2, 2, 1, 2])
    # position i counts the steps that accepted more than i drafts (unconditional, vLLM semantics)
    np.testing.assert_array_equal(accepted_per_position(hist), [5, 3, 2])
    assert accepted_per_position(hist).sum() == a.sum()


def test_prefill_is_first_come_first_served() -> None:
    np.testing.assert_array_equal(prefill_allocation(np.array([300, 500, 200]), 600), [300, 300, 0])
    np.testing.assert_array_equal(prefill_allocation(np.array([100, 50]), 1000), [100, 50])
    assert decode_budget(8192, 100, 3) == 8192 - 400
    assert decode_budget(100, 100, 3) == 0


def test_prefill_chunks_cover_every_prompt_once() -> None:
    req, chunk, ctx, tok = prefill_chunks(np.array([5, 12, 4]), 4)
    np.testing.assert_array_equal(chunk, [0, 1, 0, 1, 2, 0])
    np.testing.assert_array_equal(req, [0, 0, 1, 1, 1, 2])
    np.testing.assert_array_equal(tok, [4, 1, 4, 4, 4, 4])
    np.testing.assert_array_equal(ctx, [0, 4, 0, 4, 8, 0])
    assert np.bincount(req, weights=tok).tolist() == pytest.approx([5, 12, 4])
