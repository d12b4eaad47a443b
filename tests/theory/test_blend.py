"""Traffic blending by time per token (not by averaging α)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from alphagate import theory


def test_lesson_exercise_2_chat_and_code() -> None:
    # 70% chat at α 0.7, 30% code at α 0.4, K = 5.
    b = theory.blend([0.7, 0.3], [0.7, 0.4], k=5, draft_cost=0.0, verify_cost=1.0)
    assert b.naive_mean_alpha == pytest.approx(0.61)
    # time per token = 0.7/E(0.7) + 0.3/E(0.4): the harmonic blend is below the speedup at α = 0.61
    assert b.blended_speedup < b.naive_speedup
    assert b.equivalent_alpha < b.naive_mean_alpha
    assert float(theory.speedup(b.equivalent_alpha, 5)) == pytest.approx(
        b.blended_speedup, rel=1e-9
    )
    # code is 30% of the tokens but takes a larger share of the decode time
    assert b.time_shares[1] > 0.3
    assert b.time_shares.sum() == pytest.approx(1.0)


def test_single_class_is_identity() -> None:
    b = theory.blend([1.0], [0.63], k=4, draft_cost=0.03, verify_cost=1.1)
    assert b.equivalent_alpha == pytest.approx(0.63, abs=1e-9)
    assert b.blended_speedup == pytest.approx(float(theory.speedup(0.63, 4, 0.03, 1.1)))


def test_blend_rejects_bad_shares() -> None:
    with pytest.raises(ValueError, match="sum to 1"):
        theory.blend([0.5, 0.4], [0.7, 0.4], k=5)
    with pytest.raises(ValueError, match="same"):
        theory.blend([0.5, 0.5], [0.7], k=5)


@given(
    st.lists(st.tuples(st.floats(0.01, 1.0), st.floats(0.0, 1.0)), min_size=1, max_size=6),
    st.integers(1, 8),
)
def test_blend_between_extremes(rows: list[tuple[float, float]], k: int) -> None:
    w = np.array([r[0] for r in rows])
    shares = w / w.sum()
    alphas = np.array([r[1] for r in rows])
    b = theory.blend(shares, alphas, k, 0.02, 1.05)
    per = theory.speedup(alphas, k, 0.02, 1.05)
    assert per.min() - 1e-9 <= b.blended_speedup <= per.max() + 1e-9
    assert alphas.min() - 1e-7 <= b.equivalent_alpha <= alphas.max() + 1e-7
    assert b.blended_speedup <= b.naive_speedup + 1e-9  # harmonic blend never beats averaged α
