"""Prometheus exposition → spec-decode counters → deltas, on real prometheus_client output."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, Counter, generate_latest

from alphagate.measure.prom import parse_spec_counters, spec_delta


def _exposition(engines: dict[str, tuple[float, float, float, list[float]]]) -> str:
    reg = CollectorRegistry()
    labels = ["model_name", "engine"]
    drafts = Counter(
        "vllm:spec_decode_num_drafts", "Number of spec decoding drafts.", labels, registry=reg
    )
    tokens = Counter(
        "vllm:spec_decode_num_draft_tokens", "Number of draft tokens.", labels, registry=reg
    )
    acc = Counter(
        "vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.", labels, registry=reg
    )
    pos = Counter(
        "vllm:spec_decode_num_accepted_tokens_per_pos",
        "Accepted tokens per draft position.",
        [*labels, "position"],
        registry=reg,
    )
    for eng, (d, t, a, per_pos) in engines.items():
        drafts.labels("m", eng).inc(d)
        tokens.labels("m", eng).inc(t)
        acc.labels("m", eng).inc(a)
        for i, v in enumerate(per_pos):
            pos.labels("m", eng, str(i)).inc(v)
    return generate_latest(reg).decode()


def test_engines_are_summed_and_created_samples_ignored() -> None:
    text = _exposition({"0": (100, 300, 150, [70, 50, 30]), "1": (50, 150, 60, [30, 20, 10])})
    assert "_created" in text
    c = parse_spec_counters(text)
    assert (c.drafts, c.draft_tokens, c.accepted) == (150, 450, 210)
    assert c.per_pos == {0: 100, 1: 70, 2: 40}


def test_delta_matches_vllm_formulas() -> None:
    # engines.md §2.2 log example: 609 drafted, 206 accepted, K = 3 → 203 drafts, τ 2.01, ρ 33.8%
    before = parse_spec_counters(_exposition({"0": (1000, 3000, 900, [500, 260, 140])}))
    after = parse_spec_counters(_exposition({"0": (1203, 3609, 1106, [622, 318, 166])}))
    a = spec_delta([before], [after])
    assert a.num_drafts == 203 and a.num_draft_tokens == 609 and a.num_accepted_tokens == 206
    assert a.mean_acceptance_length == pytest.approx(2.01, abs=5e-3)
    assert a.draft_acceptance_rate == pytest.approx(0.338, abs=5e-4)
    assert a.per_position_acceptance == pytest.approx([122 / 203, 58 / 203, 26 / 203])
    assert a.alpha_by_pos[1] == pytest.approx(58 / 122)
    assert a.k == 3 and not a.counter_reset


def test_counter_reset_and_replicas() -> None:
    b1 = parse_spec_counters(_exposition({"0": (500, 1500, 600, [300, 200, 100])}))
    a1 = parse_spec_counters(_exposition({"0": (40, 120, 48, [24, 16, 8])}))  # replica 1 restarted
    b2 = parse_spec_counters(_exposition({"0": (10, 30, 12, [6, 4, 2])}))
    a2 = parse_spec_counters(_exposition({"0": (70, 210, 84, [42, 28, 14])}))
    d = spec_delta([b1, b2], [a1, a2])
    assert d.counter_reset
    assert d.num_drafts == 40 + 60 and d.num_accepted_tokens == 48 + 72
    assert d.sources == 2


def test_no_spec_metrics_and_sglang_gauge() -> None:
    plain = parse_spec_counters(
        "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 3\n"
    )
    assert not plain.present
    sg = parse_spec_counters(
        '# TYPE sglang:spec_accept_length gauge\nsglang:spec_accept_length{tp_rank="0"} 2.5\nsglang:spec_accept_length{tp_rank="1"} 2.7\n'
    )
    assert spec_delta([sg], [sg]).sglang_accept_length == pytest.approx(2.6)
