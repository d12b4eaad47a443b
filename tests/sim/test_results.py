"""Summaries: ITL per chunk vs per token, TPOT, and realised acceptance — checked on runs whose
answer is known by hand."""

from __future__ import annotations

import numpy as np
import pytest

from alphagate.sim.engine import run_engine
from alphagate.sim.results import Distribution, summarize
from alphagate.sim.workload import ClosedLoop
from alphagate.specs.workload import FixedLength
from tests.sim.conftest import constant_cost, scenario


def test_itl_per_token_divides_each_chunk_gap_by_its_tokens() -> None:
    """α = 1, K = 3, every step 1 s: each decode chunk carries 4 tokens one second after the last,
    so ITL per chunk is 1,000 ms and ITL per token 250 ms — not the whole gap."""
    cost = constant_cost(draft_cost=0.0)
    sc = scenario(
        3, 1.0, ClosedLoop(users=1), 3, prompt=FixedLength(value=1), output=FixedLength(value=41)
    )
    s = summarize(run_engine(cost, sc, np.random.default_rng(0)))
    assert s.itl_per_chunk_ms.p50 == pytest.approx(1000.0)
    assert s.itl_per_token_ms.p50 == pytest.approx(250.0)
    assert s.itl_per_token_ms.p99 == pytest.approx(250.0)
    assert s.itl_per_token_ms.samples == 3 * 40  # one sample per token after the first
    assert s.tpot_ms.mean == pytest.approx(250.0)
    assert s.mean_tokens_per_chunk == pytest.approx(4.0)
    assert s.draft_acceptance_rate == pytest.approx(1.0)
    assert s.mean_acceptance_length == pytest.approx(4.0)
    # the counts vLLM keeps, not rates to multiply back: every draft of every step accepted
    assert s.num_accepted_per_pos == [s.num_drafts] * 3
    assert sum(s.num_accepted_per_pos) == s.num_accepted_tokens


def test_itl_per_token_weights_by_tokens_in_mixed_chunks() -> None:
    """A rejected first draft delivers one token after a full step: those tokens form the tail."""
    cost = constant_cost(draft_cost=0.0)
    sc = scenario(
        2, 0.5, ClosedLoop(users=1), 40, prompt=FixedLength(value=1), output=FixedLength(value=200)
    )
    tr = run_engine(cost, sc, np.random.default_rng(1))
    s = summarize(tr)
    hist = tr.step_chunk_hist  # decoding sequences that emitted j tokens, j = 0..K+1
    j = np.arange(hist.shape[1])
    tokens = (hist * j).sum()
    # every step lasts 1 s: per-token value 1/j for j tokens in the chunk, one sample per token
    mean = float((hist[:, 1:] * j[1:] * (1.0 / j[1:])).sum() / tokens) * 1e3
    assert s.itl_per_token_ms.mean == pytest.approx(mean)
    assert s.itl_per_chunk_ms.mean == pytest.approx(1000.0)
    assert s.itl_per_token_ms.p99 == pytest.approx(1000.0)  # 1-token chunks are the tail
    assert s.itl_per_token_ms.p50 < 1000.0


def test_weighted_distribution_by_hand() -> None:
    d = Distribution.of([0.5, 2.0], weights=[4, 1])  # seconds, weights = tokens
    assert d.mean == pytest.approx((4 * 500 + 2000) / 5)
    assert d.p50 == pytest.approx(500.0) and d.p99 == pytest.approx(2000.0)
    assert Distribution.of([]).mean is None


def test_a_result_written_before_the_counts_field_reads_them_from_its_rates() -> None:
    """Files of older versions keep every chart: the counts come back from the rates, and a
    sweep's α per mix from its labels."""
    from alphagate.sim.sweep import SweepResult

    cost = constant_cost(draft_cost=0.0)
    sc = scenario(
        3, 0.7, ClosedLoop(users=2), 3, prompt=FixedLength(value=1), output=FixedLength(value=41)
    )
    s = summarize(run_engine(cost, sc, np.random.default_rng(0)))
    old = s.model_dump(mode="json")
    del old["num_accepted_per_pos"]
    assert type(s).model_validate(old).num_accepted_per_pos == s.num_accepted_per_pos
    assert SweepResult._alphas_of_older_files({"mixes": ["α=0.6", "mix"]})["mix_alphas"] == [
        0.6,
        None,
    ]
