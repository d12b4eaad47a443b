"""A bench level as the simulator's inputs: K and α per class from the best source the run has,
what each side held at once, and the requests in the order they were sent."""

from __future__ import annotations

import numpy as np
import pytest

from alphagate.bench.records import RequestRecord
from alphagate.core.errors import ConfigError
from alphagate.explain.replay import (
    candidate_k,
    class_alphas,
    level_replay,
    observed_batch,
    side_runs,
)
from alphagate.sim.workload import ClosedLoop
from alphagate.specs import DeploymentConfig
from tests.explain.simulated import Side, Traffic, simulated_ab

DEP = DeploymentConfig(model="llama-3.1-8b")


def _record(i: int, send: float, ttft: float, e2e: float, tokens: list[int]) -> RequestRecord:
    times = list(np.linspace(ttft, e2e, len(tokens)))
    return RequestRecord(
        run_id="r", id=i, target="candidate", level="c2", cls=None, prompt_tokens=10,
        output_tokens=sum(tokens), send_s=send, ttft_s=ttft, chunk_times_s=times,
        chunk_tokens=tokens, tokens_per_chunk_source="usage", e2e_s=e2e,
    )  # fmt: skip


def test_the_most_requests_seen_streaming_at_once() -> None:
    recs = [
        _record(0, 0.0, 0.1, 1.0, [1, 2]),
        _record(1, 0.0, 0.2, 0.5, [1, 2]),
        _record(2, 0.5, 0.1, 1.0, [1, 2]),  # starts streaming at 0.6, after request 1 ended
        _record(3, 0.9, 0.1, 0.5, [1, 2]),  # at 1.0: request 0 ends as this one starts
    ]
    assert observed_batch({0: recs}) == 2
    assert observed_batch({0: recs[:2], 1: recs[:1]}) == 2
    assert observed_batch({}) == 0


def test_k_and_alpha_per_class_from_per_request_counts() -> None:
    traffic = Traffic(4, 40, (20, 40), 32, classes={"chat": (0.8,) * 3, "code": (0.3,) * 3})
    result, records = simulated_ab(Side(0, DEP), Side(3, DEP), traffic)
    cand = next(lv for lv in result.levels if lv.target == "candidate")
    runs = side_runs(records, "candidate", cand.level)
    k, source = candidate_k(cand, runs)
    assert (k, source) == (3, "the server's per-request counts (num_spec_tokens)")
    alphas, source = class_alphas(cand, runs, k)
    assert source == "the server's per-request counts"
    assert np.mean(alphas["chat"]) == pytest.approx(0.8, abs=0.12)
    assert np.mean(alphas["code"]) == pytest.approx(0.3, abs=0.12)


def test_without_counts_k_and_alpha_come_from_the_chunks() -> None:
    result, records = simulated_ab(Side(0, DEP), Side(4, DEP, (0.7,)), Traffic(4, 40, (20, 40), 40))
    bare = [r.model_copy(update={"spec": None}) for r in records]
    cand = next(lv for lv in result.levels if lv.target == "candidate")
    cand = cand.model_copy(update={"request_acceptance": None})
    runs = side_runs(bare, "candidate", cand.level)
    k, source = candidate_k(cand, runs)
    assert k == 4 and "largest streamed chunk" in source
    alphas, source = class_alphas(cand, runs, k)
    assert source == "the sizes of the streamed chunks"
    assert np.mean(alphas["default"]) == pytest.approx(0.7, abs=0.1)
    no_spec = [r.model_copy(update={"chunk_tokens": [1] * len(r.chunk_tokens)}) for r in bare]
    with pytest.raises(ConfigError, match="does not look speculative"):
        candidate_k(cand, side_runs(no_spec, "candidate", cand.level))


def test_the_replay_keeps_the_send_order_and_the_warm_up() -> None:
    result, records = simulated_ab(
        Side(0, DEP), Side(2, DEP), Traffic(3, 15, (20, 60), 8, warmup=3)
    )
    cand = next(lv for lv in result.levels if lv.target == "candidate")
    runs = side_runs(records, "candidate", cand.level)
    plan = level_replay(cand, runs)
    sent = [r.send_s for r in plan.records]
    assert sent == sorted(sent) and plan.n == 15 and plan.k == 2
    assert [r.warmup for r in plan.records].count(True) == 3
    assert plan.runs[0].prompt_len.tolist() == [r.prompt_tokens for r in plan.records]
    assert plan.arrivals == [ClosedLoop(users=3)]
    half = plan.subset(np.arange(15) % 2 == 0, 2)
    assert half.n == 15 and half.ids[0].tolist() == list(range(0, 15, 2))
    assert half.arrivals == [ClosedLoop(users=2)]
