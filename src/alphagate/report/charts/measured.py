"""Measured acceptance figures: α by position and the acceptance length of a bench run (all
traffic from the server's ``/metrics`` deltas per level, per class from the streamed chunks) and
of an ``alphagate measure`` result (per class and over all traffic), with 95% Wilson intervals.

The per-class figures of a bench count its streamed chunks (:func:`alphagate.bench.chunks.
chunk_acceptance`): one chunk per engine step, each request's first and last chunk skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from alphagate.bench.chunks import chunk_acceptance
from alphagate.bench.records import BenchResult, LevelSummary, RequestRecord
from alphagate.measure.estimate import AcceptanceEstimate
from alphagate.measure.results import MeasureResult
from alphagate.report.charts.acceptance import alpha_line, alpha_panel, histogram_line, pmf_panel
from alphagate.report.charts.spec import Chart, Line, Panel
from alphagate.report.charts.where import bench_name

__all__ = [
    "bench_acceptance_length_chart",
    "bench_alpha_chart",
    "measure_acceptance_length_chart",
    "measure_alpha_chart",
]

CHUNK_NOTE = (
    "Server counters cover every class at once; the per-class figures count the streamed chunks "
    "(one chunk per engine step; each request's first and last chunk skipped). 95% Wilson "
    "intervals, counting steps as independent draws."
)
COUNTERS = "all traffic, from /metrics deltas"
CHUNKS = "per class, from the streamed chunks"


# ---------------------------------------------------------------- bench runs
def _measured_levels(b: BenchResult) -> list[tuple[LevelSummary, AcceptanceEstimate]]:
    return [
        (lv, lv.acceptance)
        for lv in b.levels
        if lv.acceptance is not None and lv.acceptance.num_drafts > 0 and lv.acceptance.alpha_by_pos
    ]


def _max_k(measured: Sequence[tuple[LevelSummary, AcceptanceEstimate]]) -> int:
    return max(a.k or len(a.alpha_by_pos) for _, a in measured)


def _speculative_target(b: BenchResult) -> str:
    """The target whose chunks show the drafts: the candidate of an A/B, else the one server."""
    return "candidate" if any(lv.target == "candidate" for lv in b.levels) else "default"


def _class_records(
    b: BenchResult, records: Sequence[RequestRecord], target: str
) -> dict[str, list[RequestRecord]]:
    out: dict[str, list[RequestRecord]] = {}
    for r in records:
        if r.run_id == b.run_id and r.target == target:
            out.setdefault(r.cls or "all requests", []).append(r)
    return out


def _chunk_estimates(
    b: BenchResult, records: Sequence[RequestRecord] | None, k: int
) -> tuple[list[tuple[str, AcceptanceEstimate]], list[str]]:
    """Each class's acceptance from its chunks, and a note per class on the chunks left out."""
    out, notes = [], []
    for name, recs in _class_records(b, records or [], _speculative_target(b)).items():
        est, skipped = chunk_acceptance(recs, k)
        if est.num_drafts > 0:
            out.append((name, est))
        if skipped:
            notes.append(
                f"{name}: {skipped} chunks with more than K + 1 = {k + 1} tokens left out "
                "(the server merged engine steps)"
            )
    return out, notes


def _bench_panels(
    b: BenchResult,
    records: Sequence[RequestRecord] | None,
    *,
    line: Callable[[str, AcceptanceEstimate, str | None], Line | None],
    panel: Callable[[str, list[Line]], Panel],
) -> tuple[list[Panel], list[str]]:
    """The counters' panel (a line per level) and the chunks' panel (a line per class), and the
    notes on chunks left out; no panel when no level counted a draft."""
    measured = _measured_levels(b)
    counters = [
        x for lv, a in measured if (x := line(f"{lv.level} (server counters)", a, None)) is not None
    ]
    if not counters:
        return [], []
    panels = [panel(COUNTERS, counters)]
    per_class, notes = _chunk_estimates(b, records, _max_k(measured))
    chunks = [
        x for name, e in per_class if (x := line(f"{name} (tokens per chunk)", e, name)) is not None
    ]
    if chunks:
        panels.append(panel(CHUNKS, chunks))
    return panels, notes


def bench_alpha_chart(b: BenchResult, records: Sequence[RequestRecord] | None) -> Chart | None:
    """Measured α by position: from the server's counters per level (all classes together), and
    per class from the sizes of the streamed chunks; each with 95% Wilson intervals."""
    panels, notes = _bench_panels(b, records, line=alpha_line, panel=alpha_panel)
    if not panels:
        return None
    return Chart(
        key="alpha_by_position_measured",
        title="Measured α by position per class",
        caption=f"{bench_name(b)}. {CHUNK_NOTE}",
        panels=tuple(panels),
        notes=tuple(notes),
    )


def bench_acceptance_length_chart(
    b: BenchResult, records: Sequence[RequestRecord] | None
) -> Chart | None:
    """Measured tokens per target pass: from the counters per level, and per class from chunks."""
    panels, _ = _bench_panels(b, records, line=histogram_line, panel=pmf_panel)
    if not panels:
        return None
    return Chart(
        key="acceptance_length_measured",
        title="Measured acceptance length",
        caption=f"{bench_name(b)}. Tokens each verify pass emitted, bonus token included.",
        panels=tuple(panels),
    )


# ---------------------------------------------------------------- alphagate measure
def _measure_estimates(m: MeasureResult) -> list[tuple[str, AcceptanceEstimate]]:
    out = [(name, e) for name, e in m.classes.items() if e.num_drafts > 0]
    if m.overall is not None and m.overall.num_drafts > 0:
        out.append(("all traffic", m.overall))
    return out


def measure_alpha_chart(m: MeasureResult) -> Chart | None:
    """α by position per class (and over all traffic) from one measurement, with intervals."""
    ests = [(n, e) for n, e in _measure_estimates(m) if e.alpha_by_pos]
    if not ests:
        return None
    return Chart(
        key="alpha_by_position_measure",
        title="Measured α by position per class",
        caption=f"{m.verb}: {m.source}. 95% Wilson intervals over the drafts that reached each "
        "position.",
        panels=(alpha_panel(m.verb, [alpha_line(n, e, n) for n, e in ests]),),
    )


def measure_acceptance_length_chart(m: MeasureResult) -> Chart | None:
    """Tokens per target pass per class (and over all traffic) from one measurement."""
    lines = [
        line for n, e in _measure_estimates(m) if (line := histogram_line(n, e, n)) is not None
    ]
    if not lines:
        return None
    return Chart(
        key="acceptance_length_measure",
        title="Measured acceptance length",
        caption=f"{m.verb}: {m.source}.",
        panels=(pmf_panel(m.verb, lines),),
    )
