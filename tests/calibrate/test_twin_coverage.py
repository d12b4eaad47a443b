"""Error bars checked on a server whose constants are known: two live twins (no speculation, and
EAGLE-3 at K = 3) run the 8B model with step-time constants chosen inside the documented prior
ranges but away from the defaults. The plan's uncalibrated range for the A/B at concurrency 16
must hold the A/B the twins show there; a profile calibrated on the twins at concurrency 1–8
must narrow that range to at most half its width and still hold it. Seen on this machine: the
A/B 1.460×, the prior range 1.23–1.74×, the calibrated 1.39–1.50× (21% of the width)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from alphagate.calibrate.fit import fit_profile
from alphagate.calibrate.sweep import LiveSweep, SweepRun, run_live_sweep
from alphagate.core.traffic import TrafficClass
from alphagate.plan.predictions import Predictor
from alphagate.plan.records import PlanRequest
from alphagate.specs import DeploymentConfig, WorkloadConfig
from alphagate.specs.calibration import with_coefficients
from alphagate.specs.uncertainty import prior_ranges
from alphagate.specs.workload import FixedLength
from alphagate.twin.background import twin_in_thread
from alphagate.twin.config import TwinConfig

#: wall-clock behaviour: `make test` runs these alone (see the Makefile)
pytestmark = pytest.mark.timing

BASE = DeploymentConfig(model="llama-3.1-8b", weight_dtype="bf16", gpu="h100")
#: Inside the prior ranges (``alphagate simulate --explain-cost`` lists them), away from the
#: defaults: a slower drafter, twice the host time per step and per sequence, a per-step
#: speculative overhead and a costlier draft forward.
TRUTH = {
    "target_time_scale": 1.05,
    "draft_time_scale": 1.3,
    "step_overhead_s": 1.6e-3,
    "per_seq_overhead_s": 4e-6,
    "spec_step_overhead_s": 0.3e-3,
    "draft_forward_overhead_s": 0.2e-3,
}
ALPHA = (0.8, 0.7, 0.6)
TIME_SCALE = 2.0  # the twins run at half speed (see test_twin_roundtrip)
PROMPT, OUTPUT = 256, 32
#: what wall-clock time on a loaded 2-core machine moves a measured speedup (the twins and the
#: client share the process): an end of a range is allowed to miss by this much
WALL_TOL = 0.03


def _throughput(runs: list[SweepRun], url: str) -> float:
    levels = [lv for r in runs if r.url == url for lv in r.result.levels if lv.level == "c16"]
    return sum(lv.overall.output_tokens for lv in levels) / sum(
        lv.overall.duration_s for lv in levels
    )


@pytest.fixture(scope="module")
def measured() -> dict[str, Any]:
    return _measure()


def _measure() -> dict[str, Any]:
    for name, value in TRUTH.items():  # the premise: every constant lies inside its prior
        r = next(x for x in prior_ranges(BASE).ranges if x.coefficient == name)
        assert r.low <= value <= r.high, name
    truth = with_coefficients(BASE, TRUTH)
    workload = WorkloadConfig(classes=(TrafficClass(name="a", share=1.0, alpha_by_pos=ALPHA),))

    def twin(k: int, seed: int) -> TwinConfig:
        return TwinConfig(
            deployment=truth, workload=workload, k=k, seed=seed, time_scale=TIME_SCALE
        )

    with twin_in_thread(twin(0, 1)) as (u0, _), twin_in_thread(twin(3, 2)) as (u3, _):
        sweep = LiveSweep(
            urls=(u0, u3), concurrencies=(1, 4, 8), requests_per_user=4, prompt_tokens=PROMPT,
            output_tokens=OUTPUT,
        )  # fmt: skip
        obs, _ = run_live_sweep(sweep)
        runs: list[SweepRun] = []
        ab = []
        # the A/B at 16: each twin in turn, twice, 12 requests per user so that the run sits at
        # its concurrency as the plan's steady state does (2 per user measured ~7% below it:
        # ramp-up and drain weigh on runs that short)
        for _ in range(2):
            for url in (u0, u3):
                one = sweep.model_copy(
                    update={
                        "urls": (url,), "concurrencies": (16,), "prefill_probe_tokens": None,
                        "requests_per_user": 12, "warmup_requests": 0,
                    }
                )  # fmt: skip
                o, r = run_live_sweep(one)
                ab += o
                runs += r
    spec = next(o for o in ab if o.source == u3)
    return {
        "profile": fit_profile(BASE, obs, time_scale=TIME_SCALE),
        "observed": _throughput(runs, u3) / _throughput(runs, u0),
        "alpha": spec.alpha_by_pos,
        "prompt": float(np.mean(spec.prompt_tokens)),
    }


def _range(measured: dict[str, Any], calibrated: bool) -> tuple[float, float]:
    cls = (TrafficClass(name="a", share=1.0, alpha_by_pos=tuple(measured["alpha"])),)
    wl = WorkloadConfig(
        prompt_len=FixedLength(value=round(measured["prompt"])),
        output_len=FixedLength(value=OUTPUT),
        classes=cls,
    )
    profile = measured["profile"] if calibrated else None
    req = PlanRequest(
        deployment=profile.deployment if profile else BASE,
        workload=wl,
        concurrency=16,
        peak_concurrency=16,
        k=3,
        calibration=profile,
    )
    iv = Predictor(req).sim_intervals(16, cls, 3)[0]
    assert iv.low is not None and iv.high is not None
    return iv.low, iv.high


def test_the_prior_range_holds_the_twins_ab(measured: dict[str, Any]) -> None:
    lo, hi = _range(measured, calibrated=False)
    obs = measured["observed"]
    assert lo * (1 - WALL_TOL) <= obs <= hi * (1 + WALL_TOL), (lo, obs, hi)


def test_calibration_halves_the_range_and_it_still_holds_the_ab(measured: dict[str, Any]) -> None:
    """On a quiet machine the calibrated range is about a fifth of the prior's width (0.21 and
    0.23 in two runs). A sweep that the machine's load disturbed fits wider standard errors —
    as it should: its levels disagree more — (0.55 seen beside the rest of `make test`), so a
    range not halved is measured once more before it fails."""
    for again in (True, False):
        p_lo, p_hi = _range(measured, calibrated=False)
        c_lo, c_hi = _range(measured, calibrated=True)
        if c_hi - c_lo <= 0.5 * (p_hi - p_lo) or not again:
            break
        measured = _measure()
    obs = measured["observed"]
    assert c_hi - c_lo <= 0.5 * (p_hi - p_lo), ((p_lo, p_hi), (c_lo, c_hi))
    assert c_lo * (1 - WALL_TOL) <= obs <= c_hi * (1 + WALL_TOL), (c_lo, obs, c_hi)
