"""A bench run as CSV: every cell reads back to its JSON value (None empty, floats in full, lists
as JSON), sub-records flattened to ``<field>_<sub-field>`` columns, and each request's latencies
and SLO verdict beside its fields."""

from __future__ import annotations

import csv
import io
import json
import math

from alphagate.bench.export import cell, level_rows, request_rows, to_csv
from alphagate.bench.records import BenchResult, compare_levels, summarize_level
from alphagate.bench.slo import parse_slo
from tests.records import streamed


def test_each_cell_reads_back_to_its_json_value() -> None:
    assert cell(None) == "" and cell(math.nan) == "" and cell(math.inf) == ""
    assert (cell(True), cell(False)) == ("true", "false")
    assert cell(0.1 + 0.2) == "0.30000000000000004"  # every digit: float(cell) round-trips
    assert cell(3) == "3" and cell("a,b") == "a,b"
    assert cell([0.5, math.nan, {"x": 1}]) == '[0.5,null,{"x":1}]'
    assert cell({"http_500": 2}) == '{"http_500":2}'


def _rows_back(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def test_request_rows_carry_the_fields_the_latencies_and_the_verdict() -> None:
    good = streamed([0.010, 0.020, 0.030], id=0, send_s=1.0, scheduled_s=0.999)
    slow = streamed([0.200, 0.210], id=1)
    failed = streamed([], id=2, error_type="http_500", error_message="boom")
    rows = _rows_back(to_csv(request_rows([good, slow, failed], parse_slo("ttft_ms=100"))))
    assert [r["id"] for r in rows] == ["0", "1", "2"]
    assert json.loads(rows[0]["chunk_times_s"]) == [0.01, 0.02, 0.03]
    assert float(rows[0]["ttft_ms"]) == good.ttft_s * 1e3  # type: ignore[operator]
    assert float(rows[0]["tpot_ms"]) == (0.030 - 0.010) / 2 * 1e3  # (e2e − ttft) ÷ (tokens − 1)
    assert float(rows[0]["send_lag_ms"]) == (1.0 - 0.999) * 1e3  # in full: it reads back exactly
    assert rows[1]["send_lag_ms"] == ""  # sent without a schedule
    assert [r["good"] for r in rows] == ["true", "false", "false"]
    assert [r["missed"] for r in rows] == ["[]", '["ttft_ms"]', ""]
    assert rows[2]["error_type"] == "http_500" and rows[2]["ttft_ms"] == ""
    assert "good" not in request_rows([good])[0]  # no SLO, no verdict


def test_level_rows_flatten_the_overall_statistics() -> None:
    base = [streamed([0.01, 0.02], id=i, target="baseline") for i in range(4)]
    cand = [streamed([0.01, 0.015], id=i, target="candidate") for i in range(4)]
    levels = [
        summarize_level("baseline", "http://a", "c1", 1, None, base, None),
        summarize_level("candidate", "http://b", "c1", 1, None, cand, None),
    ]
    result = BenchResult(run_id="r", config={}, levels=levels, comparisons=compare_levels(levels))
    rows = _rows_back(to_csv(level_rows(result)))
    assert [(r["run_id"], r["target"], r["level"]) for r in rows] == [
        ("r", "baseline", "c1"),
        ("r", "candidate", "c1"),
    ]
    for row, lv in zip(rows, result.payload()["levels"], strict=True):
        assert int(row["completed"]) == lv["overall"]["completed"] == 4
        assert float(row["ttft_ms_p99"]) == lv["overall"]["ttft_ms"]["p99"]
        assert "acceptance_draft_acceptance_rate" not in row  # no counters were read


def test_the_header_is_every_column_in_order_of_first_appearance() -> None:
    text = to_csv([{"a": "1", "b": "2"}, {"c": "3", "a": "4"}])
    assert text == "a,b,c\n1,2,\n4,,3\n"
