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
    # vLLM's SpecDecoding log example: 609 drafted, 206 accepted, K = 3 → 203 drafts, τ 2.01, ρ 33.8%
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
    assert not plain.present and not plain.speculating and plain.engine
    sg = parse_spec_counters(
        '# TYPE sglang:spec_accept_length gauge\nsglang:spec_accept_length{tp_rank="0"} 2.5\nsglang:spec_accept_length{tp_rank="1"} 2.7\n'
    )
    assert sg.speculating and sg.engine
    assert spec_delta([sg], [sg]).sglang_accept_length == pytest.approx(2.6)
    # SGLang registers the gauge on every server: at 0 it is not speculating
    idle = parse_spec_counters(
        '# TYPE sglang:spec_accept_length gauge\nsglang:spec_accept_length{model_name="m"} 0.0\n'
    )
    assert idle.present and idle.engine and not idle.speculating
    proxy = parse_spec_counters("# TYPE proxy_requests counter\nproxy_requests_total 3\n")
    assert not proxy.engine


def test_a_restart_resets_every_counter_of_its_series_only() -> None:
    """Engine 0 restarts (its counters drop) while engine 1 grows: engine 0 counts from zero —
    all its counters, not just those that went down — and engine 1 by its increase."""
    from alphagate.measure.prom import CounterWindow, acceptance_of

    w = CounterWindow()
    w.add(
        parse_spec_counters(
            _exposition({"0": (1000, 3000, 300, [200, 70, 30]), "1": (0, 0, 0, [0, 0, 0])})
        )
    )
    # engine 0: drafts went down (restart) but accepted went up — a per-counter check would
    # count +900 accepted on top of 500 drafts (ρ 0.6 where the truth is 0.8)
    w.add(
        parse_spec_counters(
            _exposition(
                {"0": (500, 1500, 1200, [500, 400, 300]), "1": (100, 300, 150, [80, 50, 20])}
            )
        )
    )
    a = acceptance_of([w])
    assert a.counter_reset
    assert a.num_drafts == 500 + 100 and a.num_accepted_tokens == 1200 + 150
    assert a.draft_acceptance_rate == pytest.approx(1350 / 1800)


def test_an_engine_that_appears_counts_from_its_start_and_one_that_leaves_stops() -> None:
    from alphagate.measure.prom import CounterWindow, acceptance_of

    w = CounterWindow()
    w.add(
        parse_spec_counters(
            _exposition({"0": (1_000_000, 3_000_000, 1_500_000, [800_000, 500_000, 200_000])})
        )
    )
    w.add(
        parse_spec_counters(
            _exposition(
                {
                    "0": (1_000_100, 3_000_300, 1_500_150, [800_080, 500_050, 200_020]),
                    "1": (40, 120, 60, [30, 20, 10]),
                }
            )
        )
    )
    w.add(parse_spec_counters(_exposition({"1": (90, 270, 130, [70, 40, 20])})))  # engine 0 gone
    a = acceptance_of([w])
    assert a.num_drafts == 100 + 40 + 50 and not a.counter_reset
    assert len(w.batches) == 2 and w.batches[0][0] == 140 and w.batches[1][0] == 50


def test_values_that_are_not_counters_are_refused() -> None:
    for bad in ("NaN", "+Inf", "-3"):
        text = (
            "# TYPE vllm:spec_decode_num_drafts counter\n"
            f'vllm:spec_decode_num_drafts_total{{engine="0"}} {bad}\n'
        )
        with pytest.raises(ValueError, match="not a counter value"):
            parse_spec_counters(text)
