"""Results files read back for ``alphagate report``: text in, one typed record per file out.

Every file is checked for the results schema, then read back through the record type of its verb
(``model_validate``), so that a file from another tool, another schema version, a truncated write
or an empty run is refused with a message that names the file and what is wrong in it. Pure: the
caller reads the files (only the CLI touches the disk) and passes their text.

Verbs read: ``simulate`` (:class:`~alphagate.sim.sweep.SweepResult`), ``plan``
(:class:`~alphagate.plan.records.Plan`), ``bench`` (:class:`~alphagate.bench.records.BenchResult`,
with the :class:`~alphagate.bench.records.RequestRecord` lines of its ``requests.jsonl``),
``measure …`` (:class:`~alphagate.measure.results.MeasureResult`), ``gate``
(:class:`~alphagate.gate.evaluate.GateResult`), ``explain``
(:class:`~alphagate.explain.records.ExplainResult`), every ``model …`` answer, and ``calibrate``
(shown as its fields).
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

from pydantic import BaseModel, Field, ValidationError

from alphagate.bench.records import BenchResult, RequestRecord
from alphagate.core.errors import ConfigError, invalid
from alphagate.core.records import RESULTS_SCHEMA, Frozen
from alphagate.explain.records import ExplainResult
from alphagate.gate.evaluate import GateResult
from alphagate.measure.results import MeasureResult
from alphagate.plan.records import Plan
from alphagate.sim.sweep import SweepResult
from alphagate.specs.memory import MemoryAnswer
from alphagate.theory.answers import (
    BlendAnswer,
    BreakevenAnswer,
    ConvertAnswer,
    OptimalKAnswer,
    RequiredAnswer,
    SpeedupAnswer,
    TableAnswer,
)

__all__ = [
    "BenchInput",
    "ExplainInput",
    "FieldsInput",
    "GateInput",
    "Input",
    "MeasureInput",
    "ModelInput",
    "PlanInput",
    "ReportInputs",
    "SweepInput",
    "parse_records",
    "parse_results",
]

ModelAnswer = (
    SpeedupAnswer
    | BreakevenAnswer
    | RequiredAnswer
    | OptimalKAnswer
    | BlendAnswer
    | ConvertAnswer
    | TableAnswer
    | MemoryAnswer
)
MODEL_ANSWERS: dict[str, type[BaseModel]] = {
    "model speedup": SpeedupAnswer,
    "model breakeven": BreakevenAnswer,
    "model required": RequiredAnswer,
    "model optimal-k": OptimalKAnswer,
    "model blend": BlendAnswer,
    "model convert": ConvertAnswer,
    "model table": TableAnswer,
    "model memory": MemoryAnswer,
}
#: Verbs whose results are shown as their fields.
FIELD_VERBS = ("calibrate",)
KNOWN = "simulate, plan, bench, model …, measure …, gate, explain, calibrate"

M = TypeVar("M", bound=BaseModel)


class SweepInput(Frozen):
    source: str = Field(description="the file, as given")
    result: SweepResult


class PlanInput(Frozen):
    source: str
    plan: Plan


class BenchInput(Frozen):
    source: str
    result: BenchResult
    records: list[RequestRecord] | None = Field(
        default=None, description="this run's lines of requests.jsonl; None when not read"
    )
    records_source: str | None = None


class MeasureInput(Frozen):
    source: str
    result: MeasureResult


class GateInput(Frozen):
    source: str
    result: GateResult


class ExplainInput(Frozen):
    source: str
    result: ExplainResult


class ModelInput(Frozen):
    source: str
    verb: str
    answer: ModelAnswer


class FieldsInput(Frozen):
    """A results file shown as its fields (``calibrate``)."""

    source: str
    verb: str
    fields: dict[str, Any]


Input = (
    SweepInput
    | PlanInput
    | BenchInput
    | MeasureInput
    | GateInput
    | ExplainInput
    | ModelInput
    | FieldsInput
)


class ReportInputs(Frozen):
    """Everything one report page shows, and what a partial page lacks."""

    inputs: list[Input]
    missing: list[str] = Field(
        default_factory=list, description="what could not be read (only with --partial)"
    )
    command: str | None = Field(default=None, description="the command that renders this page")
    produced_by: list[str] = Field(
        default_factory=list,
        description="commands that produced the inputs, when the caller knows them exactly",
    )

    def of(self, kind: type[Frozen]) -> list[Any]:
        return [i for i in self.inputs if isinstance(i, kind)]


def _unclosed(text: str) -> bool:
    """Whether JSON text stops inside a string or with a bracket still open: a cut-off write."""
    depth, in_string, escaped = 0, False, False
    for ch in text:
        if escaped:
            escaped = False
        elif in_string:
            escaped = ch == "\\"
            in_string = ch != '"'
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
    return in_string or depth > 0


def _load_json(source: str, text: str) -> dict[str, Any]:
    if not text.strip():
        raise ConfigError(f"{source}: the file is empty")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        hint = " — it ends before its last bracket closes (truncated?)" if _unclosed(text) else ""
        raise ConfigError(
            f"{source}: not valid JSON{hint} ({exc.msg}: line {exc.lineno}, column {exc.colno})"
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected one JSON object (an alphagate results file)")
    return data


def _check_schema(source: str, data: dict[str, Any]) -> str:
    schema = data.get("schema")
    if schema is None:
        raise ConfigError(
            f"{source}: no 'schema' field — not an alphagate results file (write one with an "
            "alphagate command's --json: simulate --json, plan --json, bench's summary.json)"
        )
    if schema == "alphagate.bench/v1":
        raise ConfigError(
            f"{source}: a bench summary from an older alphagate (schema alphagate.bench/v1); "
            "re-run bench"
        )
    if schema != RESULTS_SCHEMA:
        what = (
            "another version of the results schema"
            if str(schema).startswith("alphagate.results/")
            else "not an alphagate results schema"
        )
        raise ConfigError(
            f"{source}: schema {schema!r} is {what}; this alphagate reads {RESULTS_SCHEMA}"
        )
    if isinstance(data.get("error"), dict):
        msg = data["error"].get("message", "")
        raise ConfigError(f"{source}: holds an error, not results: {msg}")
    verb = data.get("verb")
    if not isinstance(verb, str) or not verb:
        raise ConfigError(
            f"{source}: no 'verb' field — which alphagate command wrote it is unknown"
        )
    return verb


def _body(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k not in ("schema", "verb")}


def _validated(model: type[M], data: dict[str, Any], source: str, what: str) -> M:
    """``data`` read back as ``model``; invalid data is a :class:`ConfigError` naming ``source``
    and the field at fault."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise invalid(source, what, exc) from None


