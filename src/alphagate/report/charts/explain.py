"""Figures of ``alphagate explain``: each level's shares of a tail figure's rise, stacked by
mechanism, and the worst candidate requests' timelines — tokens received against time, with the
chunks that yielded one token (every draft rejected) and the gaps a prefill shared marked."""

from __future__ import annotations

from alphagate.explain.records import (
    MECHANISMS,
    ExplainResult,
    LevelExplanation,
    Mechanism,
    Metric,
)
from alphagate.report.charts.spec import Chart, Line, Panel, tick_labels

__all__ = ["explain_shares_chart", "explain_timeline_chart"]

#: the figures whose shares are drawn, each a panel
_PANELS: tuple[Metric, ...] = ("itl_per_token_p99_ms", "ttft_p99_ms")


def _share(lv: LevelExplanation, metric: Metric, mechanism: Mechanism) -> float:
    """The share (%) of ``metric``'s rise at ``lv`` that ``mechanism``'s factor holds (a factor
    reported for several mechanisms is drawn under the first)."""
    m = next(x for x in lv.metrics if x.metric == metric)
    for f in m.factors:
        if f.mechanisms[0] == mechanism and f.share is not None:
            return f.share * 100
    return 0.0


def explain_shares_chart(result: ExplainResult) -> Chart | None:
    """Per level, the shares of the rise of P99 ITL per token and of P99 TTFT, stacked."""
    if not result.levels:
        return None
    xs = tuple(float(i) for i in range(len(result.levels)))
    labels = tuple(lv.level for lv in result.levels)
    panels = []
    for metric in _PANELS:
        lines = tuple(
            Line(
                label=MECHANISMS[mech][0],
                x=xs,
                y=tuple(_share(lv, metric, mech) for lv in result.levels),
                group=mech,
            )
            for mech in MECHANISMS
        )
        label = next(m.label for m in result.levels[0].metrics if m.metric == metric)
        panels.append(
            Panel(
                title=f"{label}: what raised it",
                x_label="load level",
                y_label="share of the rise (%)",
                lines=tuple(line for line in lines if any(y > 0 for y in line.y)),
                x_ticks=xs,
                x_tick_labels=labels,
                y_range=(0.0, 100.0),
                bars=True,
                stacked=True,
            )
        )
    return Chart(
        key=f"explain-shares-{result.run_id}",
        title="Why the tail moved: each mechanism's share of the rise",
        caption="Shares of the log change candidate ÷ baseline that each mechanism's removal "
        "takes back (Shapley values over replays of the same requests with mechanisms removed); "
        "a figure that fell has no rise to share.",
        panels=tuple(panels),
    )


def explain_timeline_chart(lv: LevelExplanation) -> Chart | None:
    """The worst candidate requests of a level: tokens received against time since sent."""
    if not lv.worst:
        return None
    lines: list[Line] = []
    for t in lv.worst:
        at = [c.at_ms for c in t.chunks]
        total = [float(sum(c.tokens for c in t.chunks[: i + 1])) for i in range(len(t.chunks))]
        name = f"request {t.request}"
        lines.append(Line(label=name, x=tuple(at), y=tuple(total), group=name, steps=True))
        for mark, flags in (
            ("every draft rejected", [c.rejected for c in t.chunks]),
            ("a prefill shared the step", [c.prefill_stall for c in t.chunks]),
        ):
            idx = [i for i, flag in enumerate(flags) if flag]
            if idx:
                lines.append(
                    Line(
                        label=f"{name}: {mark}",
                        x=tuple(at[i] for i in idx),
                        y=tuple(total[i] for i in idx),
                        group=name,
                        points=True,
                        dashed=mark.startswith("a prefill"),
                    )
                )
    return Chart(
        key=f"explain-worst-{lv.level}",
        title=f"{lv.level}: the worst candidate requests, chunk by chunk",
        caption="Tokens received against the time since the request was sent; filled marks: a "
        "chunk of one token (every draft rejected), hollow: a gap another request's first token "
        "fell in (a prefill shared the step).",
        panels=(
            Panel(
                title=f"{lv.level}: worst {len(lv.worst)} by ITL per token",
                x_label="time since sent (ms)",
                y_label="tokens received",
                lines=tuple(lines),
                x_ticks=(),
                x_tick_labels=tick_labels(()),
            ),
        ),
    )
