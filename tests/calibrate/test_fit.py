"""Calibration's fit on synthetic step times with known coefficients: exact when the levels are
laid out as the fit lays them out, within 5% when they are independent simulated runs; what the
data cannot reach stays at the prior and says so."""

from __future__ import annotations

from typing import Literal

import numpy as np
import pytest

import alphagate.calibrate.fit as fit
from alphagate.calibrate.observations import Observation
from alphagate.core.errors import ConfigError
from alphagate.core.traffic import TrafficClass
from alphagate.sim.cost import build_cost_model
from alphagate.sim.engine import Scenario
from alphagate.sim.results import summarize
from alphagate.sim.run import run_scenarios
from alphagate.sim.workload import ClosedLoop, RequestSet, unconditional_table
from alphagate.specs import resolve_deployment
from alphagate.specs.calibration import FittedCoefficient, coefficient_values, with_coefficients
from tests.calibrate.truth import ALPHA, BASE, TRUTH

#: (concurrency, K, prompt, output, requests): decode levels, and one-at-a-time long prefills
LEVELS = [
    (1, 0, 2048, 16, 8),
    (1, 3, 2048, 16, 8),
    (1, 0, 256, 64, 12),
    (16, 0, 256, 64, 128),
    (64, 0, 256, 64, 256),
    (16, 3, 256, 64, 128),
    (64, 3, 256, 64, 256),
    (16, 1, 256, 64, 128),
]


def _observe(
    c: int, k: int, n_in: int, n_out: int, n: int, seed: int, truth: dict[str, float] = TRUTH,
    frontend_s: float = 0.0, delay_s: float = 0.0,
) -> Observation:  # fmt: skip
    """One level run on the simulator with the true coefficients, read as a bench would (each
    request ``delay_s`` + ``frontend_s`` outside the engine, the latter in a serial
    front-end)."""
    cost = build_cost_model(resolve_deployment(with_coefficients(BASE, truth)))
    cls = (
        TrafficClass(name="a", share=1.0, alpha_by_pos=ALPHA)
        if k
        else TrafficClass(name="a", share=1.0, alpha=0.0)
    )
    prompt, output = np.full(n, n_in, dtype=np.int64), np.full(n, n_out, dtype=np.int64)
    reqs = RequestSet(prompt, output, np.zeros(n, dtype=np.int64), np.full(n, np.nan))
    sc = Scenario(k, ClosedLoop(users=c), reqs, unconditional_table((cls,), k), 256,
                  frontend_s=frontend_s, request_delay_s=delay_s)  # fmt: skip
    s = summarize(run_scenarios(cost, [sc], np.random.default_rng(seed))[0])
    assert s.itl_per_chunk_ms.mean is not None and s.ttft_ms.mean is not None
    return Observation(
        f"c{c} K{k}", "synthetic", c, k, ALPHA[:k] if k else None, prompt, output,
        s.itl_per_chunk_ms.mean, s.itl_per_chunk_ms.samples, 0.1, s.ttft_ms.mean, float(n), 0.05,
    )  # fmt: skip


