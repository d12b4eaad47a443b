"""The closed-form figure of ``alphagate model table``: speedup against α, one line per K, one
panel per verify cost — E(α, K) / (K·c + v) (Leviathan et al. 2023, Eq. 1), no batching, no load.
"""

from __future__ import annotations

from alphagate.report.charts.spec import ALPHA_LABEL, BREAK_EVEN, Chart, Line, Panel, tick_labels
from alphagate.theory.answers import TableAnswer

__all__ = ["table_speedup_chart"]


def table_speedup_chart(t: TableAnswer) -> Chart:
    """The closed-form speedup grid: speedup against α, one line per K, per verify cost."""
    panels = []
    for vi, v in enumerate(t.verify_costs):
        lines = [
            Line(label=f"K = {k}", x=tuple(t.alphas), y=tuple(t.speedup[vi][ki]), group=str(k))
            for ki, k in enumerate(t.ks)
        ]
        panels.append(
            Panel(
                title=f"closed form, c = {t.draft_cost:g}, v = {v:g}",
                x_label=ALPHA_LABEL,
                y_label="speedup (×, per target-step time)",
                lines=tuple(lines),
                refs=(BREAK_EVEN,),
                x_ticks=tuple(t.alphas),
                x_tick_labels=tick_labels(t.alphas),
                y_ratio=True,
            )
        )
    return Chart(
        key="closed_form_speedup",
        title="Closed-form speedup against α",
        caption="Candidate: K drafts per step; baseline: decoding without speculation (1×). "
        "E(α, K) / (K·c + v) (Leviathan et al. 2023, Eq. 1); no batching, no load.",
        panels=tuple(panels),
        share_y=True,
    )
