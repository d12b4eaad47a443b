"""`alphagate explain`: a bench A/B's files in, the tail taken apart and the remedies out — as
tables, as JSON (``alphagate.results/v1``), and as a section of ``report``; bad input refused
with a message naming what is wrong (exit 2)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from alphagate.bench.records import RequestRecord
from alphagate.cli import VERBS
from alphagate.specs import DeploymentConfig
from tests.conftest import Cli
from tests.explain.simulated import Side, Traffic, simulated_ab

DEP = DeploymentConfig(model="llama-3.1-8b", gpu="a100-80gb")
FLAGS = ["--model", "llama-3.1-8b", "--gpu", "a100-80gb", "--bootstrap", "60"]


@pytest.fixture(scope="module")
def ab(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A simulated A/B written as bench writes one: summary.json and requests.jsonl."""
    folder = tmp_path_factory.mktemp("ab")
    result, records = simulated_ab(
        Side(0, DEP), Side(4, DEP, (0.4, 0.95, 0.95, 0.95)), Traffic(8, 40, (30, 60), 48, warmup=8)
    )
    result = result.model_copy(update={"records_file": "requests.jsonl"})
    (folder / "summary.json").write_text(json.dumps(result.payload()))
    (folder / "requests.jsonl").write_text(
        "".join(r.model_dump_json(exclude_defaults=False) + "\n" for r in records)
    )
    return folder / "summary.json"


def test_explain_is_a_verb(cli: Cli) -> None:
    assert "explain" in VERBS
    r = cli.run("explain", "--help")
    assert r.exit_code == 0 and "BENCH_AB_SUMMARY" in r.output and "--metrics" in r.output


def test_tables_name_the_mechanisms_and_print_the_remedies_whole(cli: Cli, ab: Path) -> None:
    r = cli.run("explain", str(ab), *FLAGS)
    assert r.exit_code == 0, r.output
    for text in ("rejection streaks", "verify-step growth", "Remedies, ranked", "c8 remedy 1"):
        assert text in r.output
    flags = [ln for ln in r.output.splitlines() if ln.startswith("  flags: ")]
    assert flags
    for line in flags:  # each on one line, as the shell takes it
        args = shlex.split(line.removeprefix("  flags: "))
        assert args[0].startswith("--")
    serve = [ln.strip() for ln in r.output.splitlines() if ln.strip().startswith("vllm serve ")]
    assert serve and all("--speculative-config" in s or "--kv-cache" in s for s in serve)


def test_json_and_out(cli: Cli, ab: Path, tmp_path: Path) -> None:
    out = tmp_path / "explain.json"
    d = cli.json("explain", str(ab), *FLAGS, "--out", str(out))
    assert d["verb"] == "explain" and json.loads(out.read_text()) == d
    (lv,) = d["levels"]
    itl = next(m for m in lv["metrics"] if m["metric"] == "itl_per_token_p99_ms")
    assert itl["factors"][0]["mechanisms"] == ["rejection"]
    assert lv["k"] == 4 and lv["remedies"] and lv["worst"]


def test_the_report_shows_the_shares_and_the_worst_requests(
    cli: Cli, ab: Path, tmp_path: Path
) -> None:
    explained = tmp_path / "explain.json"
    explained.write_text(json.dumps(cli.json("explain", str(ab), *FLAGS)))
    page = tmp_path / "report.html"
    d = cli.json("report", str(explained), "--out", str(page))
    assert "explain" in d["sections"] and "explain" not in d["empty_sections"]
    html = page.read_text()
    section = html[html.index('<section id="explain"') :]
    section = section[: section.index("</section>")]
    assert "what raised it" in section and "worst candidate requests" in section
    assert section.count("<svg") >= 2 and "rejection streaks" in section


