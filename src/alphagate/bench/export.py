"""CSV renderings of a bench run: one row per request, one row per level (target × load).

The same records as ``requests.jsonl`` and ``summary.json``, flattened: a sub-record's fields
become columns named ``<field>_<sub-field>`` (``ttft_ms_p99``, ``goodput_good``,
``acceptance_draft_acceptance_rate``); lists and open-ended maps (``chunk_times_s``,
``failed_by_type``) are JSON text in one cell; None is an empty cell; floats are written in full
(``repr``), so that every cell reads back to the JSON value. Request rows add each request's
latencies as an SLO sees them (:func:`alphagate.bench.slo.request_latencies_ms`), its send lag
and, under an SLO, whether it was good. Pure: records in, text out (the CLI writes the files).
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterable, Sequence
from typing import get_args

from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from alphagate.bench.records import BenchResult, RequestRecord
from alphagate.bench.slo import SLO, missed_bounds, request_latencies_ms

__all__ = ["cell", "level_rows", "request_rows", "to_csv"]

Row = dict[str, str]


def cell(value: object) -> str:
    """One CSV cell: '' for None (and non-finite floats), true/false, full-precision numbers,
    JSON for lists and maps."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else ""
    if isinstance(value, int | str):
        return str(value)
    return json.dumps(_finite(to_jsonable_python(value)), ensure_ascii=False, separators=(",", ":"))


def _finite(obj: object) -> object:
    """Non-finite floats → None, recursively (JSON has no NaN)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_finite(v) for v in obj]
    return obj


def _holds_record(annotation: object) -> bool:
    args = get_args(annotation) or (annotation,)
    return any(isinstance(a, type) and issubclass(a, BaseModel) for a in args)


def _flatten(record: BaseModel, prefix: str, out: Row, skip: frozenset[str] = frozenset()) -> None:
    """Scalars as cells, sub-records as ``<name>_<field>`` columns (none when the sub-record is
    absent: its columns come from the rows that have it)."""
    for name, field in type(record).model_fields.items():
        if name in skip:
            continue
        value = getattr(record, name)
        if isinstance(value, BaseModel):
            _flatten(value, f"{prefix}{name}_", out)
        elif value is not None or not _holds_record(field.annotation):
            out[f"{prefix}{name}"] = cell(value)


def request_rows(records: Iterable[RequestRecord], slo: SLO | None = None) -> list[Row]:
    """One row per request: every field of the record, then its per-request latencies."""
    rows = []
    for rec in records:
        row: Row = {}
        _flatten(rec, "", row)
        for key, value in request_latencies_ms(rec).items():
            row[key] = cell(value)
        lag = None if rec.scheduled_s is None else (rec.send_s - rec.scheduled_s) * 1e3
        row["send_lag_ms"] = cell(lag)
        if slo is not None:
            missed = missed_bounds(rec, slo)
            row["good"] = cell(missed is not None and not missed)
            row["missed"] = cell(missed)
        rows.append(row)
    return rows


_LEVEL_PARTS = frozenset({"overall", "classes", "goodput", "acceptance"})


def level_rows(result: BenchResult) -> list[Row]:
    """One row per level and target: the overall statistics, acceptance and goodput (per-class
    statistics stay in ``summary.json``)."""
    rows = []
    for lv in result.levels:
        row: Row = {"run_id": result.run_id}
        _flatten(lv, "", row, skip=_LEVEL_PARTS)
        _flatten(lv.overall, "", row)
        for name in ("goodput", "acceptance"):
            part = getattr(lv, name)
            if part is not None:
                _flatten(part, f"{name}_", row)
        rows.append(row)
    return rows


def to_csv(rows: Sequence[Row]) -> str:
    """Rows as CSV text; the header is every column in order of first appearance."""
    columns = list(dict.fromkeys(k for row in rows for k in row))
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, restval="", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()
