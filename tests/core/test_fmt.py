"""The missing-figure rule: a dash for None, the format otherwise."""

from __future__ import annotations

from alphagate.core.fmt import DASH, num


def test_a_missing_figure_is_a_dash_whatever_the_format() -> None:
    assert num(None) == DASH == "—"
    assert num(None, ".1%", " ms") == DASH


def test_a_figure_takes_its_format_and_suffix() -> None:
    assert num(1.23456) == "1.23"
    assert num(0.5, ".0%") == "50%"
    assert num(12.0, ".1f", " ms") == "12.0 ms"
    assert num(0.0) == "0.00"  # zero is a figure, not a missing one
