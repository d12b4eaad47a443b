"""The figures behind issue 13's checks, printed (the tests assert them; this shows them).

    python benchmarks/calibrate_checks.py curve       # uncalibrated speedup vs batch, 8B + EAGLE-3
    python benchmarks/calibrate_checks.py mean-batch  # achieved mean batch ÷ C, default run length
    python benchmarks/calibrate_checks.py twin        # calibrate against two live twins (~1 min)

``curve``: Llama-3.1-8B BF16 with an EAGLE-3 head, α by position 0.8, 0.7, 0.6, the default
workload (lognormal prompts of 512 and outputs of 256 tokens), K = 2 and 3, H100 and A100, from the
step-time model at a steady batch B (:func:`alphagate.sim.predict.model_speedup`, prefills of the
requests that replace finished ones included), with no calibration.

``mean-batch``: the no-speculation run at each concurrency with ``simulate``'s default number of
requests, over 8 seeds (``simulate``'s seeding): the time-averaged running batch ÷ C.

``twin``: what ``tests/calibrate/test_twin_roundtrip.py`` checks, with every figure printed: two
twins with known coefficients (no speculation, EAGLE-3 at K = 3), calibrated over HTTP at
concurrency 1, 4, 8, then the A/B at concurrency 16 measured and predicted.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from alphagate.core.traffic import TrafficClass
from alphagate.sim.cost import build_cost_model
from alphagate.sim.predict import model_speedup
from alphagate.specs import DeploymentConfig, WorkloadConfig, resolve_deployment

BATCHES = (1, 2, 4, 8, 16, 32, 48, 64)


def curve() -> None:
    wl = WorkloadConfig()
    cls = (TrafficClass(name="a", share=1.0, alpha_by_pos=(0.8, 0.7, 0.6)),)
    print("speedup at steady batch B (uncalibrated defaults), Llama-3.1-8B bf16 + EAGLE-3")
    print("gpu        K " + "".join(f"{'B=' + str(b):>7}" for b in BATCHES))
    for gpu in ("h100", "a100-80gb"):
        dep = DeploymentConfig(model="llama-3.1-8b", weight_dtype="bf16", gpu=gpu)
        cost = build_cost_model(resolve_deployment(dep, wl, max(BATCHES)))
        for k in (2, 3):
            s = [model_speedup(cost, cls, k, float(b), wl) for b in BATCHES]
            print(f"{gpu:10} {k} " + "".join(f"{x:7.3f}" for x in s))


def mean_batch() -> None:
    from alphagate.sim.engine import Scenario
    from alphagate.sim.results import summarize
    from alphagate.sim.run import run_scenarios
    from alphagate.sim.sweep import default_num_requests
    from alphagate.sim.workload import ClosedLoop, sample_requests, unconditional_table

    wl = WorkloadConfig()
    cost = build_cost_model(resolve_deployment(DeploymentConfig(model="llama-3.1-8b"), wl, 256))
    cls = (TrafficClass(name="a", share=1.0, alpha=0.0),)
    print("mean batch ÷ concurrency, default run length, 8 seeds")
    for users in (8, 16, 32, 64, 128, 256):
        n = default_num_requests(users)
        arr = ClosedLoop(users=users)
        got = []
        for li in range(8):
            reqs = sample_requests(wl, n, arr, np.random.default_rng([0, li]))
            sc = Scenario(0, arr, reqs, unconditional_table(cls, 0), 256)
            tr = run_scenarios(cost, [sc], np.random.default_rng([0, li, 999]))[0]
            got.append(summarize(tr).mean_batch / users)
        print(
            f"C={users:<4} requests={n:<5} min {min(got):.3f}  mean {np.mean(got):.3f}  "
            f"max {max(got):.3f}"
        )


def twin() -> None:
    from tests.calibrate import test_twin_roundtrip as rt

    from alphagate.calibrate.fit import fit_profile
    from alphagate.calibrate.predict import predict_level
    from alphagate.calibrate.sweep import LiveSweep, SweepRun, run_live_sweep
    from alphagate.specs.calibration import coefficient_values, with_coefficients
    from alphagate.twin.background import twin_in_thread
    from alphagate.twin.config import TwinConfig

    truth = with_coefficients(rt.BASE, rt.TRUTH)

    def config(k: int, seed: int) -> TwinConfig:
        return TwinConfig(
            deployment=truth, workload=rt.WORKLOAD, k=k, seed=seed, time_scale=rt.TIME_SCALE
        )

    with twin_in_thread(config(0, 1)) as (u0, _), twin_in_thread(config(3, 2)) as (u3, _):
        sweep = LiveSweep(
            urls=(u0, u3), concurrencies=(1, 4, 8), requests_per_user=4, prompt_tokens=256,
            output_tokens=32,
        )  # fmt: skip
        obs, _ = run_live_sweep(sweep)
        ab_runs: list[SweepRun] = []
        ab_obs = []
        for _ in range(2):
            for url in (u0, u3):
                one = sweep.model_copy(
                    update={
                        "urls": (url,),
                        "concurrencies": (16,),
                        "prefill_probe_tokens": None,
                        "requests_per_user": 2,
                        "warmup_requests": 0,
                    }
                )
                o, r = run_live_sweep(one)
                ab_obs += o
                ab_runs += r
    profile = fit_profile(rt.BASE, obs, time_scale=rt.TIME_SCALE)
    print("coefficient                 truth        fitted     error   ±1 s.e.   set by")
    truths = coefficient_values(truth)  # the twins' deployment: TRUTH, the rest its defaults
    for c in profile.coefficients:
        want = truths[c.name]
        se = f"{c.standard_error / c.value:8.1%}" if c.value > 0 else f"{'—':>8}"
        err = f"{c.value / want - 1:+8.1%}" if want > 0 else f"{'—':>8}"
        print(f"{c.name:26} {want:10.4g} {c.value:12.4g} {err} {se}   {c.determined_by}")
    print(f"RMS residual {profile.rms_residual_pct:.2f}%")
    truth_cost = build_cost_model(resolve_deployment(truth))
    fitted = build_cost_model(resolve_deployment(profile.deployment))
    for k, b in ((0, 1.0), (0, 8.0), (0, 16.0), (3, 1.0), (3, 8.0), (3, 16.0)):
        t, f = truth_cost.spec_step_time(b, k, 280.0), fitted.spec_step_time(b, k, 280.0)
        print(
            f"step K={k} B={b:<4g} truth {t * 1e3:.3f} ms  fitted {f * 1e3:.3f} ms  {f / t - 1:+.1%}"
        )
    base = next(o for o in ab_obs if o.source == u0)
    spec = next(o for o in ab_obs if o.source == u3)
    pb = predict_level(profile, 16, 0, None, base.prompt_tokens, base.output_tokens)
    ps = predict_level(profile, 16, 3, spec.alpha_by_pos, spec.prompt_tokens, spec.output_tokens)
    predicted = ps.output_tokens_per_s / pb.output_tokens_per_s
    observed = rt._throughput(ab_runs, u3, "c16") / rt._throughput(ab_runs, u0, "c16")
    print(
        f"A/B at concurrency 16, K=3: predicted {predicted:.3f}×, measured {observed:.3f}×, "
        f"error {predicted / observed - 1:+.1%}"
    )


if __name__ == "__main__":
    checks = {"curve": curve, "mean-batch": mean_batch, "twin": twin}
    for name in sys.argv[1:] or list(checks):
        checks[name]()
