"""`alphagate report`: the page from results files, and bad input refused with a message that
names the file and what is missing (exit 2), or rendered partially when asked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from alphagate.report.page import SECTIONS
from tests.conftest import Cli

SECTION_IDS = [sid for sid, _ in SECTIONS]


def _files(results: dict[str, Path], *names: str) -> list[str]:
    return [str(results[n]) for n in names]


def test_writes_one_page_from_every_kind_of_result(
    cli: Cli,
    results: dict[str, Path],
    tmp_path: Path,
) -> None:
    out = tmp_path / "page" / "report.html"
    r = cli.run("report", *_files(results, "plan", "bench", "sweep", "table"), "--out", str(out))
    assert r.exit_code == 0, r.output
    assert f"report written to {out}" in r.output
    for sid in SECTION_IDS:
        assert sid in r.output
    html = out.read_text()
    assert html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>")
    assert str(results["bench"].with_name("requests.jsonl")) in html  # the records it read
    d = cli.json("report", *_files(results, "plan", "bench"), "--out", str(out))
    assert d["verb"] == "report" and d["sections"] == SECTION_IDS
    assert d["empty_sections"] == [] and d["missing"] == []
    assert d["inputs"] == _files(results, "plan", "bench")


def _bench_without_records(results: dict[str, Path], tmp_path: Path) -> Path:
    folder = tmp_path / "copied-bench"
    folder.mkdir()
    summary = json.loads(results["bench"].read_text())
    summary["records_file"] = str(folder / "requests.jsonl")
    (folder / "summary.json").write_text(json.dumps(summary))
    return folder / "summary.json"


def test_a_bench_summary_without_its_records_is_refused_or_rendered_partially(
    cli: Cli,
    results: dict[str, Path],
    tmp_path: Path,
) -> None:
    summary = _bench_without_records(results, tmp_path)
    out = tmp_path / "report.html"
    r = cli.run("report", str(summary), str(results["plan"]), "--out", str(out))
    assert r.exit_code == 2
    assert f"{summary}: its requests.jsonl is missing" in r.output and "--partial" in r.output
    assert "Traceback" not in r.output and not out.exists()

    r = cli.run("report", str(summary), str(results["plan"]), "--out", str(out), "--partial")
    assert r.exit_code == 0, r.output
    html = out.read_text()
    assert "Partial report" in html and "its requests.jsonl is missing" in html
    assert "its requests.jsonl was not read, so the measured ITL distribution is missing" in html


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (
            '{"schema": "alphagate.results/v2", "verb": "plan"}',
            "another version of the results schema",
        ),
        ('{"schema": "alphagate.results/v1", "verb": "simulate", "rows": [', "truncated"),
        ('{"date": "2026", "backend": "vllm"}', "not an alphagate results file"),
        ("\x89PNG\x00\x00", "not valid JSON"),
    ],
)
def test_bad_files_are_named(
    cli: Cli,
    results: dict[str, Path],
    tmp_path: Path,
    content: str,
    expected: str,
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    r = cli.run("report", str(results["plan"]), str(bad), "--out", str(tmp_path / "r.html"))
    assert r.exit_code == 2 and f"{bad}: " in r.output and expected in r.output, r.output
    assert "Traceback" not in r.output


def test_an_empty_sweep_and_a_missing_file(
    cli: Cli,
    results: dict[str, Path],
    tmp_path: Path,
) -> None:
    sweep = json.loads(results["sweep"].read_text())
    sweep["cells"] = []
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps(sweep))
    missing = tmp_path / "nope.json"
    r = cli.run("report", str(empty), str(missing), "--out", str(tmp_path / "r.html"))
    assert r.exit_code == 2
    assert f"{empty}: the sweep is empty" in r.output and f"{missing}: not found" in r.output
    r = cli.run("report", str(empty), "--partial", "--out", str(tmp_path / "r.html"))
    assert r.exit_code == 2 and "nothing could be read" in r.output


def test_an_output_that_cannot_be_written(
    cli: Cli,
    results: dict[str, Path],
    tmp_path: Path,
) -> None:
    r = cli.run("report", str(results["plan"]), "--out", str(tmp_path))
    assert r.exit_code == 2 and "--out" in r.output and "a folder" in r.output


def test_the_report_command_reproduces_the_page(
    cli: Cli,
    results: dict[str, Path],
    tmp_path: Path,
) -> None:
    out = tmp_path / "r.html"
    r = cli.run("report", str(results["plan"]), "--out", str(out))
    assert r.exit_code == 0, r.output
    html = out.read_text()
    assert f"alphagate report {results['plan']} --out {out}" in html
    assert "alphagate plan --model llama-3.3-70b-fp8 --gpu h100 --dtype fp8" in html
    assert "--class chat:0.7:0.70 --class code:0.3 --concurrency 64 --peak-concurrency 256" in html
