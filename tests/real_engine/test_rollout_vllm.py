"""The rollout's two contracts with the real engine (vLLM's 0.32 CPU build):

- every command a plan prints for vLLM is accepted by the installed vLLM's own CLI parser and
  engine-args construction (``vllm_cli_check.py``, run in the vLLM virtualenv, starts nothing),
  and what vLLM understood is the deployment the plan modelled;
- vLLM's per-request spec-decode counts (``--per-request-spec-decode-metrics summary``), which
  bench records with each request's dataset class, sum to the server's counters over the same
  window — for a run of two classes and for a run of one — so that per-class α is evidence.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Cli
from tests.real_engine.harness import VLLM_PYTHON, _env, vllm_server

CHECK = Path(__file__).with_name("vllm_cli_check.py")
CODE = [
    "def fibonacci(n):\n    ",
    "import os\nimport sys\n\n\ndef main():\n    ",
    "for i in range(10):\n    if i % 2 == 0:\n        ",
    "def read_lines(path):\n    with open(path) as f:\n        ",
]
PROSE = [
    "The old lighthouse keeper climbed the stairs every evening, and",
    "In the spring the river rose over its banks and the villagers",
    "She had never seen the sea before, so when the train finally",
    "After the concert we walked home through the quiet streets while",
]
PLANS = {
    # the default scenario: Llama-3.3-70B FP8 on H100s, 70% chat / 30% code, 64 with peaks of 256
    "70b-fp8": ["--class", "chat:0.7:0.7", "--class", "code:0.3:0.4", "-c", "64",
                "--peak-concurrency", "256"],
    # an 8B in BF16 with the KV cache in FP8, two classes at 16
    "8b-bf16": ["--model", "llama-3.1-8b", "--kv-dtype", "fp8", "--class", "chat:0.6:0.75",
                "--class", "rag:0.4:0.5", "-c", "16", "--served-model", "team-llama"],
    # online FP8 quantization of a BF16 checkpoint, on an engine without the schedule
    "1b-fp8-online": ["--model", "llama-3.2-1b", "--dtype", "fp8", "--class", "chat:1:0.7",
                      "-c", "8", "--engine-version", "0.11", "--url", "http://127.0.0.1:9000"],
}  # fmt: skip


def _vllm_lines(plan: dict[str, Any]) -> list[str]:
    lines = [c for s in plan["stages"] for c in s["commands"] if c.startswith("vllm ")]
    assert lines, "the plan prints no vLLM command"
    return lines


def _parse(lines: list[str]) -> list[dict[str, Any]]:
    # HF_HUB_OFFLINE makes vLLM's EngineArgs swap a hub id for its local snapshot, which a CI
    # machine does not have; without it, building the engine's arguments touches no network
    env = {k: v for k, v in _env().items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    out = subprocess.run(
        [str(VLLM_PYTHON), str(CHECK)],
        input=json.dumps(lines),
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=True,
    )
    return [json.loads(x) for x in out.stdout.splitlines() if x.startswith("{")]


@pytest.mark.parametrize("name", list(PLANS))
def test_every_printed_vllm_command_is_accepted_by_vllm_and_is_the_modelled_deployment(
    name: str, tmp_path: Path
) -> None:
    plan = Cli().json("plan", *PLANS[name], "--out", str(tmp_path / "plan.md"))
    parsed = _parse(_vllm_lines(plan))
    bad = [p for p in parsed if not p["ok"]]
    assert not bad, bad
    d = plan["deployment_detail"]
    serves = [p for p in parsed if p["kind"] == "serve"]
    assert len(serves) == 2  # the baseline as it runs today, and the staging replica
    for p in serves:
        assert p["tensor_parallel_size"] == d["tp"]
        assert p["max_num_seqs"] == 256 and p["max_num_batched_tokens"] == 8192
        assert p["kv_cache_dtype"] == ("fp8" if d["kv_dtype"] == "fp8" else "auto")
        if name == "1b-fp8-online":
            assert p["quantization"] == "fp8"  # BF16 weights quantized as they load
        else:
            assert p["quantization"] is None  # the checkpoint is already in the modelled dtype
            assert (p["model"].endswith("FP8-dynamic")) == (d["weight_dtype"] == "fp8")
        if "--served-model" in PLANS[name]:
            assert p["served_model_name"] == ["team-llama"]
    base, cand = serves
    assert base["speculative_config"] is None
    want = (
        plan["speculative_config"]
        if plan["dynamic_k_supported"]
        else plan["speculative_config_static"]
    )
    assert cand["speculative_config"] == want
    assert cand["per_request_spec_decode_metrics"] == (
        "summary" if plan["dynamic_k_supported"] else "none"
    )
    assert cand["port"] == (9001 if name == "1b-fp8-online" else 8001)
    for p in parsed:
        if p["kind"] == "bench serve":
            assert p["model"] == plan["served_model"]


def _dataset(path: Path, n: int, classes: dict[str, list[str]]) -> Path:
    rows = [
        {"prompt": ps[i % len(ps)], "class": cls, "max_tokens": 32}
        for cls, ps in classes.items()
        for i in range(n)
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def _counts(est: dict[str, Any]) -> tuple[float, float, float]:
    return est["num_drafts"], est["num_draft_tokens"], est["num_accepted_tokens"]


def test_per_request_counts_sum_to_the_counters_per_class(
    tiny: Any, logdir: Path, tmp_path: Path
) -> None:
    spec = {"method": "eagle3", "model": str(tiny.eagle3), "num_speculative_tokens": 3}
    both = _dataset(tmp_path / "both.jsonl", 8, {"code": CODE, "prose": PROSE})
    cli = Cli()
    with vllm_server(
        tiny.target,
        "tiny",
        spec,
        logdir,
        extra_args=("--per-request-spec-decode-metrics", "summary"),
    ) as srv:
        for out, extra in (("mixed", []), ("code-only", ["--only-class", "code"])):
            r = cli.run(
                "bench", "--url", srv.url, "--model", "tiny", "--dataset", str(both),
                "--concurrency", "2", "--num-prompts", "16", "--out", str(tmp_path / out), *extra,
            )  # fmt: skip
            assert r.exit_code == 0, r.output
    figures = {}
    for out in ("mixed", "code-only"):
        summary = json.loads((tmp_path / out / "summary.json").read_text())
        (lv,) = summary["levels"]
        ra = lv["request_acceptance"]
        assert ra is not None and ra["requests_with_counts"] == ra["requests"] == 16
        # the window had this run's requests only: the replies' counts are the counters' increase
        assert _counts(ra["overall"]) == _counts(lv["acceptance"])
        per_class = [_counts(e) for e in ra["classes"].values()]
        assert tuple(map(sum, zip(*per_class, strict=True))) == _counts(ra["overall"])
        figures[out] = {c: e["alpha_iid"] for c, e in ra["classes"].items()}
    assert set(figures["mixed"]) == {"code", "prose"} and set(figures["code-only"]) == {"code"}
    # the code class measured alone reads as the code class of the mixed run (greedy: the same
    # prompts give the same drafts)
    assert figures["code-only"]["code"] == pytest.approx(figures["mixed"]["code"], abs=0.05)
    m = cli.json("measure", "bench", str(tmp_path / "mixed" / "summary.json"), "--min-drafts", "1")
    assert set(m["classes"]) == {"code", "prose"}
    g = cli.json(
        "gate", "--bench", str(tmp_path / "mixed" / "summary.json"), "--min-alpha", "0.01",
        "--class", "code", "--min-drafts", "1",
    )  # fmt: skip
    assert (
        g["decision"] == "pass"
        and "per-request counts of class code" in g["results"][0]["evidence"]
    )
