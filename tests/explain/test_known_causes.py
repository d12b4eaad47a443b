"""Attribution on A/Bs whose cause is known by construction: both sides made by the simulator
(no server, no clock), one mechanism made dominant in each — a weak first-position α, a high
verify cost at a large batch, long prompts through a small prefill budget, a candidate that holds
fewer requests — and ``explain`` must rank it first, with the remedy aimed at it."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from alphagate.explain import ExplainConfig, explain_bench
from alphagate.explain.records import LevelExplanation, Mechanism, Metric
from alphagate.specs import DeploymentConfig, drafter_for, resolve_deployment
from tests.explain.simulated import Side, Traffic, simulated_ab

A100 = DeploymentConfig(model="llama-3.1-8b", gpu="a100-80gb")
SMALL_BUDGET = DeploymentConfig(model="llama-3.1-8b", max_num_batched_tokens=256)
DRAFT_MODEL = DeploymentConfig(
    model="llama-3.1-8b", gpu="a100-80gb", drafter=drafter_for("draft_model")
)


@dataclass(frozen=True)
class Case:
    base: Side
    cand: Side
    traffic: Traffic
    metric: Metric
    cause: Mechanism
    share: float  # the least share of the rise the cause must hold (the first run's, less margin)


CASES = {
    "weak first-position α": Case(
        Side(0, A100), Side(4, A100, (0.4, 0.95, 0.95, 0.95)),
        Traffic(16, 80, (30, 60), 64, warmup=16), "itl_per_token_p99_ms", "rejection", 0.35,
    ),
    "verify cost at a large batch": Case(
        Side(0, A100), Side(8, A100, (0.5,)),
        Traffic(32, 96, (30, 60), 64, warmup=32), "itl_per_token_p99_ms", "verify", 0.4,
    ),
    "long prompts, small prefill budget": Case(
        Side(0, SMALL_BUDGET), Side(6, SMALL_BUDGET, (0.7,)),
        Traffic(16, 80, (600, 900), 64, warmup=16), "ttft_p99_ms", "prefill", 0.7,
    ),
    "KV room caps the batch": Case(
        Side(0, DRAFT_MODEL), Side(4, DRAFT_MODEL, (0.7,), cap=10),
        Traffic(16, 80, (80, 120), 48, warmup=16), "ttft_p99_ms", "capacity", 0.45,
    ),
}  # fmt: skip


_EXPLAINED: dict[str, LevelExplanation] = {}


def _explain(name: str) -> LevelExplanation:
    """The case's A/B explained (once per session: two tests read the same one); the candidate
    sends no per-request counts, so acceptance comes from its chunks — one step each."""
    if name not in _EXPLAINED:
        case = CASES[name]
        result, records = simulated_ab(case.base, case.cand, case.traffic, counts=False)
        out = explain_bench(
            result, records, resolve_deployment(case.cand.deployment), source="simulated",
            config=ExplainConfig(bootstrap=100),
        )  # fmt: skip
        (_EXPLAINED[name],) = out.levels
    return _EXPLAINED[name]


@pytest.mark.parametrize("name", CASES)
def test_the_injected_cause_ranks_first(name: str) -> None:
    case = CASES[name]
    lv = _explain(name)
    m = next(x for x in lv.metrics if x.metric == case.metric)
    assert m.ratio > 1.2, m  # the injected cause made the figure worse
    top = m.factors[0]
    assert top.mechanisms == [case.cause], [(f.mechanisms, f.share) for f in m.factors]
    assert top.share is not None and top.share >= case.share
    assert top.share_interval is not None and top.share_interval.low > 0
    # the replays are the runs themselves here: nothing left unexplained but resampling noise
    assert m.residual == pytest.approx(1.0, abs=0.25)
    assert m.simulated_ratio * m.residual == pytest.approx(m.ratio)
    # the change is gain × the factors
    product = m.gain
    for f in m.factors:
        product *= f.factor
    assert product == pytest.approx(m.simulated_ratio, rel=1e-6)


def test_the_guides_exercise() -> None:
    """Mean ITL per token falls by about a quarter while P99 rises by about a sixth: rejected
    steps yield one token at the verify step's price, and at P99 the tail is made of them."""
    result, records = simulated_ab(
        Side(0, A100), Side(2, A100, (0.4,)), Traffic(16, 100, (4, 8), 64, warmup=16), counts=False
    )
    mean = {lv.target: lv.overall.itl_per_token_ms.mean for lv in result.levels}
    assert mean["candidate"] / mean["baseline"] == pytest.approx(0.76, abs=0.03)
    out = explain_bench(
        result,
        records,
        resolve_deployment(A100),
        source="exercise",
        config=ExplainConfig(bootstrap=100),
    )
    m = next(x for x in out.levels[0].metrics if x.metric == "itl_per_token_p99_ms")
    assert m.ratio == pytest.approx(1.17, abs=0.03)
    assert m.factors[0].mechanisms == ["rejection"] and (m.factors[0].share or 0) > 0.5
    assert m.factors[1].mechanisms == ["verify"]


def test_a_capped_candidate_is_seen_as_capped_and_more_kv_room_is_the_remedy() -> None:
    lv = _explain("KV room caps the batch")
    assert lv.batch_cap == (256, 10)
    kv = next(r for r in lv.remedies if r.kind == "kv_room")
    assert kv.flags[0] == "--kv-cache-memory-bytes" and int(kv.flags[1]) > 0
    assert "KV room for 16 requests" in kv.title
    ttft = next(x for x in lv.metrics if x.metric == "ttft_p99_ms")
    assert kv.ttft_p99_ms < 0.6 * ttft.candidate_ms  # the queue is gone


def test_an_uncapped_candidate_is_not_seen_as_capped() -> None:
    """Long prompts keep requests waiting in prefill, so fewer stream at once — but the replay
    without a cap shows the same: no capacity mechanism, no KV remedy."""
    lv = _explain("long prompts, small prefill budget")
    assert lv.batch_cap == (256, 256)
    assert all(r.kind != "kv_room" for r in lv.remedies)
    assert any(r.kind == "max_batched_tokens" for r in lv.remedies)


def test_each_sides_ceiling_is_what_its_kv_room_holds() -> None:
    """The same capped candidate on a deployment whose KV room holds just that: one A100 left
    27.5% of its memory keeps 20,900 KV tokens without the draft model and 1,634 beside it, for
    requests of about 149 tokens (+ 4 drafts and 4 lookahead slots while speculating): 140 and
    10 — the rule plan and simulate use, and the capacity is still the cause."""
    dep = DRAFT_MODEL.model_copy(update={"tp": 1, "gpu_memory_utilization": 0.275})
    r = resolve_deployment(dep)
    assert (r.kv_capacity_tokens_without_draft, r.kv_capacity_tokens) == (20_900, 1_634)
    result, records = simulated_ab(
        Side(0, dep), Side(4, dep, (0.7,), cap=10), Traffic(16, 80, (80, 120), 48, warmup=16),
        counts=False,
    )  # fmt: skip
    (lv,) = explain_bench(
        result, records, r, source="simulated", config=ExplainConfig(bootstrap=100)
    ).levels
    assert lv.batch_cap == (140, 10)
    assert "what each side's KV room holds" in lv.batch_cap_source
    ttft = next(x for x in lv.metrics if x.metric == "ttft_p99_ms")
    assert ttft.factors[0].mechanisms == ["capacity"]
