"""What the streamed chunks measure (bench/chunks.py), by hand."""

from __future__ import annotations

import pytest

from alphagate.bench.chunks import chunk_acceptance, itl_per_token_samples
from alphagate.bench.records import RequestRecord
from tests.records import streamed


def test_chunk_acceptance_by_hand() -> None:
    def rec(tokens: list[int]) -> RequestRecord:
        return streamed([0.01 * (i + 1) for i in range(len(tokens))], tokens, cls="chat")

    # first and last chunks are skipped; 6 tokens is more than K + 1 = 4 (merged steps)
    est, skipped = chunk_acceptance([rec([1, 3, 1, 2, 4, 6, 2, 1])], k=3)
    # steps of 3, 1, 2, 4 and 2 tokens: 4 accept a first draft, 2 a second, 1 a third
    assert skipped == 1
    assert est.num_drafts == 5 and est.accepted_per_pos == [4.0, 2.0, 1.0]
    assert est.alpha_by_pos == pytest.approx([4 / 5, 2 / 4, 1 / 2])
    assert est.acceptance_histogram == [1.0, 2.0, 1.0, 1.0]


def test_itl_per_token_samples_by_hand() -> None:
    r = streamed([0.1, 0.3, 0.6], [1, 2, 3], target="baseline")
    vals, w = itl_per_token_samples([r])
    assert vals == pytest.approx([0.1, 0.1]) and list(w) == [2.0, 3.0]
