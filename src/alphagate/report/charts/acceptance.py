"""The two acceptance panels every source draws the same way: conditional α by draft position with
95% Wilson intervals, and the acceptance-length histogram (tokens per target pass, 1..K+1).

Acceptance by position follows vLLM's counters (``vllm/v1/spec_decode/metrics.py``): accepted at
position i counts drafts whose first i tokens were all accepted, so the conditional α_i is
accepted_i ÷ accepted_{i−1} (drafts for i = 1), a binomial proportion with a Wilson interval
(:func:`alphagate.theory.wilson_interval`); the estimate carries both.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from alphagate.measure.estimate import AcceptanceEstimate
from alphagate.report.charts.spec import (
    ALPHA_LABEL,
    SHARE_LABEL,
    TAU_LABEL,
    HLine,
    Line,
    Panel,
    Role,
    or_nan,
)

__all__ = ["alpha_line", "alpha_panel", "histogram_line", "pmf_line", "pmf_panel", "positions"]


def positions(k: int) -> tuple[float, ...]:
    """Draft positions 1..k as x values."""
    return tuple(float(i) for i in range(1, k + 1))


def _integer_ticks(n: int) -> tuple[tuple[float, ...], tuple[str, ...]]:
    return positions(n), tuple(str(i) for i in range(1, n + 1))


def alpha_line(
    label: str, est: AcceptanceEstimate, group: str | None = None, role: Role = "measured"
) -> Line:
    """Conditional α per position with its 95% Wilson interval (from the estimate's counts)."""
    cis = est.alpha_by_pos_ci
    return Line(
        label=label,
        x=positions(len(est.alpha_by_pos)),
        y=tuple(or_nan(a) for a in est.alpha_by_pos),
        role=role,
        low=tuple(math.nan if ci is None else ci.low for ci in cis),
        high=tuple(math.nan if ci is None else ci.high for ci in cis),
        group=group,
    )


def alpha_panel(title: str, lines: list[Line], refs: tuple[HLine, ...] = ()) -> Panel:
    ticks, names = _integer_ticks(max((len(line.x) for line in lines), default=1))
    return Panel(
        title=title,
        x_label="draft position (1 = first draft)",
        y_label=ALPHA_LABEL,
        lines=tuple(lines),
        refs=refs,
        x_ticks=ticks,
        x_tick_labels=names,
        y_range=(0.0, 1.0),
    )


def histogram_line(
    label: str, est: AcceptanceEstimate, group: str | None = None, role: Role = "measured"
) -> Line | None:
    """Share of steps emitting j = 1..K+1 tokens, from the estimate's histogram of accepted drafts."""
    h = est.acceptance_histogram
    total = sum(h)
    if not h or total <= 0:
        return None
    return pmf_line(label, [x / total for x in h], group, role)


def pmf_line(
    label: str, pmf: Sequence[float], group: str | None = None, role: Role = "measured"
) -> Line:
    return Line(
        label=label,
        x=positions(len(pmf)),
        y=tuple(float(p) for p in pmf),
        role=role,
        group=group,
    )


def pmf_panel(title: str, lines: list[Line]) -> Panel:
    ticks, names = _integer_ticks(max((len(line.x) for line in lines), default=1))
    return Panel(
        title=title,
        x_label=TAU_LABEL,
        y_label=SHARE_LABEL,
        lines=tuple(lines),
        x_ticks=ticks,
        x_tick_labels=names,
        y_range=(0.0, 1.0),
        bars=True,
    )
