"""``explain`` on twins where the cause is known: an A/B of two twins on 127.0.0.1 with one
mechanism made dominant in the candidate — a weak first-position α, long prompts through a small
prefill budget, a high verify cost at a large batch, a KV room that caps the batch — must rank
that mechanism first with its share above a bound set from a first run; then the top remedy is
applied to the candidate twin as printed (its engine flags, or the α a better head would reach)
and the candidate run again: the P99 it measures agrees with the predicted one within their 95%
intervals. And the rollout guide's exercise: mean ITL per token falls by about a quarter while
P99 rises by about a sixth, and ``explain`` names why.

Count-bounded: each A/B is a fixed number of requests at a fixed concurrency, the twins at their
modelled speed. An A/B or rerun that the bench's validity checks mark distorted (a loaded machine
starving the client or the twin) is run again, as the gate says to, up to ``RERUNS`` times.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from alphagate.bench.records import RequestRecord
from alphagate.explain.lattice import figures
from alphagate.explain.replay import measured
from alphagate.explain.samples import measured_samples, resamples
from tests.explain.twins import bench, explain, twins
from tests.servers import RERUNS

pytestmark = [pytest.mark.slow, pytest.mark.timing]

A100 = ["--model", "llama-3.1-8b", "--gpu", "a100-80gb"]
H100 = ["--model", "llama-3.1-8b", "--gpu", "h100"]
COUNTS = ["--per-request-spec-decode-metrics", "summary"]


@dataclass(frozen=True)
class Case:
    deployment: list[str]  # the flags both twins and explain share
    candidate: list[str]  # the candidate twin's speculation (and anything else it alone has)
    prompts: tuple[int, int]  # words per prompt (one twin token each)
    output: int
    users: int
    requests: int
    metric: str
    cause: str
    share: float  # the least share of the rise, set from a first run (less a margin)
    baseline: tuple[str, ...] = ()


CASES = {
    "weak first-position α": Case(
        A100, ["--k", "4", "--class", "chat:1:0.4,0.95,0.95,0.95"], (30, 60), 64, 16, 100,
        "itl_per_token_p99_ms", "rejection", 0.35,
    ),
    "long prompts through a small prefill budget": Case(
        [*H100, "--max-num-batched-tokens", "256"], ["--k", "6", "--class", "chat:1:0.7"],
        (600, 900), 64, 16, 100, "ttft_p99_ms", "prefill", 0.6,
    ),
    "a high verify cost at a large batch": Case(
        A100, ["--k", "8", "--class", "chat:1:0.5"], (30, 60), 64, 32, 128,
        "itl_per_token_p99_ms", "verify", 0.35,
    ),
    "a KV room that caps the batch": Case(
        [*A100, "--method", "draft_model", "--max-model-len", "1024"],
        ["--k", "4", "--class", "chat:1:0.7", "--kv-cache-memory-bytes", "330000000"],
        (80, 120), 48, 16, 100, "ttft_p99_ms", "capacity", 0.4,
        baseline=("--kv-cache-memory-bytes", "330000000"),
    ),
}  # fmt: skip
#: the exercise: replayed without a client's lateness, mean ITL per token ×0.76 and P99 ×1.17
#: (short prompts: no prefill stall reaches the baseline's P99, which is one decode step)
EXERCISE = Case(
    A100, ["--k", "2", "--class", "chat:1:0.4"], (4, 8), 64, 16, 100,
    "itl_per_token_p99_ms", "rejection", 0.45,
)  # fmt: skip
TWIN_ONLY = {"--max-model-len", "--kv-cache-memory-bytes"}  # flags explain does not take


def _dataset(path: Path, case: Case) -> Path:
    rng = np.random.default_rng(0)
    lines = []
    for i in range(case.requests):
        words = int(rng.integers(case.prompts[0], case.prompts[1] + 1))
        prompt = f"q{i} " + " ".join(["tell"] * (words - 1))
        # lengths that differ, so that requests do not finish in step with one another
        out = int(rng.integers(case.output * 3 // 4, case.output * 5 // 4 + 1))
        lines.append(json.dumps({"prompt": prompt, "max_tokens": out, "class": "chat"}))
    path.write_text("\n".join(lines) + "\n")
    return path


def _bench_args(case: Case) -> list[str]:
    return ["-c", str(case.users), "-n", str(case.requests), "--warmup", str(case.users)]


def _distorted(summary: dict[str, Any]) -> bool:
    return any((lv.get("validity") or {}).get("distorted") for lv in summary["levels"])


def _until_clean(run: Any) -> dict[str, Any]:
    """``run()``'s summary, run again (as the gate says to) while the validity checks find the
    client or the twin fell behind."""
    summary: dict[str, Any] = run()
    for _ in range(RERUNS):
        if not _distorted(summary):
            break
        summary = run()
    return summary


def _ab(tmp: Path, case: Case) -> tuple[Path, Path]:
    data = _dataset(tmp / "traffic.jsonl", case)
    base = [*case.deployment, *case.baseline, "--k", "0"]
    cand = [*case.deployment, *case.candidate, *COUNTS]
    runs = iter(range(RERUNS + 1))

    def run() -> dict[str, Any]:
        out = tmp / f"ab{next(runs)}"
        with twins((base, tmp / "base.log"), (cand, tmp / "cand.log")) as (b, c):
            return bench(out, data, _bench_args(case), baseline_url=b, candidate_url=c) | {
                "_out": str(out)
            }

    summary = _until_clean(run)
    return Path(summary["_out"]) / "summary.json", data


def _explain_flags(case: Case) -> list[str]:
    flags, skip = [], False
    for a in case.deployment:
        if skip:
            skip = False
        elif a in TWIN_ONLY:
            skip = True
        else:
            flags.append(a)
    return flags


def _applied(case: Case, remedy: dict[str, Any]) -> list[str]:
    """The candidate twin's flags with the remedy applied as printed: its engine flags replace
    the ones they name (K comes from the speculative config), a better head's α the class's."""
    args = [*case.deployment, *case.candidate, *COUNTS]
    flags = remedy["flags"]
    for name in flags[::2]:
        drop = {name, "--k"} if name == "--speculative-config" else {name}
        args = [a for i, a in enumerate(args) if a not in drop and args[i - 1] not in drop]
    if remedy["classes"]:
        args = [a for i, a in enumerate(args) if a != "--class" and args[i - 1] != "--class"]
        for name, alphas in remedy["classes"].items():
            args += ["--class", f"{name}:1:" + ",".join(f"{a:.4f}" for a in alphas)]
    return [*args, *flags]


def _p99(records_file: Path, metric: str) -> tuple[float, float, float]:
    """The measured figure of a run and its 95% interval over resamples of its requests, each
    end moved out by the lateness the run itself measured (the twin's mean step lateness and the
    client's P99): how far its own clock can put the tail's gaps off. The validity checks pass a
    run whose client ran up to two median gaps late at its P99 (``bench.validity.BOUNDS``), and
    on a loaded machine such a run moved this P99 by half (13 ms idle, 21 ms in one CI run)."""
    recs = [RequestRecord.model_validate_json(x) for x in records_file.read_text().splitlines()]
    recs = [r for r in recs if r.ok]
    counts = resamples(measured(recs), 400, np.random.default_rng(0))
    values = figures(measured_samples(recs), counts)[metric]  # type: ignore[index]
    lo, hi = np.quantile(values[1:], [0.025, 0.975])
    validity = json.loads(records_file.with_name("summary.json").read_text())["levels"][0]
    validity = validity.get("validity") or {}
    late = (validity.get("server_lag_ms") or 0.0) + (
        (validity.get("client_lag_ms") or {}).get("p99") or 0.0
    )
    return float(values[0]), float(lo) - late, float(hi) + late


def _rerun(tmp: Path, case: Case, data: Path, remedy: dict[str, Any]) -> Path:
    runs = iter(range(RERUNS + 1))

    def run() -> dict[str, Any]:
        out = tmp / f"after{next(runs)}"
        with twins((_applied(case, remedy), tmp / "after.log")) as (url,):
            return bench(out, data, _bench_args(case), url=url) | {"_out": str(out)}

    return Path(_until_clean(run)["_out"]) / "requests.jsonl"


def _factors(ex: dict[str, Any], metric: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    (lv,) = ex["levels"]
    m = next(x for x in lv["metrics"] if x["metric"] == metric)
    return lv, m["factors"]


@pytest.mark.parametrize("name", CASES)
def test_the_injected_cause_ranks_first_and_its_top_remedy_holds(name: str, tmp_path: Path) -> None:
    case = CASES[name]
    summary, data = _ab(tmp_path, case)
    ex = explain(summary, *_explain_flags(case))
    lv, factors = _factors(ex, case.metric)
    top = factors[0]
    assert top["mechanisms"] == [case.cause], [(f["mechanisms"], f["share"]) for f in factors]
    assert top["share"] >= case.share, top
    remedy = lv["remedies"][0]
    key = "itl_per_token_p99" if case.metric.startswith("itl") else "ttft_p99"
    predicted, interval = remedy[f"{key}_ms"], remedy[f"{key}_interval"]
    value, lo, hi = _p99(_rerun(tmp_path, case, data, remedy), case.metric)
    agree = lo <= interval["high"] and interval["low"] <= hi
    said = (
        f"{remedy['title']}: predicted {predicted:.1f} [{interval['low']:.1f}, "
        f"{interval['high']:.1f}], measured {value:.1f} [{lo:.1f}, {hi:.1f}]"
    )
    assert agree, said


def test_the_guides_exercise_mean_falls_p99_rises_and_explain_names_why(tmp_path: Path) -> None:
    summary, _ = _ab(tmp_path, EXERCISE)
    levels = {lv["target"]: lv["overall"] for lv in json.loads(summary.read_text())["levels"]}
    base, cand = levels["baseline"]["itl_per_token_ms"], levels["candidate"]["itl_per_token_ms"]
    assert 0.65 <= cand["mean"] / base["mean"] <= 0.85  # about a quarter faster on average
    ex = explain(summary, *_explain_flags(EXERCISE))
    (lv,) = ex["levels"]
    m = next(x for x in lv["metrics"] if x["metric"] == "itl_per_token_p99_ms")
    # about a sixth worse, as the server's steps make it. The measured P99 of both sides also
    # carries the client's lateness, which a loaded machine moves run to run (the measured ratio
    # was 1.22× on one run, 0.79× on another, both passing the validity checks), so the
    # engine's ratio is what is judged here, not the measured one
    assert 1.1 <= m["engine_ratio"] <= 1.25
    assert m["factors"][0]["mechanisms"] == ["rejection"]
    assert m["factors"][0]["share"] >= EXERCISE.share
