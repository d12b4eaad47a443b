"""Every remedy ``explain`` prints as a ``vllm serve`` line is accepted by the installed vLLM's own
CLI parser and engine-args construction (``vllm_cli_check.py``, starts nothing), and is what the
remedy says: its K, its batch-size schedule, its token budget, its KV room."""

from __future__ import annotations

import json

from alphagate.explain import explain_bench
from alphagate.specs import DeploymentConfig, drafter_for, resolve_deployment
from tests.explain.simulated import Side, Traffic, simulated_ab
from tests.real_engine.test_rollout_vllm import _parse

SMALL_BUDGET = DeploymentConfig(model="llama-3.1-8b", max_num_batched_tokens=256)
DRAFT_MODEL = DeploymentConfig(
    model="llama-3.1-8b", gpu="a100-80gb", drafter=drafter_for("draft_model")
)


def test_every_printed_remedy_is_accepted_by_vllm_as_printed() -> None:
    remedies = []
    for dep, cand, traffic in (
        (SMALL_BUDGET, Side(6, SMALL_BUDGET, (0.7,)), Traffic(16, 48, (600, 900), 32)),
        (DRAFT_MODEL, Side(4, DRAFT_MODEL, (0.7,), cap=10), Traffic(16, 48, (80, 120), 32)),
    ):
        result, records = simulated_ab(Side(0, dep), cand, traffic, counts=False)
        (lv,) = explain_bench(result, records, resolve_deployment(dep), source="sim").levels
        remedies += [r for r in lv.remedies if r.command]
    kinds = {r.kind for r in remedies}
    assert {"k_by_batch", "off_above", "smaller_k", "max_batched_tokens", "kv_room"} <= kinds
    parsed = _parse([r.command for r in remedies if r.command])
    assert len(parsed) == len(remedies) and not [p for p in parsed if not p["ok"]], parsed
    for r, p in zip(remedies, parsed, strict=True):
        flags = dict(zip(r.flags[::2], r.flags[1::2], strict=True))
        if "--speculative-config" in flags:
            assert p["speculative_config"] == json.loads(flags["--speculative-config"])
        if "--max-num-batched-tokens" in flags:
            assert p["max_num_batched_tokens"] == int(flags["--max-num-batched-tokens"])
        if "--kv-cache-memory-bytes" in flags:
            assert p["kv_cache_memory_bytes"] == int(flags["--kv-cache-memory-bytes"])