def _copy(ab: Path, tmp: Path, edit: str) -> Path:
    folder = tmp / edit
    folder.mkdir()
    summary = json.loads(ab.read_text())
    lines = (ab.parent / "requests.jsonl").read_text().splitlines()
    if edit == "no-baseline":
        summary["levels"] = [lv for lv in summary["levels"] if lv["target"] == "candidate"]
        summary["comparisons"] = []
    if edit == "no-records":
        lines = []
    if edit == "not-speculative":
        recs = [RequestRecord.model_validate_json(x) for x in lines]
        lines = [
            r.model_copy(
                update={"chunk_tokens": [1] * len(r.chunk_tokens), "spec": None}
            ).model_dump_json()
            for r in recs
        ]
        for lv in summary["levels"]:
            lv["request_acceptance"] = None
    (folder / "summary.json").write_text(json.dumps(summary))
    if lines:
        (folder / "requests.jsonl").write_text("\n".join(lines) + "\n")
    return folder / "summary.json"


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ("no-baseline", "not an A/B"),
        ("no-records", "requests.jsonl is missing"),
        ("not-speculative", "does not look speculative"),
    ],
)
def test_bad_input_is_refused_naming_it(
    cli: Cli, ab: Path, tmp_path: Path, edit: str, message: str
) -> None:
    r = cli.run("explain", str(_copy(ab, tmp_path, edit)), *FLAGS)
    assert r.exit_code == 2, r.output
    assert message in r.output and "Traceback" not in r.output


def test_bad_flags_are_refused(cli: Cli, ab: Path, tmp_path: Path) -> None:
    r = cli.run("explain", str(ab), *FLAGS, "--level", "c99")
    assert r.exit_code == 2 and "no level c99" in r.output and "--level" in r.output
    r = cli.run("explain", str(tmp_path / "missing.json"), *FLAGS)
    assert r.exit_code == 2 and "missing.json" in r.output
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"schema": "alphagate.results/v1", "verb": "model speedup"}))
    r = cli.run("explain", str(plan), *FLAGS)
    assert r.exit_code == 2 and "Traceback" not in r.output
    scrape = tmp_path / "metrics.txt"
    scrape.write_text("# nothing here\n")
    r = cli.run("explain", str(ab), *FLAGS, "--metrics", str(scrape))
    assert r.exit_code == 2 and "--metrics" in r.output
    r = cli.run("explain", str(ab), *FLAGS, "--out", str(ab))
    assert r.exit_code == 2 and re.search(r"--out", r.output)


def test_saved_scrapes_give_the_acceptance_when_the_run_has_none(cli: Cli, tmp_path: Path) -> None:
    """No per-request counts, no counters in the summary: α by position comes from the saved
    /metrics scrapes (before and after), not from the chunks."""
    from tests.mock_servers import exposition

    folder = _copy_bare(tmp_path)
    before, after = tmp_path / "before.txt", tmp_path / "after.txt"
    before.write_text(exposition(0, 0, 0, [0, 0, 0, 0]))
    # 1,000 steps: position 1 accepted 400 times, then 380, 361, 343 (α 0.4, 0.95, 0.95, 0.95)
    after.write_text(exposition(1000, 4000, 1484, [400, 380, 361, 343]))
    d = cli.json("explain", str(folder), *FLAGS, "--metrics", str(before), "--metrics", str(after))
    (lv,) = d["levels"]
    assert lv["alpha_source"] == "the saved /metrics scrapes"
    assert lv["classes"]["default"] == pytest.approx([400 / 1000, 380 / 400, 361 / 380, 343 / 361])
    bare = cli.json("explain", str(folder), *FLAGS)
    assert bare["levels"][0]["alpha_source"] == "the sizes of the streamed chunks"


def _copy_bare(tmp: Path) -> Path:
    """A simulated A/B whose candidate reported no acceptance of any kind."""
    result, records = simulated_ab(
        Side(0, DEP), Side(4, DEP, (0.4, 0.95, 0.95, 0.95)), Traffic(8, 40, (30, 60), 48, warmup=8)
    )
    levels = [lv.model_copy(update={"request_acceptance": None}) for lv in result.levels]
    result = result.model_copy(update={"levels": levels, "records_file": "requests.jsonl"})
    (tmp / "summary.json").write_text(json.dumps(result.payload()))
    (tmp / "requests.jsonl").write_text(
        "".join(r.model_copy(update={"spec": None}).model_dump_json() + "\n" for r in records)
    )
    return tmp / "summary.json"
