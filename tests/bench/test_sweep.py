"""The knee search, pure: doubling then bisection against a target whose SLO breaks at a known
load, the shared doubling loads of an A/B, and a run stopped half-way."""

from __future__ import annotations

import asyncio

import pytest

from alphagate.bench.sweep import KneeSearch, KneeSweep, Sweep, ladder, parse_sweep
from alphagate.core.errors import ConfigError


def test_parse_sweep_and_ladder() -> None:
    s = parse_sweep("concurrency:1..512")
    assert (s.kind, s.lo, s.hi) == ("concurrency", 1, 512)
    assert ladder(s) == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
    assert ladder(parse_sweep("c:3..40")) == [3, 6, 12, 24, 40]
    r = parse_sweep("rate:0.5..6", tolerance=0.05)
    assert r.kind == "rate" and r.tolerance == 0.05 and ladder(r) == [0.5, 1, 2, 4, 6]
    assert r.label(2.5) == "r2.5" and s.label(16) == "c16"


@pytest.mark.parametrize(
    "text", ["conc:1..4", "concurrency:8..2", "concurrency:1.5..4", "rate:0..3"]
)
def test_parse_sweep_rejects(text: str) -> None:
    with pytest.raises(ConfigError):
        parse_sweep(text)


def _search(sweep: Sweep, breaks_above: float) -> KneeSearch:
    """Run the doubling and the bisection against a target that meets the SLO up to a load."""
    s = KneeSearch(sweep, "t")
    for load in ladder(sweep):
        s.record(load, load <= breaks_above)
        if not load <= breaks_above:
            break
    while (nxt := s.next_load()) is not None:
        s.record(nxt, nxt <= breaks_above)
    return s


@pytest.mark.parametrize("capacity", [1, 2, 3, 5, 7, 12, 31, 63, 100, 255, 511])
def test_concurrency_knee_within_one_bisection_step(capacity: int) -> None:
    k = _search(Sweep(kind="concurrency", lo=1, hi=512), capacity).knee()
    assert k.knee is not None and k.first_failing is not None
    assert k.knee <= capacity < k.first_failing
    # the last step: adjacent concurrencies, or within the 10% tolerance
    assert k.first_failing - k.knee == 1 or k.first_failing <= k.knee * 1.1
    assert len(set(k.loads)) == len(k.loads)  # no load runs twice
    assert not k.capped
    exact = _search(Sweep(kind="concurrency", lo=1, hi=512, tolerance=0.001), capacity).knee()
    assert (exact.knee, exact.first_failing) == (capacity, capacity + 1)


def test_rate_knee_is_found_to_the_tolerance() -> None:
    sweep = Sweep(kind="rate", lo=0.5, hi=64, tolerance=0.05)
    for capacity in (0.7, 3.3, 10.0, 47.0):
        k = _search(sweep, capacity).knee()
        assert k.knee is not None and k.first_failing is not None
        assert k.knee <= capacity < k.first_failing <= k.knee * 1.05 * 1.01


def test_edges_lowest_fails_and_never_fails() -> None:
    sweep = Sweep(kind="concurrency", lo=2, hi=16)
    none = _search(sweep, 1).knee()
    assert none.knee is None and none.first_failing == 2 and none.loads == [2]
    capped = _search(sweep, 1000).knee()
    assert capped.knee == 16 and capped.first_failing is None and capped.capped


def test_ab_sweep_shares_doubling_loads_then_bisects_each() -> None:
    capacity = {"baseline": 5, "candidate": 11}
    calls: list[tuple[str, float]] = []

    async def run(target: str, load: float) -> bool | None:
        calls.append((target, load))
        return load <= capacity[target]

    ks = KneeSweep(Sweep(kind="concurrency", lo=1, hi=64), ["baseline", "candidate"])
    summary = asyncio.run(ks.run(run))
    # both targets run every doubling load until both have failed once (16 for the candidate)
    assert calls[:10] == [(t, x) for x in (1, 2, 4, 8, 16) for t in ("baseline", "candidate")]
    knees = {k.target: k for k in summary.knees}
    assert knees["baseline"].knee == 5 and knees["baseline"].first_failing == 6
    assert knees["candidate"].knee == 11 and knees["candidate"].first_failing == 12
    assert summary.knee_ratio == pytest.approx(11 / 5)


def test_a_stopped_run_keeps_what_it_found() -> None:
    async def run(target: str, load: float) -> bool | None:
        return None if load >= 8 else True

    ks = KneeSweep(Sweep(kind="concurrency", lo=1, hi=64), ["default"])
    summary = asyncio.run(ks.run(run))
    (k,) = summary.knees
    assert k.loads == [1, 2, 4] and k.knee == 4 and summary.knee_ratio is None
