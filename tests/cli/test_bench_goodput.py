"""`alphagate bench --slo/--sweep/--format csv` against twins on 127.0.0.1.

Goodput is recounted here from ``requests.jsonl`` by another route (per-token ITL samples
expanded with ``np.repeat`` and numpy's inverted-CDF percentile, not the weighted quantile the
code uses); the knee search runs against twins whose SLO breaks at a load known in advance; the
CSV files are read back and compared cell by cell with the JSON records.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from alphagate.core.traffic import TrafficClass
from alphagate.specs import DeploymentConfig, WorkloadConfig
from alphagate.twin.config import TwinConfig
from tests.conftest import Cli
from tests.servers import bench_ab

#: wall-clock behaviour: `make test` runs these alone (see the Makefile)
pytestmark = pytest.mark.timing

WL = WorkloadConfig(classes=(TrafficClass(name="a", share=1.0, alpha=0.7),))


def _dep(max_num_seqs: int = 256) -> DeploymentConfig:
    return DeploymentConfig(model="llama-3.1-8b", weight_dtype="bf16", max_num_seqs=max_num_seqs)


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def _good(r: dict[str, Any], itl_bound: float, ttft_bound: float) -> bool:
    """The SLO test of one request, recomputed from its raw chunk times."""
    if r["error_type"] is not None or r["ttft_s"] is None:
        return False
    times, toks = np.asarray(r["chunk_times_s"]), np.asarray(r["chunk_tokens"])
    ok = r["ttft_s"] * 1e3 <= ttft_bound
    if times.size > 1:
        per_token = np.repeat(np.diff(times) / np.maximum(toks[1:], 1), np.maximum(toks[1:], 1))
        ok = ok and np.percentile(per_token, 99, method="inverted_cdf") * 1e3 <= itl_bound
    return bool(ok)


def _back(text: str, value: Any) -> Any:
    """A CSV cell read back as the JSON value it must equal."""
    if value is None:
        return None if text == "" else text
    if isinstance(value, bool):
        return {"true": True, "false": False}[text]
    if isinstance(value, int | float):
        return type(value)(float(text)) if isinstance(value, float) else int(text)
    if isinstance(value, str):
        return text
    return json.loads(text)


#: maps with open-ended keys: one JSON cell each (every other object is a sub-record)
OPEN_MAPS = {"failed_by_type", "first_error_by_type", "missed"}


def _flat(prefix: str, obj: dict[str, Any], out: dict[str, Any]) -> None:
    """summary.json's nested records flattened by the rule the CSV documents."""
    for key, value in obj.items():
        if isinstance(value, dict) and key not in OPEN_MAPS:
            _flat(f"{prefix}{key}_", value, out)
        else:
            out[f"{prefix}{key}"] = value


