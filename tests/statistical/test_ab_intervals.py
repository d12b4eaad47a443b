"""The A/B intervals between alternated runs: coverage of the Student's t interval on log ratios
against its nominal 95%, with tolerances from the number of replications, and the same interval
built from bench records by :func:`alphagate.bench.ab.ab_value` — which has a width even when
every request is the same length (a bootstrap over requests inside one run has none)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from alphagate.bench.ab import ab_value
from alphagate.bench.records import RequestRecord
from alphagate.theory.intervals import ratio_interval
from tests.records import streamed

#: replications per coverage check; the 95% interval's coverage is binomial over them
N = 2000
#: three standard errors of a proportion 0.95 over N replications
TOL = 3 * math.sqrt(0.95 * 0.05 / N)


@pytest.mark.parametrize("runs", [2, 3, 5, 8])
def test_ratio_interval_covers_the_true_ratio_at_its_nominal_rate(runs: int) -> None:
    """Per-run figures with a run effect on each side and a drift shared by the pair (the
    alternation's reason): the interval on the pairs' log ratios covers the true ratio 95% of
    the time, whatever the drift."""
    rng = np.random.default_rng(7)
    truth = 1.4
    covered = 0
    for _ in range(N):
        drift = rng.normal(0, 0.3, runs)  # the machine: both sides of a pair slow down together
        base = 100.0 * np.exp(drift + rng.normal(0, 0.05, runs))
        cand = 100.0 * truth * np.exp(drift + rng.normal(0, 0.05, runs))
        _, low, high = ratio_interval(cand / base)
        covered += low <= truth <= high
    assert covered / N == pytest.approx(0.95, abs=TOL)


def test_ratio_interval_needs_two_runs_and_positive_ratios() -> None:
    with pytest.raises(ValueError, match="two runs"):
        ratio_interval([1.2])
    with pytest.raises(ValueError, match="positive"):
        ratio_interval([1.2, 0.0])


def _run(
    target: str, repeat: int, n: int, gap_s: float, tokens: int, start: float
) -> list[RequestRecord]:
    """``n`` requests of ``tokens`` tokens, one chunk per token every ``gap_s``, back to back."""
    out = []
    t = start
    for i in range(n):
        times = [gap_s * (j + 1) for j in range(tokens)]
        out.append(streamed(times, id=i, target=target, send_s=t, repeat=repeat))
        t += times[-1]
    return out


def test_equal_requests_get_a_between_run_interval_that_covers_the_truth() -> None:
    """Every request the same length and speed within a run; the runs differ by a machine drift
    shared by each alternated pair, and by their own noise. One run per side has an interval of
    zero width (it cannot see the runs differ); three runs have a width, and cover the true
    throughput ratio at close to the nominal rate."""
    rng = np.random.default_rng(3)
    truth = 1.8  # candidate gaps 1.8× shorter
    single = ab_value(
        "throughput_speedup",
        _run("baseline", 0, 20, 0.01, 16, 0.0),
        _run("candidate", 0, 20, 0.01 / truth, 16, 10.0),
    )
    assert single.single_run and single.interval is not None
    assert single.interval.high - single.interval.low == pytest.approx(0.0, abs=1e-9)
    reps, covered, widths = 300, 0, []
    for _ in range(reps):
        base, cand = [], []
        for r in range(3):
            drift = math.exp(rng.normal(0, 0.2))
            base += _run(
                "baseline", r, 20, 0.01 * drift * math.exp(rng.normal(0, 0.03)), 16, 100.0 * r
            )
            cand += _run(
                "candidate",
                r,
                20,
                0.01 / truth * drift * math.exp(rng.normal(0, 0.03)),
                16,
                100.0 * r + 50,
            )
        v = ab_value("throughput_speedup", base, cand)
        assert not v.single_run and v.runs == 3 and v.interval is not None
        widths.append(v.interval.high - v.interval.low)
        covered += v.interval.low <= truth <= v.interval.high
    assert min(widths) > 0
    # 300 replications: the 95% interval covers 95% ± 3.8% (three standard errors)
    assert covered / reps == pytest.approx(0.95, abs=3 * math.sqrt(0.95 * 0.05 / reps))
