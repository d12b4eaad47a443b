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
