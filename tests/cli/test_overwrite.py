"""No output overwrites an input: every verb that reads files and writes one refuses, before any
work, an output path that resolves to one of its inputs — or to a bench summary's records,
symlinks followed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import Cli


@pytest.fixture
def summary(tmp_path: Path) -> Path:
    """A bench run's summary and records (contents do not matter: the refusal comes first)."""
    d = tmp_path / "run"
    d.mkdir()
    (d / "summary.json").write_text(json.dumps({"schema": "alphagate.results/v1", "verb": "bench"}))
    (d / "requests.jsonl").write_text("{}\n")
    return d / "summary.json"


def _refused(cli: Cli, args: list[str], victim: Path) -> None:
    before = victim.read_bytes()
    r = cli.run(*args)
    assert r.exit_code == 2, r.output
    assert "would overwrite the input" in r.output and "Traceback" not in r.output
    assert victim.read_bytes() == before


def test_gate_and_plan_never_write_over_their_inputs(
    cli: Cli, summary: Path, tmp_path: Path
) -> None:
    records = summary.with_name("requests.jsonl")
    link = tmp_path / "link.json"
    link.symlink_to(summary)
    for out, victim in ((summary, summary), (records, records), (link, summary)):
        _refused(
            cli, ["gate", "--min-alpha", "0.5", "--bench", str(summary), "--out", str(out)], victim
        )
    _refused(
        cli,
        ["plan", "--class", "chat:1", "-c", "4", "--alpha-from", str(summary), "--out",
         str(summary.with_suffix(".md"))],
        summary,
    )  # fmt: skip
    _refused(
        cli, ["plan", "--class", "chat:1", "-c", "4", "--alpha-from", str(summary), "--out", str(summary)],
        summary,
    )  # fmt: skip


def test_report_bench_calibrate_and_measure_never_write_over_their_inputs(
    cli: Cli, summary: Path, tmp_path: Path
) -> None:
    records = summary.with_name("requests.jsonl")
    _refused(cli, ["report", str(summary), "--out", str(summary)], summary)
    _refused(cli, ["report", str(summary), "--out", str(records)], records)
    # a run's records replayed as the dataset, written back into the same folder
    _refused(
        cli,
        ["bench", "--url", "http://127.0.0.1:9", "--dataset", str(records), "--out",
         str(summary.parent)],
        records,
    )  # fmt: skip
    _refused(cli, ["calibrate", str(summary), "--out", str(summary)], summary)
    _refused(
        cli, ["calibrate", str(summary), "--bench-out", str(summary.parent), "--out",
              str(tmp_path / "p.json")], records,
    )  # fmt: skip
    _refused(cli, ["measure", "bench", str(summary), "--out", str(records)], records)
    scrape = tmp_path / "before.txt"
    scrape.write_text("# a scrape\n")
    _refused(cli, ["measure", "live", "--from-file", str(scrape), "--from-file", str(scrape),
                   "--out", str(scrape)], scrape)  # fmt: skip
    log = tmp_path / "v.log"
    log.write_text("INFO a log line\n")
    _refused(cli, ["measure", "logs", str(log), "--out", str(log)], log)
    _refused(cli, ["measure", "offline", "--log", str(records), "--target", str(tmp_path),
                   "--drafter", "ngram", "--out", str(records)], records)  # fmt: skip
    _refused(cli, ["measure", "offline", "--log", str(records), "--target", str(tmp_path),
                   "--drafter", "ngram", "--checkpoint", str(records)], records)  # fmt: skip