def test_exact_when_the_levels_are_laid_out_as_the_fit_lays_them_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One simulated run per level with the fit's own seeds: y = x·θ exactly, θ comes back.
    These levels repeat exactly, so the floor for what a wall-clock level does not repeat to is
    lowered: the weak prior then moves nothing."""
    monkeypatch.setattr(fit, "MIN_SIMULATED", 1)
    monkeypatch.setattr(fit, "MIN_RUNS", 1)
    monkeypatch.setattr(fit, "LEVEL_FLOOR", 1e-4)
    obs = [_observe(*lv, seed=i) for i, lv in enumerate(LEVELS)]
    prof = fit.fit_profile(BASE, obs, seed=0)
    got = prof.values()
    for name, want in TRUTH.items():
        assert got[name] == pytest.approx(want, rel=1e-3), name
    assert prof.rms_residual_pct < 0.01
    assert prof.request_overhead_s == pytest.approx(0.0, abs=1e-6)


def test_within_5_percent_from_independent_runs() -> None:
    """Levels measured on independent simulated runs (their own acceptance draws and drain): the
    target's time scale and the host costs per step and per sequence come back within 5%; the
    drafter's GPU time, its host time per forward and the host time per speculative step grow
    alike over these levels (K = 1 and 3 only, with the sampling noise of a run), so the data pin
    what speculation adds to a step, not the split — within 5% at the measured levels and at
    levels not measured — and the standard errors say so."""
    obs = [_observe(*lv, seed=100 + i) for i, lv in enumerate(LEVELS)]
    prof = fit.fit_profile(BASE, obs)
    got = prof.values()
    for name in ("target_time_scale", "step_overhead_s", "per_seq_overhead_s"):
        assert got[name] == pytest.approx(TRUTH[name], rel=0.05), name
    by = {c.name: c for c in prof.coefficients}
    split = by["draft_time_scale"].standard_error / by["draft_time_scale"].value
    assert split > 0.1 and by["draft_time_scale"].determined_by == "data, loosely"
    truth = build_cost_model(resolve_deployment(with_coefficients(BASE, TRUTH)))
    fitted = build_cost_model(resolve_deployment(prof.deployment))
    for k, b in ((3, 1.0), (3, 16.0), (1, 16.0), (2, 32.0), (5, 8.0)):
        want = truth.spec_step_time(b, k, 320.0) - truth.decode_time(b, 320.0)
        have = fitted.spec_step_time(b, k, 320.0) - fitted.decode_time(b, 320.0)
        assert float(have) == pytest.approx(float(want), rel=0.05), (k, b)
        assert float(fitted.spec_step_time(b, k, 320.0)) == pytest.approx(
            float(truth.spec_step_time(b, k, 320.0)), rel=0.02
        )
    assert prof.valid_concurrency == (1, 64) and prof.valid_k == (1, 3)
    assert prof.rms_residual_pct < 1.0
    assert all(abs(p.residual_pct) < 2.0 for p in prof.points)


def test_what_the_data_cannot_reach_stays_at_the_prior() -> None:
    """Without a speculative level nothing constrains the drafter: its coefficients keep their
    documented defaults and the profile says the prior set them; K's range is empty."""
    obs = [_observe(*lv, seed=i) for i, lv in enumerate(LEVELS) if lv[1] == 0]
    prof = fit.fit_profile(BASE, obs)
    prior = coefficient_values(BASE)
    by = {c.name: c for c in prof.coefficients}
    for name in ("draft_time_scale", "draft_forward_overhead_s"):
        assert by[name].value == pytest.approx(prior[name]) and by[name].determined_by == "prior"
    assert by["target_time_scale"].value == pytest.approx(TRUTH["target_time_scale"], rel=0.05)
    assert prof.valid_k == (0, 0)
    note = prof.range_note(256, 3)
    assert note is not None and "256" in note and "K=3" in note
    assert prof.range_note(16) is None


def test_the_cost_per_sequence_per_draft_forward_is_fitted_when_the_data_call_for_it() -> None:
    """Held at its prior (zero) where the other terms explain the levels (the levels above: the
    truth has none), freed where speculative steps grow with the batch faster than they can say
    — a CPU-like 40 µs per sequence per draft forward — and then recovered: the steps the fit
    prices at levels not measured agree with the truth's."""
    held = fit.fit_profile(BASE, [_observe(*lv, seed=100 + i) for i, lv in enumerate(LEVELS)])
    by = {c.name: c for c in held.coefficients}
    for name in ("draft_seq_overhead_s", "spec_seq_overhead_s"):
        assert by[name].value == 0.0 and by[name].determined_by == "prior", name
    truth = {**TRUTH, "draft_seq_overhead_s": 40e-6}
    obs = [_observe(*lv, seed=100 + i, truth=truth) for i, lv in enumerate(LEVELS)]
    prof = fit.fit_profile(BASE, obs)
    by = {c.name: c for c in prof.coefficients}
    assert by["draft_seq_overhead_s"].determined_by != "prior"
    assert by["draft_seq_overhead_s"].value == pytest.approx(40e-6, rel=0.25)
    want = build_cost_model(resolve_deployment(with_coefficients(BASE, truth)))
    have = build_cost_model(resolve_deployment(prof.deployment))
    for k, b in ((3, 32.0), (1, 64.0), (5, 8.0)):
        assert float(have.spec_step_time(b, k, 320.0)) == pytest.approx(
            float(want.spec_step_time(b, k, 320.0)), rel=0.03
        ), (k, b)
    assert prof.rms_residual_pct < 1.0


