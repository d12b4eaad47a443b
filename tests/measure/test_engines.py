"""Every reading records the engine and version it came from, and SGLang's accept rate is read in
one definition (:mod:`alphagate.measure.engines`): vLLM's ``/version`` and log header, SGLang's
``/get_server_info``, its ``server_args`` line and its ``meta_info`` key names; the rate of a
build before PR #23530 converted (or refused without what the conversion needs); and a gate that
refuses readings defined differently, naming both."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from alphagate.bench.records import spec_of
from alphagate.measure.engines import (
    EngineInfo,
    current_accept_rate,
    definition,
    from_log_line,
    from_meta_keys,
    from_sglang_server_info,
    from_vllm_version,
)
from alphagate.measure.logs import measure_logs
from tests.conftest import Cli

VLLM_LOG = Path(__file__).with_name("vllm_0_32_specdecoding.log")
ARGS = (
    "[2026-05-02 10:00:00] server_args=ServerArgs(model_path='meta-llama/Llama-3.1-8B-Instruct', "
    "tp_size=1, speculative_algorithm='EAGLE3', speculative_num_steps={s}, "
    "speculative_eagle_topk={k}, speculative_num_draft_tokens={n}, max_running_requests=64)"
)


def _decode(t: str, tau: float, rate: float) -> str:
    return (
        f"[2026-05-02 10:00:{t}] Decode batch, #running-req: 8, #token: 4000, token usage: 0.02, "
        f"accept len: {tau:.2f}, accept rate: {rate:.2f}, cuda graph: True, gen throughput "
        "(token/s): 812.40, #queue-req: 0,"
    )


def test_versions_are_read_where_each_engine_reports_them() -> None:
    assert from_vllm_version({"version": "0.32.0"}) == EngineInfo(
        engine="vllm", version="0.32.0", source="GET /version"
    )
    info = from_sglang_server_info(
        {"version": "0.5.10.post1", "model_path": "m", "speculative_num_steps": 5,
         "speculative_eagle_topk": 4, "speculative_num_draft_tokens": 8, "internal_states": []}
    )  # fmt: skip
    assert info is not None and (info.engine, info.version, info.num_draft_tokens) == (
        "sglang", "0.5.10.post1", 8,
    )  # fmt: skip
    assert definition(info) == "tree nodes"
    header = next(x for x in VLLM_LOG.read_text().splitlines() if "version" in x)
    assert from_log_line(header) == EngineInfo(engine="vllm", version="0.32.0", source="log header")
    assert from_log_line("INFO vLLM server version 0.11.2, serving model m").version == "0.11.2"  # type: ignore[union-attr]
    sg = from_log_line(ARGS.format(s=3, k=1, n=4))
    assert sg is not None and (sg.num_steps, sg.eagle_topk, sg.num_draft_tokens) == (3, 1, 4)
    assert definition(sg) == "drafts"
    assert definition(EngineInfo(engine="sglang", source="x")) == "unknown"
    generations = {
        "spec_num_correct_drafts": "≥ 0.5.12",
        "spec_accepted_drafts": "0.5.11",
        "spec_accept_token_num": "≤ 0.5.10",
    }
    for key, versions in generations.items():
        got = from_meta_keys({key: 3})
        assert got is not None and got.version == versions


def test_an_old_accept_rate_is_converted_to_the_current_definition() -> None:
    """Ten verify passes of a 3-draft chain (num_draft_tokens 4) accept 12 drafts: SGLang
    0.5.10 logged (12 + 10) ÷ (10 · 4) = 0.55, 0.5.11 logs 12 ÷ 30 = 0.40 — the bias PR
    #23530 states, (k − m) ÷ (k (k + 1)) = (3 − 1.2) ÷ 12 = 0.15."""
    passes, accepted, n = 10, 12, 4
    old = (accepted + passes) / (passes * n)
    tau = 1 + accepted / passes
    info = EngineInfo(engine="sglang", version="0.5.10", source="x", num_draft_tokens=n)
    now = current_accept_rate(old, tau, info, "here")
    assert now == pytest.approx(accepted / (passes * (n - 1)))
    k, m = n - 1, accepted / passes
    assert old - now == pytest.approx((k - m) / (k * (k + 1)))
    # a current build's rate is left as it is; without a version, τ of the interval tells
    assert current_accept_rate(0.4, tau, info.model_copy(update={"version": "0.5.11"}), "") == 0.4
    unknown = info.model_copy(update={"version": None})
    assert current_accept_rate(old, tau, unknown, "") == pytest.approx(now)
    assert current_accept_rate(now, tau, unknown, "") == pytest.approx(now)
    with pytest.raises(ValueError, match="speculative_num_draft_tokens"):
        current_accept_rate(old, tau, info.model_copy(update={"num_draft_tokens": None}), "x")
    with pytest.raises(ValueError, match="cannot be told"):
        current_accept_rate(old, None, unknown, "x")


