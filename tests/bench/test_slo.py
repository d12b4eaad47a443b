"""SLO parsing, per-request latencies worked by hand, and goodput counted from records."""

from __future__ import annotations

import pytest

from alphagate.bench.records import RequestRecord, summarize_level
from alphagate.bench.slo import SLO, goodput_of, missed_bounds, parse_slo, request_latencies_ms
from alphagate.core.errors import ConfigError
from tests.records import streamed


def rec(
    times: list[float],
    tokens: list[int],
    *,
    i: int = 0,
    send: float = 0.0,
    error: str | None = None,
    warmup: bool = False,
) -> RequestRecord:
    return streamed(
        times, tokens, id=i, target="default", send_s=send, error_type=error, warmup=warmup
    )


@pytest.mark.parametrize(
    ("text", "bounds"),
    [
        ("itl_per_token_p99_ms=50,ttft_p99_ms=2000", {"itl_per_token_p99_ms": 50, "ttft_ms": 2000}),
        ("ttft:500 tpot:50 e2el:8000", {"ttft_ms": 500, "tpot_ms": 50, "e2e_ms": 8000}),
        ("time_to_first_token=250, inter_token_latency=10", {"ttft_ms": 250, "tpot_ms": 10}),
        ("e2e_ms=2s", {"e2e_ms": 2000}),
        ("ITL_PER_TOKEN_MAX_MS=80ms", {"itl_per_token_max_ms": 80}),
    ],
)
def test_parse_slo_accepts_the_names_users_type(text: str, bounds: dict[str, float]) -> None:
    slo = parse_slo(text, 0.9)
    assert slo.bounds_ms == bounds and slo.attainment == 0.9


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "at least one bound"),
        ("itl=50", "per chunk or per token"),
        ("ttft_ms=0", "positive"),
        ("ttft_ms=nan", "NAME=MS"),
        ("ttft_ms=1e999", "positive"),
        ("ttft=5,ttft_ms=6", "bounded twice"),
        ("ttft_ms", "NAME=MS"),
        ("speed=5", "not a per-request latency"),
    ],
)
def test_parse_slo_rejects_with_a_reason(text: str, why: str) -> None:
    with pytest.raises(ConfigError, match=why):
        parse_slo(text)


def test_request_latencies_by_hand() -> None:
    # chunks at 10, 20, 50, 52 ms carrying 1, 1, 3, 1 tokens: token gaps 10/1, 30/3 ×3, 2/1
    r = rec([0.010, 0.020, 0.050, 0.052], [1, 1, 3, 1])
    lat = request_latencies_ms(r)
    assert lat["ttft_ms"] == pytest.approx(10.0)
    assert lat["e2e_ms"] == pytest.approx(52.0)
    assert lat["tpot_ms"] == pytest.approx(42.0 / 5)  # (52 − 10) ÷ (6 − 1)
    assert lat["itl_per_token_max_ms"] == pytest.approx(10.0)
    # samples (per token): 10, 10, 10, 10, 2 → P99 = 10
    assert lat["itl_per_token_p99_ms"] == pytest.approx(10.0)
    # one sample per token: 50 chunks of 2 tokens after 10 ms gaps (5 ms per token) and one
    # chunk of 1 token after 50 ms: 100 of the 101 token samples are 5 ms, so P99 = 5 ms
    # (one sample per chunk would give 50 ms)
    times = [0.010 * (i + 1) for i in range(51)] + [0.510 + 0.050]
    slow = request_latencies_ms(rec(times, [1] + [2] * 50 + [1]))
    assert slow["itl_per_token_p99_ms"] == pytest.approx(5.0)
    assert slow["itl_per_token_max_ms"] == pytest.approx(50.0)
    one = request_latencies_ms(rec([0.004], [1]))
    assert one["tpot_ms"] is None and one["itl_per_token_p99_ms"] is None


def test_missed_bounds_and_undefined_quantities() -> None:
    slo = SLO(bounds_ms={"ttft_ms": 15, "itl_per_token_p99_ms": 8, "tpot_ms": 9})
    assert missed_bounds(rec([0.010, 0.020, 0.050, 0.052], [1, 1, 3, 1]), slo) == [
        "itl_per_token_p99_ms"
    ]
    assert missed_bounds(rec([0.030, 0.031], [1, 1]), slo) == ["ttft_ms"]
    # one token: TPOT and ITL do not apply (vLLM counts such a TPOT as 0)
    assert missed_bounds(rec([0.005], [1]), slo) == []
    assert missed_bounds(rec([], [], error="http_500"), slo) is None


def test_goodput_counts_good_requests_over_the_duration() -> None:
    slo = SLO(bounds_ms={"ttft_ms": 20}, attainment=0.75)
    recs = [
        rec([0.010, 0.020], [1, 2], i=0, send=0.0),  # good, 3 tokens
        rec([0.030, 0.040], [1, 1], i=1, send=0.1),  # TTFT 30 ms: missed
        rec([0.005, 0.006], [2, 2], i=2, send=0.2),  # good, 4 tokens
        rec([], [], i=3, send=0.3, error="http_500"),  # failed: never good
        rec([0.001, 0.002], [1, 1], i=4, send=0.0, warmup=True),  # warm-up: not counted
    ]
    g = goodput_of(recs, slo, duration_s=2.0)
    assert (g.requests, g.good) == (4, 2)
    assert g.attainment == 0.5 and not g.meets_slo
    assert g.good_requests_per_s == 1.0 and g.good_output_tokens_per_s == 3.5
    assert g.missed == {"ttft_ms": 1}
    lv = summarize_level("default", "u", "c1", 1, None, recs, None, slo=slo)
    assert lv.goodput is not None and lv.goodput.good == 2
    assert lv.goodput.good_requests_per_s == pytest.approx(2 / lv.overall.duration_s)
    assert SLO(bounds_ms={"ttft_ms": 20}, attainment=0.5).bounds_ms == {"ttft_ms": 20}
    assert goodput_of(recs, SLO(bounds_ms={"ttft_ms": 20}, attainment=0.5), 2.0).meets_slo
