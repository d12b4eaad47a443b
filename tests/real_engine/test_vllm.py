"""alphagate checked against the real vLLM CPU build serving tiny locally built models.

Every server runs on 127.0.0.1. Most come from the tier's pool (``harness.ServerPool``), shared
with the other files and stopped at the end of the session, so every figure here is a delta of
the server's counters or its log over the test's own window.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
import pytest

from alphagate.bench.config import BenchConfig, Level
from alphagate.bench.dataset import Prompt
from alphagate.bench.records import LevelSummary
from alphagate.bench.runner import BenchRunner
from alphagate.measure.prom import parse_spec_counters, spec_delta
from alphagate.sim.results import speedups
from tests.real_engine.harness import (
    ServerSpec,
    VllmServer,
    pooled,
    report,
    run_vllm_bench,
    spec_configs,
    vllm_server,
)

CODE_PROMPTS = [
    "def fibonacci(n):\n    ",
    "import os\nimport sys\n\n\ndef main():\n    ",
    "class Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(self, item):\n        ",
    "for i in range(10):\n    if i % 2 == 0:\n        ",
    "def read_lines(path):\n    with open(path) as f:\n        ",
    "    def __repr__(self):\n        return ",
    "try:\n    import json\nexcept ImportError:\n    ",
    "def _check(value):\n    if not isinstance(value, int):\n        raise ",
]


def _prompts(n: int, max_tokens: int = 48) -> list[Prompt]:
    return [
        Prompt(CODE_PROMPTS[i % len(CODE_PROMPTS)], None, None, max_tokens, True) for i in range(n)
    ]


def _bench(
    targets: list[tuple[str, str]], concurrency: int, n: int, model: str
) -> list[LevelSummary]:
    async def go() -> list[LevelSummary]:
        cfg = BenchConfig(
            targets=tuple(targets),
            levels=(Level(label=f"c{concurrency}", concurrency=concurrency),),
            num_prompts=n,
            model=model,
        )
        return await BenchRunner(cfg, _prompts(n)).run()

    return asyncio.run(go())


def _scrape(url: str) -> Any:
    import urllib.request

    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        return parse_spec_counters(r.read().decode())


def _greedy(url: str, model: str) -> list[str]:
    async def go() -> list[str]:
        out = []
        async with aiohttp.ClientSession() as s:
            for p in CODE_PROMPTS[:4]:
                body = {
                    "model": model,
                    "prompt": p,
                    "max_tokens": 32,
                    "temperature": 0.0,
                    "ignore_eos": True,
                }
                async with s.post(url + "/v1/completions", json=body) as r:
                    out.append((await r.json())["choices"][0]["text"])
        return out

    return asyncio.run(go())


def _wait_for_log(
    server: VllmServer, since: int, drafted: float, timeout: float = 40.0
) -> tuple[int, int, int]:
    deadline = time.monotonic() + timeout
    while True:
        lines, acc, dr = server.spec_log_totals(since)
        if dr >= drafted or time.monotonic() > deadline:
            return lines, acc, dr
        time.sleep(1.0)


@pytest.fixture(scope="module")
def baseline_greedy(tiny: Any, logdir: Path) -> list[str]:
    (srv,) = pooled(tiny.target, logdir, ServerSpec("tiny", label="base"))
    return _greedy(srv.url, "tiny")


ACCEPTANCE: dict[str, float] = {}


@pytest.mark.parametrize("config", ["ngram", "draft", "eagle3", "eagle3-untrained"])
def test_acceptance_equals_vllm_counters_and_log(
    tiny: Any, logdir: Path, baseline_greedy: list[str], config: str
) -> None:
    spec = spec_configs(tiny)[config]
    (srv,) = pooled(tiny.target, logdir, ServerSpec("tiny", spec, label=config))
    before = _scrape(srv.url)
    offset = srv.log_offset()
    levels = _bench([("default", srv.url)], 2, 16, "tiny")
    after = _scrape(srv.url)
    own = spec_delta([before], [after])
    n_lines, acc, drafted = _wait_for_log(srv, offset, own.num_draft_tokens)
    greedy = _greedy(srv.url, "tiny")
    a = levels[0].acceptance
    assert a is not None and levels[0].overall.completed == 16
    # alphagate's numbers are the deltas of vLLM's own counters
    assert a.num_drafts == own.num_drafts > 0
    assert a.num_accepted_tokens == own.num_accepted_tokens
    assert a.draft_acceptance_rate == own.draft_acceptance_rate
    assert a.accepted_per_pos == own.accepted_per_pos
    # ... and agree with vLLM's SpecDecoding log lines for the same window
    assert n_lines >= 1
    assert drafted == own.num_draft_tokens and acc == own.num_accepted_tokens
    ACCEPTANCE[config] = float(a.draft_acceptance_rate or 0.0)
    report(
        f"acceptance/{config}",
        {
            "draft_acceptance_rate": a.draft_acceptance_rate,
            "mean_acceptance_length": a.mean_acceptance_length,
            "per_position": a.per_position_acceptance,
            "alpha_iid": a.alpha_iid,
            "drafts": a.num_drafts,
            "log_lines": n_lines,
            "tokens_per_chunk": levels[0].overall.mean_tokens_per_chunk,
            "tpot_ms": levels[0].overall.tpot_ms.mean,
        },
    )
    # lossless: greedy output with speculation equals the baseline's
    assert greedy == baseline_greedy


def test_trained_and_untrained_heads_are_told_apart() -> None:
    if "eagle3" not in ACCEPTANCE or "eagle3-untrained" not in ACCEPTANCE:
        pytest.skip("needs the EAGLE-3 acceptance tests to run first")
    assert ACCEPTANCE["eagle3-untrained"] < 0.05
    assert ACCEPTANCE["eagle3"] > ACCEPTANCE["eagle3-untrained"] + 0.1


def test_ab_baseline_vs_ngram_speedup_consistent_with_chunks(tiny: Any, logdir: Path) -> None:
    spec = spec_configs(tiny)["ngram"]
    base, cand = pooled(
        tiny.target,
        logdir,
        ServerSpec("tiny", label="base"),
        ServerSpec("tiny", spec, label="ngram"),
    )
    levels = _bench([("baseline", base.url), ("candidate", cand.url)], 1, 12, "tiny")
    cmp = speedups(levels[1].overall, levels[0].overall)
    tpc = levels[1].overall.mean_tokens_per_chunk
    assert tpc is not None and tpc > 1.0
    assert cmp.tpot_mean_speedup is not None
    report(
        "ab/baseline-vs-ngram",
        {
            "tokens_per_chunk": tpc,
            "tpot_speedup": cmp.tpot_mean_speedup,
            "throughput_speedup": cmp.throughput_speedup,
        },
    )
    # tokens arrive tpc at a time; each chunk costs at least one decode step, so TPOT cannot
    # improve by more than the tokens per chunk, and with a near-free n-gram draft it is not below
    # half of it on this CPU build
    assert 0.5 * tpc <= cmp.tpot_mean_speedup <= 1.1 * tpc


def _dataset(path: Path, n: int, max_tokens: int, prompts: list[str] | None = None) -> Path:
    texts = prompts or CODE_PROMPTS
    path.write_text(
        "\n".join(
            json.dumps({"prompt": texts[i % len(texts)], "max_tokens": max_tokens})
            for i in range(n)
        )
        + "\n"
    )
    return path


def _long_prompts(n: int, chars: int = 700) -> list[str]:
    """Distinct, realistic prompts: consecutive slices of a standard-library module's source."""
    import textwrap

    src = Path(textwrap.__file__).read_text(encoding="utf-8")
    return [src[i * chars : (i + 1) * chars] for i in range(n)]


