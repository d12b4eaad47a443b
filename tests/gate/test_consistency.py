"""Evidence refused before it is judged: an acceptance record that does not follow from its own
counts, records counted twice or that disagree with their summary, two runs that are no A/B, a
window no measurement has, and evidence of another deployment."""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest

from alphagate.bench.records import BenchResult, RequestRecord, summarize_level
from alphagate.core.errors import ConfigError
from alphagate.gate.consistency import (
    CLOCK_SKEW_S,
    bench_started_at,
    check_checkpoint,
    check_deployment,
    check_estimate,
    check_pair,
    check_records,
    window_problem,
)
from alphagate.measure.estimate import estimate
from alphagate.measure.prom import SpecCounters, spec_delta
from tests.records import streamed

EST = estimate(1000, 3000, 1500.0, [800.0, 500.0, 200.0])


def test_a_record_that_follows_from_its_counts_passes() -> None:
    check_estimate(EST, "m.json")


@pytest.mark.parametrize(
    ("update", "says"),
    [
        (
            {"draft_acceptance_rate": 0.6},
            "draft_acceptance_rate 0.6 does not follow from its own counts",
        ),
        ({"num_drafts": -1.0}, "num_drafts = -1.0 is not a count"),
        ({"mean_acceptance_length": math.nan}, "mean_acceptance_length is nan"),
        ({"num_accepted_tokens": 4000.0}, "counts no speculative decoder produces"),
    ],
)
def test_an_edited_record_is_refused(update: dict[str, float], says: str) -> None:
    with pytest.raises(ConfigError, match=f"m.json: {says}"):
        check_estimate(EST.model_copy(update=update), "m.json")


def test_a_figure_outside_its_own_interval_is_refused() -> None:
    ci = EST.draft_acceptance_rate_ci
    assert ci is not None
    narrow = ci.model_copy(update={"low": ci.high + 0.01, "high": ci.high + 0.02})
    with pytest.raises(ConfigError, match="lies outside its own interval"):
        check_estimate(EST.model_copy(update={"draft_acceptance_rate_ci": narrow}), "m.json")


def _run(
    run_id: str, target: str, recs: list[RequestRecord], drafts: float = 100.0, **kw: object
) -> BenchResult:
    acc = spec_delta(
        [SpecCounters(present=True)],
        [SpecCounters(drafts=drafts, draft_tokens=3 * drafts, accepted=1.5 * drafts, present=True)],
    )
    lv = summarize_level(
        target, f"http://{target}", "c1", 1, None, recs, acc if target == "candidate" else None
    )
    return BenchResult(run_id=run_id, config=dict(kw), levels=[lv], comparisons=[])


def _recs(run_id: str, target: str, n: int = 4, out: int = 3) -> list[RequestRecord]:
    return [
        streamed([0.01 * (j + 1) for j in range(out)], id=i, run_id=run_id, target=target)
        for i in range(n)
    ]


def test_a_runs_records_are_each_request_once_and_as_many_as_it_counts(tmp_path: Path) -> None:
    recs = _recs("r", "baseline")
    result = _run("r", "baseline", recs)
    check_records(result, recs, tmp_path)
    with pytest.raises(ConfigError, match="4 requests of run r appear more than once"):
        check_records(result, recs + recs, tmp_path)
    with pytest.raises(
        ConfigError, match="holds 3 measured requests of run r, its summary counts 4"
    ):
        check_records(result, recs[:3], tmp_path)
    slower = [r.model_copy(update={"e2e_s": 0.5}) for r in recs]
    with pytest.raises(ConfigError, match=r"the summary says .* mean TPOT"):
        check_records(result, slower, tmp_path)


def test_two_runs_of_one_workload_are_an_ab(tmp_path: Path) -> None:
    base = (
        tmp_path / "b.json",
        _run("b", "baseline", _recs("b", "baseline"), dataset="d"),
        _recs("b", "baseline"),
    )
    cand = (
        tmp_path / "c.json",
        _run("c", "candidate", _recs("c", "candidate"), dataset="d"),
        _recs("c", "candidate"),
    )
    check_pair(base, cand)


@pytest.mark.parametrize(
    ("run_id", "drafts", "dataset", "out", "says"),
    [
        ("b", 100.0, "d", 3, "are the same run"),
        ("c", 0.0, "d", 3, "drafted no tokens"),
        ("c", 100.0, "other", 3, "ran different workloads: dataset 'd' vs 'other'"),
        ("c", 100.0, "d", 30, "ran different workloads: mean output 3 vs 30 tokens"),
    ],
)
def test_two_runs_that_are_no_ab_are_refused(
    tmp_path: Path, run_id: str, drafts: float, dataset: str, out: int, says: str
) -> None:
    recs = _recs(run_id, "candidate", out=out)
    cand = (tmp_path / "c.json", _run(run_id, "candidate", recs, drafts, dataset=dataset), recs)
    brecs = _recs("b", "baseline")
    base = (tmp_path / "b.json", _run("b", "baseline", brecs, dataset="d"), brecs)
    with pytest.raises(ConfigError, match=says):
        check_pair(base, cand)


def test_when_a_run_started_comes_from_its_provenance_or_its_id() -> None:
    assert bench_started_at(_run("x", "baseline", []).model_copy(update={"started_at": 5.0})) == 5.0
    stamped = _run("20250102T030405-ab12", "baseline", [])
    assert bench_started_at(stamped) == time.mktime((2025, 1, 2, 3, 4, 5, 0, 0, -1))
    assert bench_started_at(_run("lab-run", "baseline", [])) is None


def test_a_window_is_stale_impossible_or_fine() -> None:
    now, day = 1_000_000.0, 86_400.0
    assert window_problem(now - 2 * day, now - day, "m.json", 7 * day, now) is None
    stale = window_problem(None, now - 8 * day, "m.json", 7 * day, now)
    assert stale == "m.json was measured 8.0 days ago, more than --max-age (7 days): measure again"
    assert window_problem(None, None, "m.json", day, now) is None
    assert window_problem(None, now + CLOCK_SKEW_S / 2, "m.json", day, now) is None  # clock skew
    with pytest.raises(ConfigError, match="ends 10 s before it starts"):
        window_problem(now, now - 10, "m.json", day, now)
    with pytest.raises(ConfigError, match="in the future"):
        window_problem(None, now + 2 * CLOCK_SKEW_S, "m.json", day, now)
    with pytest.raises(ConfigError, match="window start is inf"):
        window_problem(math.inf, None, "m.json", day, now)


def test_evidence_of_another_deployment_is_refused() -> None:
    check_deployment(
        "llama", [("a.json", "llama"), ("b.json", None)]
    )  # None: the source names none
    with pytest.raises(
        ConfigError, match=r"b\.json measured model 'qwen'; the plan is for 'llama'"
    ):
        check_deployment("llama", [("a.json", "llama"), ("b.json", "qwen")])
    check_checkpoint("meta-llama/Llama-3.1-8B-Instruct", [("a", "/models/llama-3.1-8b-instruct/")])
    with pytest.raises(ConfigError, match="checkpoint 'org/Qwen2'"):
        check_checkpoint("meta-llama/Llama-3.1-8B-Instruct", [("a", "org/Qwen2")])