def _sweep(source: str, data: dict[str, Any]) -> SweepInput:
    r = _validated(SweepResult, _body(data), source, "simulate result")
    if not r.rows or not r.cells:
        raise ConfigError(f"{source}: the sweep is empty (no load level or no cell was simulated)")
    return SweepInput(source=source, result=r)


def _plan(source: str, data: dict[str, Any]) -> PlanInput:
    p = _validated(Plan, data, source, "plan")
    if not p.rows:
        raise ConfigError(f"{source}: the plan has no predicted rows (no concurrency evaluated)")
    return PlanInput(source=source, plan=p)


def _bench(source: str, data: dict[str, Any]) -> BenchInput:
    b = _validated(BenchResult, data, source, "bench summary")
    if not b.levels:
        raise ConfigError(f"{source}: the bench summary has no levels (no request was measured)")
    return BenchInput(source=source, result=b)


def parse_results(source: str, text: str) -> Input:
    """One results file's text → its typed record. Raises :class:`ConfigError` naming ``source``.

    A bench summary comes back without its records; read them with :func:`parse_records`.
    """
    data = _load_json(source, text)
    verb = _check_schema(source, data)
    if verb == "simulate":
        return _sweep(source, data)
    if verb == "plan":
        return _plan(source, data)
    if verb == "bench":
        return _bench(source, data)
    if verb.startswith("measure "):
        m = _validated(MeasureResult, data, source, f"'{verb}' result")
        return MeasureInput(source=source, result=m)
    if verb == "gate":
        return GateInput(
            source=source, result=_validated(GateResult, data, source, "gate decision")
        )
    if verb == "explain":
        return ExplainInput(
            source=source, result=_validated(ExplainResult, data, source, "explain result")
        )
    if verb in MODEL_ANSWERS:
        answer = _validated(MODEL_ANSWERS[verb], _body(data), source, f"'{verb}' answer")
        return ModelInput.model_validate({"source": source, "verb": verb, "answer": answer})
    if verb in FIELD_VERBS:
        return FieldsInput(source=source, verb=verb, fields=_body(data))
    raise ConfigError(f"{source}: verb {verb!r} is not one report reads ({KNOWN})")


def parse_records(
    source: str, text: str, run_id: str, *, partial: bool = False
) -> tuple[list[RequestRecord], list[str]]:
    """The lines of ``requests.jsonl`` that belong to ``run_id``, and notes on lines skipped.

    A line that is not a request record is an error naming ``source:LINE``; with ``partial`` it is
    skipped and noted instead. A file without a record of the run is an error either way.
    """
    records: list[RequestRecord] = []
    notes: list[str] = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rec = RequestRecord.model_validate_json(line)
        except ValidationError as exc:
            err = invalid(f"{source}:{n}", "request record", exc)
            if not partial:
                raise err from None
            notes.append(f"{err} — skipped")
            continue
        if rec.run_id == run_id:
            records.append(rec)
    if not records:
        raise ConfigError(f"{source}: no request record of run {run_id!r}")
    return records, notes