async def _run_prompts(url: str, prompts: list[Prompt]) -> Any:
    cfg = BenchConfig(
        targets=(("default", url),),
        levels=(Level(label="w", concurrency=1),),
        num_prompts=len(prompts),
        model="tiny",
        scrape_metrics=False,
    )
    return (await BenchRunner(cfg, prompts).run())[0].overall


@pytest.mark.alone  # two clients' latencies on one server: no idle servers beside it
def test_our_client_agrees_with_vllms_own_client(tiny: Any, logdir: Path, tmp_path: Path) -> None:
    """Same server, same prompts, same lengths, one at a time: TTFT, TPOT and ITL medians agree.

    The two clients take turns (ours, theirs, ours, theirs) so that neither gains from going second,
    and a third pair where they disagree (CI once read ours 16% above on ITL, over a bound of 15%:
    one turn slowed by the machine moves a mean of two). Ours may not read more than 10% above vLLM's client. It may read lower, by less than a
    definition's worth: its own HTTP/1.1 reader stamps each network read as it arrives, where
    aiohttp's path under vLLM's client adds a task wake-up and buffering per chunk, and on this
    machine both clients share the two cores with the CPU-bound server, which runs slower beside
    the heavier client (tier runs: ours 6–18% lower on all three; against the twin, whose
    step times do not depend on the CPU, ours ~1 ms lower on TTFT and level on ITL). A definition
    that differs — ITL per token instead of per chunk (~1.4 tokens per chunk here), TTFT from
    another instant — moves a figure by more than the 25% allowed below.
    """
    texts = _long_prompts(24)
    data = _dataset(tmp_path / "code.jsonl", 24, 48, texts)
    spec = spec_configs(tiny)["ngram"]
    prompts = [Prompt(t, None, None, 48, True) for t in texts]
    ours: list[Any] = []
    theirs: list[dict[str, Any]] = []
    # no prefix cache: both clients pay the same real prefill for every prompt
    with vllm_server(
        tiny.target, "tiny", spec, logdir, extra_args=("--no-enable-prefix-caching",)
    ) as srv:
        # warm-up over every prompt first: the CPU build creates kernels per new input shape on first
        # sight, a cost that would otherwise land on whichever client runs first
        warm = asyncio.run(_run_prompts(srv.url, [Prompt(t, None, None, 4, True) for t in texts]))
        assert warm.completed == 24

        def turn() -> None:
            ours.append(asyncio.run(_run_prompts(srv.url, prompts)))
            theirs.append(
                run_vllm_bench(
                    srv.url, "tiny", tiny.tokenizer, data, tmp_path / f"vb{len(theirs)}",
                    prompts=24, concurrency=1, output_len=48,
                )
            )  # fmt: skip

        turn()
        turn()
        agreement = _agreement(ours, theirs)
        if not all(_agree(r) for r in agreement.values()):
            # a neighbour that slowed the server during one client's turn moves that turn alone:
            # a third pair of turns, and the medians of three
            turn()
            agreement = _agreement(ours, theirs)
    assert all(t["completed"] == 24 for t in theirs) and all(o.completed == 24 for o in ours)
    report("client-agreement", agreement)
    for name, r in agreement.items():
        assert _agree(r), (name, r)