def test_goodput_equals_a_recount_and_csv_equals_json(cli: Cli, tmp_path: Path) -> None:
    base = TwinConfig(deployment=_dep(), workload=WL, k=0, time_scale=1.0, seed=4)
    cand = TwinConfig(deployment=_dep(), workload=WL, k=3, time_scale=1.0, seed=4)
    itl_bound, ttft_bound = 7.5, 25.0
    r = bench_ab(
        cli, base, cand, "--concurrency", "1,4", "-n", "16", "--warmup", "1",
        "--dataset", "synthetic:in=16,out=24",
        "--slo", f"itl_per_token_p99_ms={itl_bound},ttft_p99_ms={ttft_bound}",
        "--format", "csv", "--out", str(tmp_path),
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["slo"]["bounds_ms"] == {"itl_per_token_p99_ms": 7.5, "ttft_ms": 25.0}
    records = _records(tmp_path / "requests.jsonl")
    assert len(records) == 2 * 2 * 16
    by = {(lv["target"], lv["level"]): lv for lv in summary["levels"]}
    for (target, level), lv in by.items():
        mine = [x for x in records if x["target"] == target and x["level"] == level]
        measured = [x for x in mine if not x["warmup"]]
        good = [x for x in measured if _good(x, itl_bound, ttft_bound)]
        start = min(x["send_s"] for x in measured)
        end = max(x["send_s"] + (x["e2e_s"] or 0.0) for x in measured)
        g = lv["goodput"]
        assert (g["requests"], g["good"]) == (15, len(good)), (target, level)
        assert g["good_requests_per_s"] == pytest.approx(len(good) / (end - start))
        tokens = sum(x["output_tokens"] for x in good)
        assert g["good_output_tokens_per_s"] == pytest.approx(tokens / (end - start))
        assert g["meets_slo"] == (len(good) / 15 >= 0.99)
    for comp in summary["comparisons"]:
        b, c = (
            by[("baseline", comp["level"])]["goodput"],
            by[("candidate", comp["level"])]["goodput"],
        )
        if b["good"]:
            assert comp["goodput_ratio"] == pytest.approx(
                c["good_requests_per_s"] / b["good_requests_per_s"]
            )

    # requests.csv: every cell equals the JSON record's field; the verdict equals the recount
    rows = list(csv.DictReader(io.StringIO((tmp_path / "requests.csv").read_text())))
    assert len(rows) == len(records)
    for row, rec in zip(rows, records, strict=True):
        for key, value in rec.items():
            assert _back(row[key], value) == value, key
        assert row["good"] == ("true" if _good(rec, itl_bound, ttft_bound) else "false")
        assert float(row["ttft_ms"]) == pytest.approx(rec["ttft_s"] * 1e3)
    # levels.csv (and the CSV on stdout): every cell equals summary.json's value
    text = (tmp_path / "levels.csv").read_text()
    assert r.stdout == text
    level_rows = list(csv.DictReader(io.StringIO(text)))
    assert len(level_rows) == len(summary["levels"]) == 4
    for row, lv in zip(level_rows, summary["levels"], strict=True):
        flat: dict[str, Any] = {"run_id": summary["run_id"]}
        _flat("", {k: v for k, v in lv.items() if k not in ("overall", "classes")}, flat)
        _flat("", lv["overall"], flat)
        assert len(flat) > 50
        for key, value in flat.items():
            assert _back(row.get(key, ""), value) == value, key


def test_knee_search_finds_the_known_break(cli: Cli, tmp_path: Path) -> None:
    """Without speculation and with equal lengths, a twin's batch finishes in lock-step: at
    concurrency ≤ max_num_seqs no request waits (TTFT ≈ one or two steps, ≈ 30 ms at time scale
    2), at max_num_seqs + 1 one request per round waits a whole request (24 steps ≈ 300 ms). A
    TTFT bound of 150 ms therefore breaks at max_num_seqs + 1: 4 for one twin, 7 for the other."""
    small = TwinConfig(deployment=_dep(3), workload=WL, k=0, time_scale=2.0)
    large = TwinConfig(deployment=_dep(6), workload=WL, k=0, time_scale=2.0)
    plots = tmp_path / "plots"
    r = bench_ab(
        cli, small, large, "--sweep", "concurrency:1..16", "--slo", "ttft_ms=150", "-n", "6",
        "--dataset", "synthetic:in=8,out=24", "--no-metrics", "--plot", str(plots),
        "--out", str(tmp_path / "o"), "--json",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    s = json.loads(r.stdout)
    knees = {k["target"]: k for k in s["sweep"]["knees"]}
    for target, capacity in (("baseline", 3), ("candidate", 6)):
        k = knees[target]
        # within one bisection step of the known break (adjacent concurrencies at the end)
        assert abs(k["knee"] - capacity) <= 1, k
        assert k["first_failing"] - k["knee"] == 1, k
    assert s["sweep"]["knee_ratio"] == pytest.approx(
        knees["candidate"]["knee"] / knees["baseline"]["knee"]
    )
    # every level of a closed-loop sweep sends at least two requests per user
    for lv in s["levels"]:
        assert lv["goodput"]["requests"] == max(6, 2 * lv["concurrency"])
    assert (plots / "goodput_vs_load.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--slo", "itl=5"], "--slo"),
        (["--slo", "ttft_ms=-1"], "--slo"),
        (["--sweep", "concurrency:1..8"], "--sweep"),
        (["--sweep", "concurrency:1..8", "--slo", "ttft=5", "--concurrency", "4"], "--sweep"),
        (["--sweep", "bogus", "--slo", "ttft=5"], "--sweep"),
        (["--sweep", "concurrency:1..200000", "--slo", "ttft=5"], "--sweep"),
        (["--format", "csv", "--json"], "--format"),
        (["--slo", "ttft=5", "--slo-attainment", "0"], "--slo-attainment"),
        (["--slo", "ttft=5", "--slo-attainment", "nan"], "--slo-attainment"),
    ],
)
def test_bad_slo_sweep_format_flags(cli: Cli, args: list[str], flag: str, tmp_path: Path) -> None:
    r = cli.run("bench", "--url", "http://127.0.0.1:9", *args, "--out", str(tmp_path))
    assert r.exit_code == 2, r.output
    assert flag in r.output and "Traceback" not in r.output
