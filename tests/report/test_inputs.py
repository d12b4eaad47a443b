"""Results files read back for the report: every verb's record, and a clear refusal of bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from alphagate.core.errors import ConfigError
from alphagate.report.inputs import (
    BenchInput,
    GateInput,
    MeasureInput,
    ModelInput,
    PlanInput,
    SweepInput,
    parse_records,
    parse_results,
)


def test_every_verb_reads_back_as_its_record(results: dict[str, Path]) -> None:
    kinds = {name: type(parse_results(str(p), p.read_text())) for name, p in results.items()}
    assert kinds == {
        "sweep": SweepInput,
        "plan": PlanInput,
        "plan_twin": PlanInput,
        "table": ModelInput,
        "speedup": ModelInput,
        "bench": BenchInput,
        "measure": MeasureInput,
        "gate": GateInput,
    }
    plan = parse_results("plan.json", results["plan"].read_text())
    assert (
        isinstance(plan, PlanInput) and plan.plan.concurrency == 64 and plan.source == "plan.json"
    )


def _refused(text: str) -> str:
    with pytest.raises(ConfigError) as err:
        parse_results("x.json", text)
    msg = str(err.value)
    assert msg.startswith("x.json: "), msg
    return msg


def test_another_schema_or_version_is_refused_by_name() -> None:
    assert "alphagate.results/v2" in _refused('{"schema": "alphagate.results/v2", "verb": "plan"}')
    assert "another version" in _refused('{"schema": "alphagate.results/v2", "verb": "plan"}')
    assert "older alphagate" in _refused('{"schema": "alphagate.bench/v1"}')
    assert "not an alphagate results schema" in _refused('{"schema": "guidellm/1", "verb": "x"}')
    assert "no 'schema'" in _refused('{"backend": "vllm", "spec_decode_acceptance_rate": 51.0}')
    assert "no 'verb'" in _refused('{"schema": "alphagate.results/v1"}')
    assert "'frobnicate'" in _refused('{"schema": "alphagate.results/v1", "verb": "frobnicate"}')


def test_truncated_and_empty_files_say_so(results: dict[str, Path]) -> None:
    text = results["plan"].read_text()
    msg = _refused(text[: len(text) // 2])
    assert "not valid JSON" in msg and "truncated" in msg and "line" in msg
    assert "empty" in _refused("  \n")
    assert "one JSON object" in _refused("[1, 2]")


def test_an_error_object_is_not_results() -> None:
    err = {"schema": "alphagate.results/v1", "error": {"message": "--alpha: bad value"}}
    assert "holds an error" in _refused(json.dumps(err)) and "--alpha" in _refused(json.dumps(err))


def test_a_record_with_a_bad_field_names_the_field(results: dict[str, Path]) -> None:
    plan = json.loads(results["plan"].read_text())
    plan["concurrency"] = "many"
    msg = _refused(json.dumps(plan))
    assert "not a valid plan" in msg and "concurrency" in msg


def test_an_empty_sweep_is_refused(results: dict[str, Path]) -> None:
    sweep = json.loads(results["sweep"].read_text())
    sweep["rows"], sweep["cells"] = [], []
    assert "the sweep is empty" in _refused(json.dumps(sweep))


def test_records_of_the_run_only_and_bad_lines_named(results: dict[str, Path]) -> None:
    summary = json.loads(results["bench"].read_text())
    path = results["bench"].with_name("requests.jsonl")
    lines = path.read_text().splitlines()
    records, notes = parse_records("r.jsonl", "\n".join(lines), summary["run_id"])
    assert len(records) == len(lines) and notes == []
    other = json.loads(lines[0])
    other["run_id"] = "another-run"
    text = "\n".join([*lines, json.dumps(other), '{"run_id": "x"}'])
    with pytest.raises(ConfigError, match=rf"r\.jsonl:{len(lines) + 2}: not a valid request"):
        parse_records("r.jsonl", text, summary["run_id"])
    records, notes = parse_records("r.jsonl", text, summary["run_id"], partial=True)
    assert len(records) == len(lines)  # the other run's line is not this run's
    assert len(notes) == 1 and f"r.jsonl:{len(lines) + 2}" in notes[0]
    with pytest.raises(ConfigError, match="no request record of run 'nope'"):
        parse_records("r.jsonl", text, "nope", partial=True)
