"""The report page as data: sections in the order a reader decides, each a list of blocks.

1. the verdict and the config to paste; 2. speedup against concurrency (predicted, measured, the
1× break-even and the recommended K); 3. P99 and P50 ITL per token with and without speculation;
4. the ITL CDF; 5. α by position per class with 95% intervals; 6. the acceptance-length
histogram; 7. the gate; 8. why the tail moved and what fixes it (``explain``); 9. the
assumptions (deployment, cost terms, α sources); 10. the commands that reproduce the page. Every section is always there: one without data says what would fill it.

Pure: :class:`~alphagate.report.inputs.ReportInputs` in, a :class:`~alphagate.report.blocks.Page`
of text, tables and :class:`~alphagate.report.charts.Chart` specifications out; each section is
built by its module under :mod:`alphagate.report.sections`, and :mod:`alphagate.report.html`
draws the page.
"""

from __future__ import annotations

from collections.abc import Callable

from alphagate.report.blocks import Block, Page, Section
from alphagate.report.inputs import BenchInput, GateInput, PlanInput, ReportInputs, SweepInput
from alphagate.report.sections.assumptions import assumptions_section
from alphagate.report.sections.explain import explain_section
from alphagate.report.sections.figures import (
    alpha_section,
    cdf_section,
    itl_section,
    length_section,
    speedup_section,
)
from alphagate.report.sections.gate import gate_section
from alphagate.report.sections.reproduce import reproduce_section
from alphagate.report.sections.verdict import verdict_section

__all__ = ["SECTIONS", "build_page"]

#: (id, title) of every section, in order.
SECTIONS: tuple[tuple[str, str], ...] = (
    ("verdict", "Verdict and the config to paste"),
    ("speedup", "Speedup against concurrency"),
    ("itl", "P99 and P50 ITL per token, with and without speculation"),
    ("itl-cdf", "ITL per token: the whole distribution"),
    ("alpha", "α by position per class"),
    ("acceptance-length", "Acceptance length"),
    ("gate", "Gate"),
    ("explain", "Why the tail moved, and what fixes it"),
    ("assumptions", "Assumptions: deployment, cost terms, α sources"),
    ("reproduce", "Commands that reproduce this page"),
)

_ABSENT = {
    "verdict": "Nothing to decide from: add a plan (alphagate plan --json) or a gate decision.",
    "speedup": "No speedup figures: add a plan, a simulate sweep, a bench A/B or a model answer.",
    "itl": "No latency figures: add a plan, a simulate sweep or a bench run.",
    "itl-cdf": "No latency distribution: add a simulate sweep, or a bench run with its requests.jsonl.",
    "alpha": "No acceptance figures: add a plan, a sweep, a bench run against a speculative server, or a measurement.",
    "acceptance-length": "No acceptance figures: add a plan, a sweep, a bench run against a speculative server, or a measurement.",
    "gate": "No gate: add a plan (its thresholds) or a gate decision (alphagate gate --json).",
    "explain": "No explanation of the tail: add alphagate explain --json of a bench A/B.",
    "assumptions": "",
    "reproduce": "",
}

_BUILDERS: dict[str, Callable[[ReportInputs], list[Block]]] = {
    "verdict": verdict_section,
    "speedup": speedup_section,
    "itl": itl_section,
    "itl-cdf": cdf_section,
    "alpha": alpha_section,
    "acceptance-length": length_section,
    "gate": gate_section,
    "explain": explain_section,
    "assumptions": assumptions_section,
    "reproduce": reproduce_section,
}


def _summary(inp: ReportInputs) -> tuple[str, ...]:
    out = []
    for pi in inp.of(PlanInput):
        out.append(f"plan at concurrency {pi.plan.concurrency}: {pi.plan.verdict.upper()}")
    for gi in inp.of(GateInput):
        out.append(f"gate: {gi.result.decision.upper()}")
    for bi in inp.of(BenchInput):
        out.append(f"bench run {bi.result.run_id}")
    for si in inp.of(SweepInput):
        d = si.result.deployment_detail
        out.append(f"simulated: {d.model} on {d.gpu}")
    return tuple(out)


def build_page(inp: ReportInputs) -> Page:
    """Every section, in order, from whatever the inputs hold."""
    sections = tuple(
        Section(id=sid, title=title, blocks=tuple(_BUILDERS[sid](inp)), absent=_ABSENT[sid])
        for sid, title in SECTIONS
    )
    return Page(
        title="Speculative decoding: should it ship?",
        summary=_summary(inp),
        sections=sections,
        missing=tuple(inp.missing),
        sources=tuple(i.source for i in inp.inputs),
    )
