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
    quiet = tmp_path / "quiet.log"  # a vLLM log that has not logged an interval of drafts yet
    quiet.write_text("(APIServer pid=7) INFO 11-30 13:37:12 [api_utils.py:347] Starting\n")
    r = cli.run("measure", "logs", str(quiet))
    assert r.exit_code == 3 and "SpecDecoding" in r.output
    for text in ("nothing to see\n", '{"a": 1}\n', "INFO no time here\n"):  # not a log: exit 2
        (tmp_path / "x.txt").write_text(text)
        r = cli.run("measure", "logs", str(tmp_path / "x.txt"))
        assert r.exit_code == 2 and "not a vLLM or SGLang log" in r.output, r.output
    assert cli.run("measure", "logs", str(LOG), "--since", "yesterday").exit_code == 2


def _vllm_line(drafts: int, per_pos: list[int], drafted: int, when: str = "11-30 13:37:02") -> str:
    """A line formatted as vLLM's ``SpecDecodingLogging.log`` formats it
    (``vllm/v1/spec_decode/metrics.py``): τ to 2 decimals, rates to 3, counts whole."""
    acc = sum(per_pos)
    rates = ", ".join(f"{c / drafts:.3f}" for c in per_pos)
    rate = f"{acc / drafted * 100:.1f}" if drafted else "nan"
    return (
        f"(APIServer pid=1) INFO {when} [metrics.py:120] SpecDecoding metrics: "
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
    bad = _vllm_line(200, [120, 60, 20], 600, "11-30 13:37:12").replace(
        "Accepted: 200 tokens", "Accepted: 900 tokens"
    )
    log = tmp_path / "v.log"
    log.write_text(good + "\n" + bad + "\n" + good.replace(":02 ", ":22 ") + "\n")
    d = cli.json("measure", "logs", str(log))
    assert d["overall"]["num_drafts"] == 400 and d["overall"]["draft_acceptance_rate"] <= 1.0
    assert any("impossible figures" in n and f"{log}:2" in n for n in d["notes"]), d["notes"]
    r = cli.run("measure", "logs", str(log), "--k", "2")
    assert r.exit_code == 2 and "K = 3" in r.output
    r = cli.run("measure", "logs", str(LOG), "--since", "11-30 13:38", "--until", "11-30 13:37")
    assert r.exit_code == 2 and "after --until" in r.output
    # each line covers the interval before it: lines at 13:37:02, :04, :42, :44 (logged every
    # 2 s) span 42 s, plus the median spacing of 2 s for the first line's own interval
    d = cli.json("measure", "logs", str(LOG))
    assert d["window_s"] == 44


def test_a_time_that_is_no_date_is_no_traceback(cli: Cli, tmp_path: Path) -> None:
    """A SpecDecoding line whose time cannot be a date is summed (it is an interval of drafts),
    said in a note, and left out of any --since window; the window's length needs times."""
    log = tmp_path / "v.log"
    log.write_text(_vllm_line(200, [120, 60, 20], 600, "13-45 99:99:99") + "\n")
    d = cli.json("measure", "logs", str(log))
    assert d["overall"]["num_drafts"] == 200 and d["window_s"] is None
    assert any("time that is no date" in n and "1" in n for n in d["notes"])
    r = cli.run("measure", "logs", str(log), "--since", "11-30 13:00")
    assert r.exit_code == 3 and "Traceback" not in r.output


def test_a_window_of_impossible_lines_is_bad_input(cli: Cli, tmp_path: Path) -> None:
    bad = _vllm_line(200, [120, 60, 20], 600).replace(
        "Accepted: 200 tokens", "Accepted: 900 tokens"
    )
    log = tmp_path / "v.log"
    log.write_text(bad + "\n")
    r = cli.run("measure", "logs", str(log))
    assert r.exit_code == 2 and "figures no decoder prints" in r.output, r.output


def test_a_log_and_its_copy_are_refused_not_counted_twice(cli: Cli, tmp_path: Path) -> None:
    """The same SpecDecoding line twice (same time, same text) is a doubled log: refused with
    exit 2 naming both places, so that --min-drafts is never met by counting a log twice."""
    from alphagate.measure.logs import read_lines

    copy = tmp_path / "copy.log"
    copy.write_text(LOG.read_text())
    r = cli.run("measure", "logs", str(LOG), str(copy))
    assert r.exit_code == 2 and "Give each log once" in r.output
    assert f"{copy}:" in r.output and f"repeats {LOG}:" in r.output
    doubled = tmp_path / "doubled.log"
    lines = [x for x in LOG.read_text().splitlines() if "SpecDecoding" in x]
    doubled.write_text("\n".join([*lines, lines[1]]) + "\n")
    with pytest.raises(MeasureError) as e:
        measure_logs(read_lines([str(doubled)]), str(doubled))
    assert e.value.exit_code == 2
    assert f"{doubled}:{len(lines) + 1} repeats {doubled}:2" in str(e.value)
    # the same figures at another time are another interval: both count
    other = lines[1].replace("13:37:44", "13:37:46")
    doubled.write_text("\n".join([*lines, other]) + "\n")
    m = measure_logs(read_lines([str(doubled)]), str(doubled))
    assert m.overall is not None and m.overall.num_accepted_tokens == 552 + 183
