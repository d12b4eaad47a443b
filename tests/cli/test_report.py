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
    # every section but explain's, which reads an `alphagate explain --json` result
    # (tests/cli/test_explain.py renders it)
    assert d["empty_sections"] == ["explain"] and d["missing"] == []
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


@pytest.mark.slow
def test_every_reproduce_command_runs_as_printed(tmp_path: Path) -> None:
    """The report's "Produce the inputs" commands, taken from the page and run in a shell, with
    only the twins' host and port changed (the twins of the first run are gone): each exits 0
    and writes the file the page read."""
    import html as html_lib
    import re
    import subprocess
    import sys

    from alphagate.core.traffic import TrafficClass
    from alphagate.specs import DeploymentConfig, WorkloadConfig
    from alphagate.twin.config import TwinConfig
    from tests.servers import twin

    def run(line: str) -> None:
        r = subprocess.run(
            line.replace("alphagate ", f"{sys.executable} -m alphagate ", 1),
            shell=True, cwd=tmp_path, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert r.returncode == 0, f"{line}\n{r.stdout}{r.stderr}"

    wl = WorkloadConfig(classes=(TrafficClass(name="a", share=1.0, alpha=0.7),))
    dep = DeploymentConfig(model="llama-3.1-8b")

    def twins() -> tuple[object, object]:
        return (
            twin(TwinConfig(deployment=dep, workload=wl, k=0, time_scale=0.0)),
            twin(TwinConfig(deployment=dep, workload=wl, k=3, time_scale=0.0)),
        )

    b_cm, c_cm = twins()
    with b_cm as (b, _), c_cm as (c, _):  # type: ignore[attr-defined]
        run(f"alphagate bench --baseline-url {b} --candidate-url {c} -c 2 -n 8 --repeats 2 "
            "--dataset synthetic:in=16,out=8 --out ab --no-progress")  # fmt: skip
    run("alphagate plan --model llama-3.1-8b --class chat:1:0.7 -c 16 --json > plan.json")
    run(
        "alphagate simulate --model llama-3.1-8b --k 2 --alpha 0.7 -c 1,4 --num-requests 40 --json > sim.json"
    )
    run("alphagate model speedup --alpha 0.7 --k 3 --json > speedup.json")
    run("alphagate report plan.json ab/summary.json sim.json speedup.json --out page.html")
    page = (tmp_path / "page.html").read_text()
    block = re.search(
        r'<div class="label">Produce the inputs \(rebuilt from the files\)</div><pre><code>(.*?)</code>',
        page,
        flags=re.S,
    )
    assert block is not None
    lines = [html_lib.unescape(x) for x in block.group(1).splitlines() if x.strip()]
    assert [ln.split()[1] for ln in lines] == ["plan", "bench", "simulate", "model"]
    for f in ("plan.json", "ab/summary.json", "sim.json", "speedup.json"):
        (tmp_path / f).unlink()
    b_cm, c_cm = twins()
    with b_cm as (b2, _), c_cm as (c2, _):  # type: ignore[attr-defined]
        for line in lines:
            run(line.replace(b, b2).replace(c, c2))
    for f in ("plan.json", "ab/summary.json", "sim.json", "speedup.json"):
        assert (tmp_path / f).is_file(), f
    rerun = json.loads((tmp_path / "ab" / "summary.json").read_text())
    assert rerun["config"]["repeats"] == 2 and rerun["config"]["dataset"] == "synthetic:in=16,out=8"
