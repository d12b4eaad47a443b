"""`alphagate bench --trace`: production arrivals and lengths replayed against both endpoints.

The schedule is checked exactly (each request's scheduled send time is its trace timestamp ×
``--time-scale``) and the lengths through the twin's usage; how closely the client kept to the
schedule is reported in ``.cache/bench/report.json``, not asserted — it is wall-clock time on a
shared machine.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from alphagate.specs import DeploymentConfig
from alphagate.twin.config import TwinConfig
from tests.conftest import Cli
from tests.servers import bench_ab

DEP = DeploymentConfig(model="llama-3.1-8b", weight_dtype="bf16")
REPORT = Path(__file__).resolve().parents[2] / ".cache" / "bench" / "report.json"


def _report(key: str, value: object) -> None:
    """Keep measured wall-clock figures in .cache/bench/report.json (for the record)."""
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    data = json.loads(REPORT.read_text()) if REPORT.exists() else {}
    data[key] = value
    REPORT.write_text(json.dumps(data, indent=2))


def _trace(path: Path, n: int, rate: float, seed: int = 5) -> list[dict[str, float]]:
    rng = np.random.default_rng(seed)
    t_ms = 1000.0 + np.cumsum(rng.exponential(1000.0 / rate, n))
    lines = [
        {
            "timestamp": round(float(t), 3),
            "input_length": int(rng.integers(4, 64)),
            "output_length": int(rng.integers(2, 24)),
            "hash_ids": [0],
        }
        for t in t_ms
    ]
    rng.shuffle(lines)  # the file need not be in time order
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return sorted(lines, key=lambda x: x["timestamp"])


def test_trace_replay_reproduces_arrivals_and_lengths(cli: Cli, tmp_path: Path) -> None:
    trace = _trace(tmp_path / "trace.jsonl", 40, rate=40.0)
    base = TwinConfig(deployment=DEP, k=0, time_scale=1.0)
    cand = TwinConfig(deployment=DEP, k=3, time_scale=1.0)
    r = bench_ab(
        cli, base, cand, "--trace", str(tmp_path / "trace.jsonl"), "--time-scale", "0.5",
        "--slo", "ttft_ms=1000", "--out", str(tmp_path / "o"), "--json",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    s = json.loads(r.stdout)
    assert [(lv["target"], lv["level"], lv["time_scale"]) for lv in s["levels"]] == [
        ("baseline", "trace", 0.5),
        ("candidate", "trace", 0.5),
    ]
    assert s["comparisons"][0]["level"] == "trace"
    records = [json.loads(x) for x in (tmp_path / "o" / "requests.jsonl").read_text().splitlines()]
    offsets = np.asarray([x["timestamp"] for x in trace]) - trace[0]["timestamp"]
    for target in ("baseline", "candidate"):
        # ids count completions; the schedule orders the sends
        mine = sorted((x for x in records if x["target"] == target), key=lambda x: x["scheduled_s"])
        assert len(mine) == 40 and all(x["error_type"] is None for x in mine)
        scheduled = np.asarray([x["scheduled_s"] for x in mine])
        assert scheduled - scheduled[0] == pytest.approx(offsets / 1e3 * 0.5, abs=1e-9)
        # lengths: the twin counts prompt words as tokens and honours max_tokens + ignore_eos
        assert [x["prompt_tokens"] for x in mine] == [t["input_length"] for t in trace]
        assert [x["output_tokens"] for x in mine] == [t["output_length"] for t in trace]
        lag_ms = (np.asarray([x["send_s"] for x in mine]) - scheduled) * 1e3
        assert (lag_ms >= 0).all()  # never early
        # arrival-time error, replayed gaps against the trace's (time scale 0.5): reported
        sent = np.asarray([x["send_s"] for x in mine])
        error_ms = np.abs((sent - sent[0]) - offsets / 1e3 * 0.5) * 1e3
        _report(
            f"trace_replay_{target}_arrival_error_ms",
            {"p50": float(np.median(error_ms)), "max": float(error_ms.max()), "n": 40},
        )
    lv = s["levels"][0]["overall"]
    assert lv["send_lag_ms"]["samples"] == 40


def test_trace_flags(cli: Cli, tmp_path: Path) -> None:
    good = tmp_path / "t.jsonl"
    good.write_text('{"timestamp": 0, "input_length": 3, "output_length": 2}\n')
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"timestamp": 0, "input_length": 3}\n{"timestamp": "soon"}\n')
    for args, flag, text in [
        (["--trace", str(good), "--rate", "2"], "--trace", "--rate"),
        (["--trace", str(good), "--dataset", "synthetic:in=2,out=2"], "--trace", "--dataset"),
        (["--trace", str(tmp_path / "none.jsonl")], "--trace", "not found"),
        (["--trace", str(bad), "--strict"], "--trace", "bad.jsonl:2"),
        (["--trace", str(good), "--time-scale", "0"], "--time-scale", "smallest"),
        (["--trace", str(good), "--warmup", "1"], "--warmup", "leaves no request"),
    ]:
        r = cli.run("bench", "--url", "http://127.0.0.1:9", *args, "--out", str(tmp_path / "o"))
        assert r.exit_code == 2, (args, r.output)
        assert flag in r.output and text in r.output and "Traceback" not in r.output