def test_the_front_ends_share_of_the_request_overhead_is_fitted_from_the_baselines_ttft() -> None:
    """Each request spends 1.5 ms outside the engine and 0.5 ms in a serial front-end: at
    concurrency 1 the two are one constant (2 ms), above it the front-end queues the requests a
    closed loop's users send together. The fit recovers both from levels up to concurrency 16,
    and the baseline at 32 and 64, not fitted on, comes out as measured: mean TTFT and output
    tokens per second. Without the front-end (all 2 ms a delay per request) TTFT comes out
    short."""
    from alphagate.calibrate.predict import simulate_level

    fe, delay = 0.5e-3, 1.5e-3
    levels = [lv for lv in LEVELS if lv[1] == 0 and lv[0] <= 16]
    levels += [(8, 0, 256, 64, 64), (1, 3, 2048, 16, 8), (16, 3, 256, 64, 128)]
    obs = [_observe(*lv, seed=i, frontend_s=fe, delay_s=delay) for i, lv in enumerate(levels)]
    prof = fit.fit_profile(BASE, obs)
    assert prof.request_overhead_s == pytest.approx(fe + delay, rel=0.1)
    assert prof.frontend_request_s == pytest.approx(fe, rel=0.1)
    for c in (32, 64):
        held = _observe(c, 0, 256, 64, 256, seed=99, frontend_s=fe, delay_s=delay)
        assert held.ttft_ms is not None
        tput = held.output_tokens.sum() / _duration(c, 256, seed=99, frontend_s=fe, delay_s=delay)
        got, flat = (
            simulate_level(
                prof.deployment, c, 0, None, held.prompt_tokens, held.output_tokens,
                request_overhead_s=prof.request_overhead_s or 0.0, frontend_s=share,
            )
            for share in (prof.frontend_request_s or 0.0, 0.0)
        )  # fmt: skip
        assert got.ttft_ms == pytest.approx(held.ttft_ms, rel=0.02), c
        assert got.output_tokens_per_s == pytest.approx(tput, rel=0.02), c
        # without the front-end: short by some of c × 0.5 ms (prefills queue behind each other
        # as well), and ten times further off
        assert held.ttft_ms - flat.ttft_ms > max(
            0.25 * c * fe * 1e3, 10 * abs(got.ttft_ms - held.ttft_ms)
        ), c
    # without a baseline above concurrency 1 there is nothing to tell the share from
    alone = fit.fit_profile(BASE, [o for o in obs if o.concurrency == 1 or o.k > 0])
    assert alone.request_overhead_s is not None and alone.frontend_request_s is None


def _duration(c: int, n: int, seed: int, frontend_s: float, delay_s: float) -> float:
    """The baseline level's first send to its last token (256-token prompts, 64 out)."""
    cost = build_cost_model(resolve_deployment(with_coefficients(BASE, TRUTH)))
    cls = TrafficClass(name="a", share=1.0, alpha=0.0)
    reqs = RequestSet(np.full(n, 256), np.full(n, 64), np.zeros(n, dtype=np.int64),
                      np.full(n, np.nan))  # fmt: skip
    sc = Scenario(0, ClosedLoop(users=c), reqs, unconditional_table((cls,), 0), 256,
                  frontend_s=frontend_s, request_delay_s=delay_s)  # fmt: skip
    return summarize(run_scenarios(cost, [sc], np.random.default_rng(seed))[0]).duration_s


def test_a_queueing_level_is_refused() -> None:
    obs = _observe(16, 0, 256, 32, 32, seed=1)
    small = BASE.model_copy(update={"max_num_seqs": 8})
    with pytest.raises(ConfigError, match="max_num_seqs"):
        fit.fit_profile(small, [obs])


def _coefficients(set_by: Literal["data", "data, loosely", "prior"]) -> list[FittedCoefficient]:
    return [
        FittedCoefficient(
            name=n, value=1.0, prior=1.0, standard_error=0.1, data_share=0.0, determined_by=set_by
        )
        for n in fit.NAMES
    ]


def test_a_fit_that_explains_nothing_is_unusable() -> None:
    """Above the RMS bound, or with every coefficient still its prior, a fit is no calibration;
    below it with one coefficient the data set, it is."""
    assert (
        fit.unusable_reason(0.3, [*_coefficients("prior")[:-1], *_coefficients("data")[:1]]) is None
    )
    big = fit.unusable_reason(fit.MAX_RMS_RESIDUAL_PCT + 1, _coefficients("data"))
    assert big is not None and "RMS residual" in big and "no coefficient" not in big
    prior = fit.unusable_reason(0.3, _coefficients("prior"))
    assert prior is not None and "no coefficient left its prior" in prior
    assert "RMS" in (fit.unusable_reason(float("nan"), _coefficients("data")) or "")


def test_a_coefficient_the_data_push_to_its_bound_is_written_at_it() -> None:
    """Step times far below what the prior predicts push coefficients to their bounds (costs
    ≥ 0, time scales > 0): each comes back at its bound, never a rounding below it — a profile
    with a cost of −1e−20 s would not load."""
    n = len(fit.NAMES) + 1
    lower = np.asarray([1e-6 if name.endswith("_scale") else 0.0 for name in fit.NAMES] + [0.0])
    at_bound = 0
    for seed in range(100):
        rng = np.random.default_rng(seed)
        prior = np.abs(rng.normal(1e-3, 1e-3, n))
        rows = []
        for _ in range(12):
            x = np.abs(rng.normal(0, 1, n)) * (rng.random(n) < 0.6)
            y = float(x @ prior * rng.uniform(0.01, 0.3)) + 1e-9
            rows.append(fit.DesignRow(None, "decode_step", x, y, 1.0, 1.0))  # type: ignore[arg-type]
        theta = fit._solve(rows, prior, np.ones(n, dtype=bool)).theta
        assert (theta >= lower).all(), seed
        at_bound += int((theta == lower).any())
    assert at_bound > 50  # the bounds are met, not avoided
