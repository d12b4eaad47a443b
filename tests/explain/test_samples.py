"""The replays' samples: quantiles and tail means under resampling against the simulator's own
rule and a direct sum, the resample counts, a step priced as a decode step, chunk gaps read back from a trace, and the
lateness drawn from a run's validity figures."""

from __future__ import annotations

import numpy as np
import pytest

from alphagate.bench.validity import RunValidity
from alphagate.explain.lateness import gap_lateness, stalled_gaps, with_lateness
from alphagate.explain.replay import level_replay, side_runs
from alphagate.explain.samples import (
    Variant,
    decode_priced,
    quantiles,
    replay,
    resamples,
    tail_means,
)
from alphagate.sim.cost import StepCostModel
from alphagate.sim.results import Distribution, weighted_quantiles
from alphagate.sim.workload import unconditional_table
from alphagate.specs import DeploymentConfig
from tests.explain.simulated import Side, Traffic, simulated_ab


def test_quantiles_of_the_data_as_they_are_follow_the_simulators_rule() -> None:
    rng = np.random.default_rng(0)
    values, weights = rng.exponential(size=500), rng.integers(1, 5, 500).astype(float)
    request = rng.integers(0, 40, 500)
    counts = resamples(np.ones(40, dtype=bool), 30, rng)
    q = quantiles(values, weights, request, counts, [0.5, 0.99])
    assert q.shape == (2, 31)
    assert q[:, 0] == pytest.approx(weighted_quantiles(values, weights, [0.5, 0.99]))
    # a resample is the data with each request's samples repeated as often as it was drawn
    row = counts[7]
    reps = row[request].astype(int)
    expected = weighted_quantiles(np.repeat(values, reps), np.repeat(weights, reps), [0.99])
    assert q[1, 7] == pytest.approx(expected[0])


