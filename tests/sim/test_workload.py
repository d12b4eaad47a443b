"""Sampled requests: gamma arrival gaps of mean 1/rate starting at 0, classes drawn by share, and
the table of P(≥ j accepted) per class the kernels read (tolerances from the sample)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from alphagate.core.traffic import TrafficClass
from alphagate.sim.workload import (
    ClosedLoop,
    OpenLoop,
    arrival_times,
    sample_classes,
    sample_requests,
    unconditional_table,
)
from alphagate.specs.workload import FixedLength, WorkloadConfig

Z = 4.5


@pytest.mark.parametrize("burstiness", [1.0, 0.25, 4.0])
def test_arrival_gaps_have_mean_one_over_rate_and_gamma_variance(burstiness: float) -> None:
    """Gamma(shape b, scale 1/(rate·b)) gaps: mean 1/rate, variance 1/(rate²·b)."""
    rate, n = 20.0, 100_000
    t = arrival_times(np.random.default_rng(5), n, rate, burstiness)
    assert t[0] == 0.0 and np.all(np.diff(t) >= 0)
    gaps = np.diff(t)
    var = 1.0 / (rate**2 * burstiness)
    assert abs(gaps.mean() - 1 / rate) < Z * math.sqrt(var / gaps.size)
    # the sample variance's standard error for a gamma: var·√((2 + 6/b) / n)
    assert abs(gaps.var() - var) < Z * var * math.sqrt((2 + 6 / burstiness) / gaps.size)


def test_classes_are_drawn_by_their_shares() -> None:
    classes = (TrafficClass(name="a", share=0.7), TrafficClass(name="b", share=0.3))
    n = 100_000
    idx = sample_classes(classes, n, np.random.default_rng(1))
    share_b = float((idx == 1).mean())
    assert set(np.unique(idx)) == {0, 1}
    assert abs(share_b - 0.3) < Z * math.sqrt(0.3 * 0.7 / n)


def test_closed_loop_requests_have_no_arrival_time_and_open_loop_ones_do() -> None:
    wl = WorkloadConfig(prompt_len=FixedLength(value=7), output_len=FixedLength(value=9))
    rng = np.random.default_rng(0)
    closed = sample_requests(wl, 5, ClosedLoop(users=2), rng)
    assert closed.n == 5 and np.all(np.isnan(closed.arrival_s))
    assert closed.prompt_len.tolist() == [7] * 5 and closed.output_len.tolist() == [9] * 5
    opened = sample_requests(wl, 5, OpenLoop(rate=10.0), rng)
    assert opened.arrival_s[0] == 0.0 and np.all(np.isfinite(opened.arrival_s))
    relabelled = closed.with_classes(np.ones(5, dtype=np.int64))
    assert relabelled.class_idx.tolist() == [1] * 5 and relabelled.prompt_len is closed.prompt_len


def test_the_kernels_table_is_each_classes_survival_by_position() -> None:
    classes = (
        TrafficClass(name="a", share=0.5, alpha=0.5),
        TrafficClass(name="b", share=0.5, alpha_by_pos=(0.9, 0.5)),
    )
    np.testing.assert_allclose(
        unconditional_table(classes, 3), [[0.5, 0.25, 0.125], [0.9, 0.45, 0.225]]
    )
    assert unconditional_table(classes, 0).shape == (2, 1)  # K = 0 still gives one column
