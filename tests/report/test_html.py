"""The page: every section in order, self-contained (no script, nothing fetched), escaped text,
and a partial page that says what is missing."""

from __future__ import annotations

import re
from pathlib import Path

from alphagate.report.blocks import Figure, Table, Verdict
from alphagate.report.html import render_report
from alphagate.report.inputs import Input, ReportInputs, parse_results
from alphagate.report.page import SECTIONS, build_page

#: The order of issue #14: verdict and config, speedup, ITL, ITL CDF, α by position, acceptance
#: length, gate, (issue #28) why the tail moved, assumptions, commands.
READING_ORDER = [
    "verdict",
    "speedup",
    "itl",
    "itl-cdf",
    "alpha",
    "acceptance-length",
    "gate",
    "explain",
    "assumptions",
    "reproduce",
]


def _inputs(results: dict[str, Path], *names: str, **extra: object) -> ReportInputs:
    items: list[Input] = [parse_results(f"{n}.json", results[n].read_text()) for n in names]
    return ReportInputs.model_validate({"inputs": items, **extra})


def test_every_section_in_the_order_a_reader_decides(results: dict[str, Path]) -> None:
    html = render_report(
        _inputs(results, "plan", "sweep", "table", "speedup", command="alphagate report …")
    )
    ids = re.findall(r'<section id="([^"]+)"', html)
    assert ids == READING_ORDER == [sid for sid, _ in SECTIONS]
    verdict = html[html.index('<section id="verdict"') : html.index('<section id="speedup"')]
    assert "GO" in verdict and "--speculative-config" in verdict
    assert html.count("<svg") >= 8


def test_self_contained(results: dict[str, Path]) -> None:
    html = render_report(_inputs(results, "plan", "sweep"))
    assert "<script" not in html.lower()
    assert not re.search(r'(src|href)="(https?:)?//', html)  # nothing fetched at view time
    assert not re.search(r"url\((https?:)?//", html)
    assert "<style>" in html and "<link" not in html


def test_a_section_without_data_says_what_would_fill_it(results: dict[str, Path]) -> None:
    page = build_page(_inputs(results, "table"))
    by_id = {s.id: s for s in page.sections}
    assert by_id["speedup"].blocks  # the closed-form chart
    assert not by_id["itl-cdf"].blocks and "requests.jsonl" in by_id["itl-cdf"].absent
    html = render_report(_inputs(results, "table"))
    assert "No latency distribution" in html and "no verdict" in html


def test_partial_page_lists_what_is_missing(results: dict[str, Path]) -> None:
    html = render_report(
        _inputs(results, "plan", missing=["bench/summary.json: its requests.jsonl is missing"])
    )
    assert 'id="partial"' in html and "Partial report" in html
    assert "bench/summary.json: its requests.jsonl is missing" in html
    assert 'id="partial"' not in render_report(_inputs(results, "plan"))


def test_text_from_the_files_is_escaped(results: dict[str, Path]) -> None:
    text = results["plan"].read_text().replace('"chat"', '"<b>chat</b>"')
    item = parse_results("plan.json", text)
    html = render_report(ReportInputs(inputs=[item]))
    assert "<b>chat</b>" not in html and "&lt;b&gt;chat&lt;/b&gt;" in html


def test_measurements_and_gate_decisions_have_their_place(results: dict[str, Path]) -> None:
    page = build_page(_inputs(results, "plan", "bench", "measure", "gate"))
    by_id = {s.id: s for s in page.sections}
    verdicts = [b for b in by_id["verdict"].blocks if isinstance(b, Verdict)]
    assert [v.title for v in verdicts] == [
        "Rollout plan — concurrency 64, peak 256",
        "Gate decision",
    ]
    gate_tables = [b for b in by_id["gate"].blocks if isinstance(b, Table)]
    assert gate_tables[0].title.startswith("Gate decision: ")
    assert gate_tables[0].header[:2] == ("rule", "value [95% interval]")
    keys = [b.chart.key for b in by_id["alpha"].blocks if isinstance(b, Figure)]
    assert keys[:2] == ["alpha_by_position_measure", "alpha_by_position_measured"]