def _tail_mean(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    """The mean above the ``q`` quantile, directly: each value weighed by its part above it."""
    order = np.argsort(values)
    v, w = values[order], weights[order]
    cum = np.cumsum(w)
    part = np.diff(np.maximum(cum - q * cum[-1], 0.0), prepend=0.0)
    return float((part * v).sum() / part.sum())


def test_tail_means_under_resampling_are_the_direct_sum_of_each_resample() -> None:
    rng = np.random.default_rng(1)
    values, weights = rng.exponential(size=3000), rng.integers(1, 4, 3000).astype(float)
    request = rng.integers(0, 200, 3000)
    counts = resamples(np.ones(200, dtype=bool), 20, rng)
    got = tail_means(values, weights, request, counts, 0.95)
    assert got.shape == (21,)
    for row in (0, 7, 19):
        w = counts[row][request] * weights
        assert got[row] == pytest.approx(_tail_mean(values, w, 0.95), rel=1e-12)
    # an exponential's mean above its 95th percentile is that percentile plus its mean (1)
    assert got[0] == pytest.approx(np.log(20) + 1, rel=0.1)
    # a chunk of no tokens (its gap per token infinite, its weight 0) counts nothing
    with np.errstate(divide="ignore"):
        odd = np.append(values, np.float64(1.0) / 0.0)
    zero = tail_means(odd, np.append(weights, 0.0), np.append(request, 0), counts, 0.95)
    assert zero == pytest.approx(got, rel=1e-12)


def test_a_tail_mean_does_not_jump_where_the_p99_does() -> None:
    """Steps of 36 ms, and 1% of the tokens in steps of 46 ms (a prefill chunk shared them):
    a few samples more or fewer above the jump move the P99 by the whole jump, the mean above
    the 95th percentile by a few percent."""

    def figures(slow: int) -> tuple[float, float]:
        values = np.array([36.0] * (10_000 - slow) + [46.0] * slow)
        weights, request = np.ones(values.size), np.arange(values.size) % 100
        counts = np.ones((1, 100))
        p99 = quantiles(values, weights, request, counts, [0.99])[0, 0]
        return float(p99), float(tail_means(values, weights, request, counts, 0.95)[0])

    (p_lo, t_lo), (p_hi, t_hi) = figures(90), figures(110)
    assert (p_lo, p_hi) == (36.0, 46.0)
    assert t_hi / t_lo == pytest.approx(1.0, abs=0.02)  # the P99: ×1.28


def test_resamples_draw_measured_requests_only() -> None:
    measured = np.asarray([False, False, True, True, True, True])  # two warm-up requests
    counts = resamples(measured, 200, np.random.default_rng(1))
    assert counts[0].tolist() == [0, 0, 1, 1, 1, 1]
    assert (counts[1:, :2] == 0).all()
    assert (counts[1:].sum(axis=1) == 4).all()
    assert counts[1:, 2:].mean() == pytest.approx(1.0, abs=0.1)


def test_a_decode_priced_step_costs_what_a_decode_step_costs(cost_8b: StepCostModel) -> None:
    priced = decode_priced(cost_8b)
    step = {"n_decode": 16, "ctx_decode": 16 * 600, "prefill_tokens": 200, "prefill_ctx": 0}
    assert priced.step_seconds(k=4, **step) == cost_8b.step_seconds(k=0, **step)
    assert cost_8b.step_seconds(k=4, **step) > cost_8b.step_seconds(k=0, **step)


def test_replayed_chunks_add_up_to_each_request() -> None:
    """Gaps from the first token on: a request's gaps sum to its last token's time − its first,
    and its chunks' tokens to its output − 1 (the prefill's token)."""
    dep = DeploymentConfig(model="llama-3.1-8b")
    result, records = simulated_ab(Side(0, dep), Side(3, dep), Traffic(4, 12, (20, 40), 24))
    cand = next(lv for lv in result.levels if lv.target == "candidate")
    plan = level_replay(cand, side_runs(records, "candidate", cand.level))
    cost = Side(3, dep).cost()
    s = replay(plan, Variant(cost, 3, unconditional_table(plan.classes, 3), 256), seeds=1)
    assert np.bincount(s.request, weights=s.tokens) == pytest.approx(
        [r.output_tokens - 1 for r in plan.records]
    )
    assert (s.gap_s > 0).all()
    assert s.throughput > 0 and s.peak_streams == 4


def test_lateness_from_the_validity_figures() -> None:
    v = RunValidity(
        median_gap_ms=10.0, bunched_share=0.0, distorted=False,
        client_lag_ms=Distribution(mean=1.0, p50=0.5, p90=2.0, p99=6.0, p99_9=9.0, samples=100),
        send_lag_ms=None, server_lag_ms=1.0,
    )  # fmt: skip
    late = gap_lateness(v, n=40_000)
    assert late.mean() == pytest.approx(0.0, abs=2e-4)  # a late read shortens the next gap
    assert np.quantile(np.abs(late), 0.99) * 1e3 == pytest.approx(8.5, rel=0.35)
    assert gap_lateness(None).size == 0
    gaps = np.full(1000, 0.01)
    assert (with_lateness(gaps, None) == gaps).all()
    moved = with_lateness(gaps, late)
    assert moved.min() >= 0.001 and moved.std() > 0


def test_a_gap_that_holds_another_requests_first_token_is_a_prefill_stall() -> None:
    dep = DeploymentConfig(model="llama-3.1-8b")
    _, records = simulated_ab(Side(0, dep), Side(0, dep), Traffic(2, 6, (20, 20), 6))
    r = records[0]
    at = r.send_s + np.asarray(r.chunk_times_s)
    firsts = np.asarray([0.5 * (at[2] + at[3])])  # between its third and fourth chunk
    expected = [i == 2 for i in range(len(r.chunk_times_s) - 1)]
    assert len(expected) >= 4 and stalled_gaps(r, firsts).tolist() == expected
