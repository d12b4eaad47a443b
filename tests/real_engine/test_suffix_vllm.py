"""``measure offline --drafter suffix`` against the real vLLM CPU build's suffix decoding
(``method: "suffix"``, arctic-inference's cache): the same counters, exactly.

A suffix-decoding server serves agentic, code-like traffic — prompts, then prompts that quote
the answer they got before, and prompts asked again — one request at a time, and ``bench
--save-text`` records it; ``measure offline --drafter suffix`` replays that log through the
suffix cache. The server's ``/metrics`` deltas and every request's own counts
(``--per-request-spec-decode-metrics``) must equal the replay's: one request at a time, the
server's cache holds exactly what the replay's does (the responses before it, each to its last
step's bonus token). Greedy speculative decoding emits the target's own tokens, so the log is
the one a baseline server would have written; recording it from the suffix server itself makes
the replayed responses the very tokens the server cached, and costs one server start, not two.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import Cli
from tests.real_engine.harness import REPO, report, vllm_server
from tests.real_engine.test_offline_vllm import CODE

MAX_TOKENS = 48
K = 16
SPEC: dict[str, object] = {
    "method": "suffix",
    "num_speculative_tokens": K,
    "suffix_decoding_max_tree_depth": 24,
    "suffix_decoding_max_spec_factor": 2.0,
    "suffix_decoding_min_token_prob": 0.1,
}
DRAFTER = "suffix:max_tree_depth=24,max_spec_factor=2.0,min_token_prob=0.1"
PROMPTS = CODE[:6]
SAVE = ("--save-text",)


def _write(path: Path, prompts: list[str], tag: str) -> Path:
    lines = [
        json.dumps({"prompt": p, "class": f"{tag}{i:02d}", "max_tokens": MAX_TOKENS})
        for i, p in enumerate(prompts)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def _bench(url: str, model: str, dataset: Path, out: Path, *extra: str) -> dict[str, Any]:
    """One request at a time, in the dataset's seeded order (the same on every server)."""
    n = len(dataset.read_text().splitlines())
    r = Cli().run(
        "bench", "--url", url, "--model", model, "--dataset", str(dataset), "--num-prompts",
        str(n), "--concurrency", "1", "--seed", "0", "--out", str(out), "--no-progress", *extra,
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    return json.loads((out / "summary.json").read_text())  # type: ignore[no-any-return]


def _records(out: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (out / "requests.jsonl").read_text().splitlines()]


def _agentic(d: Path, url: str) -> list[dict[str, Any]]:
    """The traffic, served: each prompt; then each prompt again after its own earlier answer (an
    agent that re-asks with the transcript), and two prompts asked twice. Returns both runs'
    summaries; their records are the log, in the order served."""
    first = _bench(url, "suffix", _write(d / "first.jsonl", PROMPTS, "a"), d / "first", *SAVE)
    answers = {r["text"]["prompt"]: r["text"]["output"] for r in _records(d / "first")}
    assert len(answers) == len(PROMPTS)
    quoting = [f"{p}{answers[p]}\n\n\n{p}" for p in PROMPTS]
    again = _write(d / "traffic.jsonl", [*quoting, PROMPTS[0], PROMPTS[3]], "r")
    return [first, _bench(url, "suffix", again, d / "again", *SAVE)]


def _counts(acceptance: dict[str, Any]) -> list[Any]:
    return [acceptance["num_drafts"], acceptance["num_draft_tokens"],
            acceptance["num_accepted_tokens"], acceptance["accepted_per_pos"]]  # fmt: skip


def _summed(runs: list[dict[str, Any]]) -> list[Any]:
    """Two runs' ``/metrics`` deltas added up (the server served them back to back)."""
    a, b = (_counts(r["levels"][0]["acceptance"]) for r in runs)
    return [a[0] + b[0], a[1] + b[1], a[2] + b[2], [x + y for x, y in zip(a[3], b[3], strict=True)]]


def test_the_suffix_replay_equals_vllms_counters(tiny: Any, logdir: Path, tmp_path: Path) -> None:
    extra = ("--per-request-spec-decode-metrics", "summary")
    with vllm_server(tiny.target, "suffix", SPEC, logdir, extra_args=extra) as srv:
        runs = _agentic(tmp_path, srv.url)
    served = [*_records(tmp_path / "first"), *_records(tmp_path / "again")]
    log = tmp_path / "log.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in served))
    pred = Cli().json(
        "measure", "offline", "--log", str(log), "--target", str(tiny.target), "--drafter",
        DRAFTER, "--k", str(K), "--dtype", "bfloat16", "--max-model-len", "1024",
    )  # fmt: skip
    per_request = {r["cls"]: r["spec"] for r in served}
    totals = {"predicted": _counts(pred["overall"]), "vllm": _summed(runs)}
    report(
        "offline/suffix",
        {"k": K, "totals": totals, "wall_s": pred["offline"]["wall_s"],
         "draft_lengths": pred["offline"]["overall"]["draft_length_histogram"]},
    )  # fmt: skip
    assert totals["vllm"][0] > 20 and totals["vllm"][2] > 100, totals
    assert totals["predicted"] == totals["vllm"], totals
    assert (
        pred["offline"]["trajectory_agreement"] > 0.98
    )  # bf16 near-ties; the walk follows the log
    for cls, e in pred["classes"].items():
        got = per_request[cls]
        want = {
            "num_drafts": e["num_drafts"], "num_draft_tokens": e["num_draft_tokens"],
            "num_accepted_tokens": e["num_accepted_tokens"],
            "acceptance_histogram": e["acceptance_histogram"],
        }  # fmt: skip
        assert {key: got[key] for key in want} == want, (cls, got, want)
    assert REPO.exists()


def test_a_suffix_plan_prints_what_vllms_parser_accepts(tmp_path: Path) -> None:
    """Every ``vllm`` line of a suffix plan passes the installed vLLM's own CLI parser and
    engine arguments, and the replica's speculative config is the measured one."""
    from tests.plan.test_plan_suffix import _result
    from tests.real_engine.test_rollout_vllm import _parse, _vllm_lines

    m = _result(tmp_path / "suffix.json", 0.9)
    plan = Cli().json(
        "plan", "--method", "suffix", "--model", "llama-3.1-8b", "--class", "code:1.0",
        "--alpha-from", str(m), "-c", "16", "--out", str(tmp_path / "plan.md"),
    )  # fmt: skip
    parsed = _parse(_vllm_lines(plan))
    assert all(p["ok"] for p in parsed), parsed
    base, cand = [p for p in parsed if p["kind"] == "serve"]
    assert base["speculative_config"] is None
    assert cand["speculative_config"] == plan["speculative_config"]
    assert cand["speculative_config"]["method"] == "suffix"
    report("rollout/suffix", {"speculative_config": cand["speculative_config"]})
