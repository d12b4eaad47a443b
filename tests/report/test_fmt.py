"""The one way every renderer writes a number, on hand-worked cases: a missing figure is an em
dash, a ratio ends in ×, a share is a percentage, a 95% interval is ``[lo, hi]``, a predicted
range is ``[lo–hi]`` (``?`` when it holds 1), and a loss is red with ✗ in the text too."""

from __future__ import annotations

import pytest

from alphagate.core.fmt import DASH
from alphagate.core.records import Interval
from alphagate.measure.estimate import Interval as Ci
from alphagate.report._fmt import (
    fmt_alpha,
    fmt_ci,
    fmt_interval,
    fmt_pct,
    fmt_span,
    fmt_x,
    fmt_x_marked,
    loss,
    with_ci,
)


def test_a_missing_figure_is_a_dash_whatever_its_kind() -> None:
    for text in (fmt_alpha(None), fmt_x(None), fmt_x_marked(None), fmt_pct(None), fmt_ci(None)):
        assert text == DASH


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (fmt_alpha(0.71234), "0.712"),
        (fmt_alpha(2.5, 4), "2.5000"),
        (fmt_x(1.234), "1.23×"),
        (fmt_x(1.2345, 3), "1.234×"),  # round half to even on the binary value
        (fmt_pct(0.625), "62%"),  # 62.5 rounds to even
        (fmt_pct(0.99, "g"), "99%"),
        (fmt_pct(0.12345, ".2f"), "12.35%"),
        (fmt_span("1", "64"), "1–64"),
        (fmt_span("0.8 ms", "2.4 ms", spaced=True), "0.8 ms – 2.4 ms"),
    ],
)
def test_numbers(text: str, expected: str) -> None:
    assert text == expected


def test_a_loss_is_red_and_marked_in_text() -> None:
    assert loss("no") == "[red]no ✗[/red]"
    assert loss("0.95", compact=True) == "[red]0.95✗[/red]"
    assert fmt_x_marked(0.95) == "[red]0.95× ✗[/red]" and fmt_x_marked(1.05) == "1.05×"
    assert fmt_x_marked(0.95, compact=True) == "[red]0.95✗[/red]"
    assert fmt_x_marked(1.0, compact=True) == "1.00"  # break-even is not a loss


def test_a_95_percent_interval_and_a_predicted_range_read_differently() -> None:
    ci = Ci(low=0.7123, high=0.8012)
    assert fmt_ci(ci) == "[0.712, 0.801]" and fmt_ci(ci, 2) == "[0.71, 0.80]"
    assert with_ci("0.750", ci) == "0.750 [0.712, 0.801]" and with_ci("0.750", None) == "0.750"
    assert fmt_ci(Interval(low=0.7, high=None)) == DASH  # an open end is not a 95% interval
    clear, across = Interval(low=1.17, high=1.4), Interval(low=0.9, high=1.2)
    assert fmt_interval(clear) == "[1.17–1.40]" and fmt_interval(across) == "[0.90–1.20]?"
    assert fmt_interval(across, brackets=False, mark=False) == "0.90–1.20"
    # an open low end reaches below 1: the sign is not settled
    assert fmt_interval(Interval(low=None, high=2.0), 1, "×") == "[…–2.0×]?"
    assert fmt_interval(None) == "" and fmt_interval(Interval(low=None, high=None)) == ""
