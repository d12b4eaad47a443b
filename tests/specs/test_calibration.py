"""Which deployment a calibration profile applies to — the rule lives with the profile, so the
Python API and every verb refuse alike: a setting asked for that differs from the one it was
fitted for is refused naming its flag; the same setting, or none, passes."""

from __future__ import annotations

import pytest

from alphagate.core.errors import ConfigError
from alphagate.specs.calibration import PROFILE_SETTINGS, CalibrationProfile
from alphagate.specs.deployment import DeploymentConfig


def _profile() -> CalibrationProfile:
    return CalibrationProfile(
        deployment=DeploymentConfig(model="llama-3.1-8b", gpu="h100", tp=1, max_num_seqs=64),
        deployment_description="Llama-3.1-8B on 1× H100",
        functional_form="test",
        coefficients=[],
        points=[],
        rms_residual_pct=1.0,
        valid_concurrency=(1, 16),
        valid_k=(3, 3),
        sources=["test"],
    )


def test_the_same_settings_or_none_fit() -> None:
    p = _profile()
    p.check_fits({})
    p.check_fits({"model": "Llama-3.1-8B", "gpu": "h100", "tp": 1, "max_num_seqs": 64})


@pytest.mark.parametrize(
    ("name", "asked", "flag"),
    [
        ("gpu", "a100-80gb", "--gpu"),
        ("tp", 2, "--tp"),
        ("model", "llama-3.3-70b", "--model"),
        ("max_num_seqs", 256, "--max-num-seqs"),
        ("max_num_batched_tokens", 2048, "--max-num-batched-tokens"),
        ("method", "ngram", "--method"),
    ],
)
def test_another_setting_is_refused_naming_its_flag(name: str, asked: object, flag: str) -> None:
    with pytest.raises(ConfigError) as e:
        _profile().check_fits({name: asked}, "p.json")
    assert e.value.field == name and f"p.json was fitted for {flag} " in str(e.value)


def test_every_setting_is_read_from_the_profiles_deployment() -> None:
    d = _profile().deployment
    assert {k: f(d) for k, f in PROFILE_SETTINGS.items()}["max_num_seqs"] == 64
    assert set(PROFILE_SETTINGS) >= {"model", "gpu", "tp", "dtype", "method", "draft"}


def test_the_python_api_refuses_a_profile_of_another_deployment() -> None:
    import alphagate as ag

    p = _profile()
    other = p.apply(DeploymentConfig(model="llama-3.1-8b", gpu="a100-80gb", tp=1, max_num_seqs=64))
    cfg = ag.SweepConfig(
        deployment=other, workload=ag.WorkloadConfig(), ks=(1,), alphas=(0.7,),
        concurrencies=(1,), simulate_breakeven=False, num_requests=20,
    )  # fmt: skip
    with pytest.raises(ConfigError, match="fitted for --gpu h100") as e:
        ag.simulate(cfg, p)
    assert e.value.field == "gpu"
    wl = ag.WorkloadConfig(classes=(ag.TrafficClass(name="chat", share=1.0, alpha=0.7),))
    req = ag.PlanRequest(deployment=other, calibration=p, workload=wl, concurrency=1)
    with pytest.raises(ConfigError, match="fitted for --gpu h100"):
        ag.build_plan(req)
    p.check_deployment(p.deployment)  # its own deployment fits