def _agreement(ours: list[Any], theirs: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Each client's median over its turns of the per-turn medians (robust to a few slow
    requests on a loaded CPU), and the bounds: they widen to three times the spread each client
    shows between its own turns when the machine is noisier."""
    metrics = {
        "ttft_ms": ([o.ttft_ms.p50 for o in ours], [float(t["median_ttft_ms"]) for t in theirs]),
        "tpot_ms": ([o.tpot_ms.p50 for o in ours], [float(t["median_tpot_ms"]) for t in theirs]),
        "itl_ms": (
            [o.itl_per_chunk_ms.p50 for o in ours],
            [float(t["median_itl_ms"]) for t in theirs],
        ),
    }
    out: dict[str, dict[str, float]] = {}
    for name, (o, t) in metrics.items():
        ov = [float(x or 0.0) for x in o]
        mo, mt = float(np.median(ov)), float(np.median(t))
        spread = max((max(ov) - min(ov)) / mo, (max(t) - min(t)) / mt) / (len(ov) - 1)
        out[name] = {
            "ours": mo,
            "vllm": mt,
            "turns": len(ov),
            "relative_gap": (mo - mt) / mt,  # > 0: ours reads higher
            "bound_above": max(0.10, 3.0 * spread),
            "bound_below": max(0.25, 3.0 * spread),
        }
    return out


def _agree(r: dict[str, float]) -> bool:
    return -r["bound_below"] < r["relative_gap"] < r["bound_above"]


def test_vllms_client_against_the_twin(tiny: Any, tmp_path: Path) -> None:
    """vLLM's benchmark client runs against the twin and reads the twin's acceptance from /metrics."""
    from alphagate import theory
    from alphagate.core.traffic import TrafficClass
    from alphagate.specs import DeploymentConfig, WorkloadConfig
    from alphagate.twin.background import twin_in_thread
    from alphagate.twin.config import TwinConfig

    alpha, k = 0.6, 3
    cfg = TwinConfig(
        deployment=DeploymentConfig(model="llama-3.1-8b", weight_dtype="bf16"),
        k=k,
        workload=WorkloadConfig(classes=(TrafficClass(name="a", share=1.0, alpha=alpha),)),
        served_model_name="tiny",
        time_scale=0.2,
    )
    data = _dataset(tmp_path / "code.jsonl", 32, 64)
    with twin_in_thread(cfg) as (url, _):
        res = run_vllm_bench(
            url,
            "tiny",
            tiny.tokenizer,
            data,
            tmp_path / "vt",
            prompts=32,
            concurrency=4,
            output_len=64,
        )
    assert res["completed"] == 32 and res["failed"] == 0
    assert res["total_output_tokens"] == 32 * 64
    rho = float(res["spec_decode_acceptance_rate"]) / 100.0
    drafts = float(res["spec_decode_num_drafts"])
    want = float(theory.draft_acceptance_rate(alpha, k))
    # the per-step accepted count has variance ≤ K²/4; 4.5 standard errors on ρ = accepted/(K·drafts)
    assert abs(rho - want) < 4.5 * 0.5 / (drafts**0.5)
    assert len(res["spec_decode_per_position_acceptance_rates"]) == k
    report("vllm-client-vs-twin", {"rho_read": rho, "rho_configured": want, "drafts": drafts})


def test_plan_speculative_config_fields_exist_in_vllm(tmp_path: Path) -> None:
    """Every key a plan may put in --speculative-config is a field of the installed vLLM's
    SpeculativeConfig, and so is every field the unit tests allow."""
    import subprocess

    from tests.conftest import Cli
    from tests.real_engine.harness import VLLM_PYTHON

    code = (
        "import dataclasses, json; from vllm.config.speculative import SpeculativeConfig as S; "
        "print(json.dumps([f.name for f in dataclasses.fields(S)]))"
    )
    out = subprocess.run([str(VLLM_PYTHON), "-c", code], capture_output=True, text=True, check=True)
    fields = set(json.loads(out.stdout.strip().splitlines()[-1]))
    allowed = json.loads(
        (Path(__file__).parents[1] / "plan" / "vllm_speculative_config_fields.json").read_text()
    )["fields"]
    assert set(allowed) <= fields, set(allowed) - fields
    cli = Cli()
    for method in ("eagle3", "eagle", "draft_model", "ngram", "mtp"):
        d = cli.json("plan", "--class", "chat:1.0:0.7", "--concurrency", "16", "--method", method)
        assert set(d["speculative_config"]) <= fields, (method, d["speculative_config"])
    report("speculative-config-fields", {"checked": sorted(allowed)})


def test_measure_live_logs_and_bench_agree(tiny: Any, logdir: Path, tmp_path: Path) -> None:
    """One window of traffic on the n-gram server, read three ways: ``measure live`` scraping
    /metrics while ``bench`` runs, ``bench``'s own counter deltas, and ``measure logs`` over the
    server's SpecDecoding lines. Counters are integers: the three agree exactly (per-position
    counts from the log to the rounding of its printed rates)."""
    import os
    import signal
    import subprocess
    import sys

    from tests.conftest import Cli

    spec = spec_configs(tiny)["ngram"]
    data = _dataset(tmp_path / "code.jsonl", 24, 48)
    live_out = tmp_path / "live.json"
    (srv,) = pooled(tiny.target, logdir, ServerSpec("tiny", spec, label="ngram"))
    offset = srv.log_offset()
    live = subprocess.Popen(
        [sys.executable, "-m", "alphagate", "measure", "live", "--url", srv.url,
         "--min-drafts", "1000000000", "--interval", "0.5", "--out", str(live_out), "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONFAULTHANDLER": "1"},  # SIGABRT dumps every thread's stack
    )  # fmt: skip
    time.sleep(3)  # its first scrape is the start of the window
    r = Cli().run(
        "bench", "--url", srv.url, "--model", "tiny", "--dataset", str(data),
        "--concurrency", "2", "--num-prompts", "24", "--out", str(tmp_path / "bench"), "--json",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    bench = json.loads((tmp_path / "bench" / "summary.json").read_text())
    a = bench["levels"][0]["acceptance"]
    _wait_for_log(srv, offset, a["num_draft_tokens"])
    time.sleep(2)  # a scrape after the last request
    os.kill(live.pid, signal.SIGINT)  # Ctrl-C: the window so far is written
    try:
        _, err = live.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        live.send_signal(signal.SIGABRT)  # where it hangs, for the failure message
        _, err = live.communicate(timeout=30)
        pytest.fail("measure live did not exit within 60 s of SIGINT:\n" + err.decode())
    assert live.returncode == 130, err.decode()
    segment = tmp_path / "server.log"
    with srv.log.open("rb") as fh:
        fh.seek(offset)
        segment.write_bytes(fh.read())
    m_live = json.loads(live_out.read_text())["overall"]
    logs = Cli().json("measure", "logs", str(segment))
    m_logs = logs["overall"]
    assert m_live["num_drafts"] == a["num_drafts"] > 0
    assert m_live["num_accepted_tokens"] == a["num_accepted_tokens"]
    assert m_live["num_draft_tokens"] == a["num_draft_tokens"]
    assert m_logs["num_draft_tokens"] == a["num_draft_tokens"]
    assert m_logs["num_accepted_tokens"] == a["num_accepted_tokens"]
    # drafts are not logged: n-gram drafts can be shorter than K, so the count is the one the
    # printed τ (2 decimals) and per-position rates (3 decimals) allow
    lo, hi = logs["drafts_range"]
    assert lo <= a["num_drafts"] <= hi and hi - lo <= 0.02 * a["num_drafts"]
    err = abs(m_logs["num_drafts"] - a["num_drafts"])
    for got, want in zip(m_logs["accepted_per_pos"], a["accepted_per_pos"], strict=True):
        assert got == pytest.approx(want, abs=0.0005 * a["num_drafts"] + err + 1e-9)
    report(
        "measure-agreement",
        {
            "drafts": {"bench": a["num_drafts"], "live": m_live["num_drafts"],
                       "logs": m_logs["num_drafts"], "logs_range": [lo, hi]},
            "rho": {"bench": a["draft_acceptance_rate"], "live": m_live["draft_acceptance_rate"],
                    "logs": m_logs["draft_acceptance_rate"]},
            "tau": {"bench": a["mean_acceptance_length"], "live": m_live["mean_acceptance_length"],
                    "logs": m_logs["mean_acceptance_length"]},
        },
    )  # fmt: skip