def test_every_generation_of_meta_info_keys_gives_the_same_counts() -> None:
    counts = {"spec_verify_ct": 10, "completion_tokens": 23}
    names = [
        ("spec_accept_token_num", "spec_draft_token_num", "≤ 0.5.10"),
        ("spec_accepted_drafts", "spec_proposed_drafts", "0.5.11"),
        ("spec_num_correct_drafts", "spec_num_proposed_drafts", "≥ 0.5.12"),
    ]
    for acc, prop, versions in names:
        spec, problem = spec_of({"source": "sglang", **counts, acc: 12, prop: 30})
        assert problem is None and spec is not None
        assert (spec.num_drafts, spec.num_accepted_tokens, spec.num_draft_tokens) == (10, 12, 30)
        assert spec.version == versions


def test_measure_logs_records_the_engine_and_converts_sglang_rates(tmp_path: Path) -> None:
    vllm = measure_logs(VLLM_LOG.read_text().splitlines(), "vllm.log")
    assert vllm.engine is not None and (vllm.engine.engine, vllm.engine.version) == (
        "vllm",
        "0.32.0",
    )
    # SGLang 0.5.10 (rates τ ÷ n) with its server_args line: converted
    n, taus = 4, [2.2, 2.5, 2.8]
    old = [ARGS.format(s=3, k=1, n=n)] + [_decode(f"{i:02d}", t, t / n) for i, t in enumerate(taus)]
    m = measure_logs(old, "sglang.log")
    assert m.engine is not None and m.engine.num_draft_tokens == n
    want = sum((round(t, 2) - 1) / (n - 1) for t in taus) / len(taus)
    assert m.overall is not None and m.overall.sglang_accept_rate == pytest.approx(want, abs=0.01)
    assert any("converted from the definition before SGLang 0.5.11" in x for x in m.notes)
    # a current build's lines are read as logged
    new = [ARGS.format(s=3, k=1, n=n)] + [
        _decode(f"{i:02d}", t, (t - 1) / (n - 1)) for i, t in enumerate(taus)
    ]
    m2 = measure_logs(new, "sglang.log")
    assert m2.overall is not None and m2.overall.sglang_accept_rate == pytest.approx(want, abs=0.01)
    assert any("as logged" in x for x in m2.notes)
    # without the server_args line the rate cannot be converted: not reported, τ stands
    m3 = measure_logs(old[1:], "sglang.log")
    assert m3.overall is not None and m3.overall.sglang_accept_rate is None
    assert m3.overall.sglang_accept_length == pytest.approx(sum(taus) / 3)
    assert any("accept rate not reported" in x and "num_draft_tokens" in x for x in m3.notes)


def _bench_like(path: Path, spec: dict[str, object], n: int = 30) -> Path:
    """A measure result file standing for a reading: what matters here is its engine."""
    from alphagate.measure.estimate import estimate
    from alphagate.measure.results import MeasureResult

    est = estimate(100.0 * n, 300.0 * n, 150.0 * n, [], k=3)
    m = MeasureResult(verb="measure live", source=str(path), overall=est, engine=EngineInfo(**spec))  # type: ignore[arg-type]
    path.write_text(json.dumps(m.payload()))
    return path


def test_the_gate_refuses_readings_defined_differently(cli: Cli, tmp_path: Path) -> None:
    chain = _bench_like(
        tmp_path / "vllm.json", {"engine": "vllm", "version": "0.32.0", "source": "GET /version"}
    )
    tree = _bench_like(
        tmp_path / "sglang.json",
        {"engine": "sglang", "version": "0.5.23", "source": "GET /get_server_info",
         "num_steps": 3, "eagle_topk": 4, "num_draft_tokens": 8},
    )  # fmt: skip
    r = cli.run(
        "gate",
        "--min-mean-acceptance-length",
        "1.2",
        "--measure",
        str(chain),
        "--measure",
        str(tree),
    )
    assert r.exit_code == 2, r.output
    assert "define acceptance differently" in r.output
    assert "vllm.json" in r.output and "sglang.json" in r.output and "SGLang 0.5.23" in r.output
    # a tree's reading: τ is judged, ρ and α are refused
    ok = cli.run("gate", "--min-mean-acceptance-length", "1.2", "--measure", str(tree))
    assert ok.exit_code == 0, ok.output
    bad = cli.run("gate", "--min-alpha", "0.3", "--measure", str(tree))
    assert bad.exit_code == 2, bad.output
    assert "draft tree" in bad.output and "--min-mean-acceptance-length" in bad.output
    # a chain's reading of either engine: α is judged
    same = cli.run("gate", "--min-alpha", "0.3", "--measure", str(chain))
    assert same.exit_code == 0, same.output
