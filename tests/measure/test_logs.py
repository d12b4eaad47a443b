"""``alphagate measure logs`` on the exact lines vLLM 0.32's CPU build writes (a saved excerpt)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from alphagate.measure.logs import measure_logs, parse_log_line
from alphagate.measure.results import MeasureError
from tests.conftest import Cli

LOG = Path(__file__).with_name("vllm_0_32_specdecoding.log")


def test_a_real_line_parses() -> None:
    line = next(x for x in LOG.read_text().splitlines() if "13:37:42" in x)
    p = parse_log_line(line)
    assert p is not None
    assert (p.accepted, p.drafted, p.k, p.pid) == (111, 597, 3, "12772")
    assert p.per_pos_rates == (0.457, 0.05, 0.05)
    assert p.drafts == 199
    assert p.when is not None and p.when.strftime("%m-%d %H:%M:%S") == "11-30 13:37:42"


def test_sums_over_the_window() -> None:
    m = measure_logs(LOG.read_text().splitlines(), "vllm.log")
    e = m.overall
    assert e is not None
    assert e.num_accepted_tokens == 111 + 183 + 133 + 125
    assert e.num_draft_tokens == 597 + 795 + 792 + 708
    assert e.num_drafts == pytest.approx((597 + 795 + 792 + 708) / 3)  # EAGLE-3: K per draft
    assert e.mean_acceptance_length == pytest.approx(1 + 552 / 964)
    assert m.sources == 2 and any("2 server processes" in n for n in m.notes)
    only = measure_logs(LOG.read_text().splitlines(), "vllm.log", since=None, last_s=2.0)
    assert only.overall is not None and only.overall.num_accepted_tokens == 111 + 183


def test_cut_lines_and_no_lines(tmp_path: Path) -> None:
    lines = LOG.read_text().splitlines()
    spec = [x for x in lines if "SpecDecoding" in x]
    cut = [*spec[:2], spec[2][:120]]
    m = measure_logs(cut, "x")
    assert any("cut-off" in n for n in m.notes) and m.overall is not None
    with pytest.raises(MeasureError) as e:
        measure_logs(["INFO started", spec[0][:100]], "x")
    assert e.value.exit_code == 3 and "cut-off" in str(e.value)


def test_cli_reads_files_and_stdin(cli: Cli, tmp_path: Path) -> None:
    d = cli.json("measure", "logs", str(LOG))
    assert d["verb"] == "measure logs" and d["overall"]["k"] == 3
    r = cli.runner.invoke(
        __import__("alphagate.cli", fromlist=["app"]).app,
        ["measure", "logs", "-", "--json"],
        input=LOG.read_text(),
    )
    assert r.exit_code == 0 and json.loads(r.stdout)["overall"]["num_accepted_tokens"] == 552
    assert cli.run("measure", "logs", str(tmp_path / "none.log")).exit_code == 2
    empty = tmp_path / "quiet.log"
    empty.write_text("INFO nothing to see\n")
    r = cli.run("measure", "logs", str(empty))
    assert r.exit_code == 3 and "SpecDecoding" in r.output
    assert cli.run("measure", "logs", str(LOG), "--since", "yesterday").exit_code == 2


def _vllm_line(drafts: int, per_pos: list[int], drafted: int) -> str:
    """A line formatted as vLLM's ``SpecDecodingLogging.log`` formats it
    (``vllm/v1/spec_decode/metrics.py``): τ to 2 decimals, rates to 3, counts whole."""
    acc = sum(per_pos)
    rates = ", ".join(f"{c / drafts:.3f}" for c in per_pos)
    rate = f"{acc / drafted * 100:.1f}" if drafted else "nan"
    return (
        "(APIServer pid=1) INFO 11-30 13:37:02 [metrics.py:120] SpecDecoding metrics: "
        f"Mean acceptance length: {1 + acc / drafts:.2f}, Accepted throughput: 1.00 tokens/s, "
        f"Drafted throughput: 1.00 tokens/s, Accepted: {acc} tokens, Drafted: {drafted} tokens, "
        f"Per-position acceptance rate: {rates}, Avg Draft acceptance rate: {rate}%"
    )


@given(
    drafts=st.integers(1, 5000),
    k=st.integers(1, 6),
    alpha=st.floats(0.0, 0.95),
    short=st.floats(0.0, 1.0),
    data=st.data(),
)
@settings(max_examples=300, deadline=None)
def test_the_number_of_drafts_is_recovered_from_the_printed_figures(
    drafts: int, k: int, alpha: float, short: float, data: st.DataObject
) -> None:
    """Drafts are not printed; the allowed range always holds the true count, and with full
    proposals (EAGLE, draft models: drafted = K × drafts) the count is exact."""
    counts, left = [], drafts
    for _ in range(k):
        left = data.draw(st.integers(0, left)) if alpha > 0 else 0
        counts.append(left)
    full = parse_log_line(_vllm_line(drafts, counts, k * drafts))
    assert full is not None and full.drafts == drafts
    # an n-gram proposer may propose fewer than K tokens: drafted between max accepted and K·d
    drafted = max(drafts, counts[0] and sum(counts)) + round(short * (k - 1) * drafts)
    drafted = min(max(drafted, sum(counts), drafts), k * drafts)
    p = parse_log_line(_vllm_line(drafts, counts, drafted))
    assert p is not None
    lo, hi = p.drafts_range()
    assert lo <= drafts <= hi
    assert lo <= p.drafts <= hi


def test_impossible_lines_and_contradicting_flags(cli: Cli, tmp_path: Path) -> None:
    good = _vllm_line(200, [120, 60, 20], 600)
    bad = _vllm_line(200, [120, 60, 20], 600).replace(
        "Accepted: 200 tokens", "Accepted: 900 tokens"
    )
    log = tmp_path / "v.log"
    log.write_text(good + "\n" + bad + "\n" + good + "\n")
    d = cli.json("measure", "logs", str(log))
    assert d["overall"]["num_drafts"] == 400 and d["overall"]["draft_acceptance_rate"] <= 1.0
    assert any("impossible figures" in n and "lines 2" in n for n in d["notes"])
    r = cli.run("measure", "logs", str(log), "--k", "2")
    assert r.exit_code == 2 and "K = 3" in r.output
    r = cli.run("measure", "logs", str(LOG), "--since", "11-30 13:38", "--until", "11-30 13:37")
    assert r.exit_code == 2 and "after --until" in r.output
    # each line covers the interval before it: lines at 13:37:02, :04, :42, :44 (logged every
    # 2 s) span 42 s, plus the median spacing of 2 s for the first line's own interval
    d = cli.json("measure", "logs", str(LOG))
    assert d["window_s"] == 44
