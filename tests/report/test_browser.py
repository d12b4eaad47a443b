"""The demo's report in a real browser: headless Chromium (Debian's ``chromium`` package, driven
by Playwright) opens it from ``file://`` — no console error, nothing fetched from anywhere else,
every figure drawn with a size, every section there — and a screenshot is kept under ``.cache/``
for people to look at. Skipped, with the reason, only where Chromium is not installed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from alphagate.report.page import SECTIONS

#: wall-clock behaviour: `make test` runs these alone (see the Makefile)
pytestmark = [pytest.mark.timing, pytest.mark.xdist_group("demo")]

REPO = Path(__file__).resolve().parents[2]
SCREENSHOTS = REPO / ".cache" / "report"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]


@pytest.fixture(scope="module")
def demo(demo_run: tuple[Path, str]) -> tuple[Path, str]:
    """``alphagate demo`` run end to end in an empty folder: (the folder, what it printed)."""
    return demo_run


def test_demo_saves_every_result_and_ends_with_the_report(demo: tuple[Path, str]) -> None:
    cwd, out = demo
    saved = cwd / "demo-output"
    for name in (
        "simulate.json",
        "model-table.json",
        "rollout-plan-c64.json",
        "rollout-plan-c256.json",
        "rollout-plan-c64.md",
        "bench/summary.json",
        "bench/requests.jsonl",
        "report.html",
    ):
        assert (saved / name).is_file(), name
    tail = out[out.rindex("The report") :]
    assert "demo-output/report.html" in tail and (saved / "report.html").resolve().as_uri() in tail
    html = (saved / "report.html").read_text()
    assert "alphagate demo" in html  # the command that reproduces it all
    assert "Rollout plan — concurrency 64, peak 256" in html
    verdict = json.loads((saved / "rollout-plan-c64.json").read_text())["verdict"]
    assert verdict.upper() in html


@pytest.mark.skipif(
    CHROMIUM is None, reason="headless Chromium is not installed (apt-get install chromium)"
)
def test_demo_report_in_headless_chromium(demo: tuple[Path, str]) -> None:
    from playwright.sync_api import ConsoleMessage, Request, sync_playwright

    report = demo[0] / "demo-output" / "report.html"
    errors: list[str] = []
    fetched: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})

            def on_console(m: ConsoleMessage) -> None:
                if m.type == "error":
                    errors.append(m.text)

            def on_request(r: Request) -> None:
                fetched.append(r.url)

            page.on("console", on_console)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("request", on_request)
            page.goto(report.as_uri(), wait_until="load")

            sections = page.eval_on_selector_all(
                "main > section",
                "els => els.map(e => ({id: e.id, h: e.getBoundingClientRect().height,"
                " title: e.querySelector('h2').textContent}))",
            )
            figures = page.eval_on_selector_all(
                "figure.chart",
                "els => els.map(e => { const s = e.querySelector('svg'); const r = s ?"
                " s.getBoundingClientRect() : {width: 0, height: 0};"
                " return {id: e.id, w: r.width, h: r.height,"
                " drawn: s ? s.querySelectorAll('path, use, text').length : 0}; })",
            )
            images = page.eval_on_selector_all(
                "img", "els => els.map(e => ({src: e.src.slice(0, 40), w: e.naturalWidth}))"
            )
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SCREENSHOTS / "demo-report.png"), full_page=True)
            page.screenshot(path=str(SCREENSHOTS / "demo-report-top.png"))
        finally:
            browser.close()

    assert errors == []
    assert fetched and all(u.startswith(("file://", "data:")) for u in fetched), fetched
    assert [s["id"] for s in sections] == [sid for sid, _ in SECTIONS]
    for s, (_, title) in zip(sections, SECTIONS, strict=True):
        assert s["h"] > 0 and title in s["title"]
    assert len(figures) >= 15
    for f in figures:
        assert f["w"] > 100 and f["h"] > 100 and f["drawn"] > 20, f
    assert all(i["w"] > 0 for i in images), images
    shot = (SCREENSHOTS / "demo-report.png").read_bytes()
    assert shot[:8] == b"\x89PNG\r\n\x1a\n"
