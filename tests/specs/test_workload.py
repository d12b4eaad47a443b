"""Length distributions and the workload: parsed from their flag text and back, sampled with the
mean and second moment their closed forms state (tolerances from the sample), and the steady-state
context a sequence in flight carries."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from alphagate.core.errors import ConfigError
from alphagate.core.traffic import TrafficClass
from alphagate.specs.workload import (
    MAX_LENGTH,
    EmpiricalLength,
    FixedLength,
    LengthDist,
    LognormalLength,
    UniformLength,
    WorkloadConfig,
    length_mean,
    length_second_moment,
    length_spec,
    parse_length,
    sample_lengths,
)

Z = 4.5  # standard errors: a bound a correct sampler breaks with probability ~7e-6


@pytest.mark.parametrize(
    "text", ["fixed:128", "uniform:16:64", "lognormal:256:0.6", "lognormal:300:0"]
)
def test_a_length_flag_parses_and_prints_back(text: str) -> None:
    assert length_spec(parse_length(text)) == text


def test_lognormal_takes_a_default_sigma_and_a_file_its_lines(tmp_path: Path) -> None:
    assert parse_length("lognormal:200") == LognormalLength(mean=200, sigma=0.6)
    f = tmp_path / "lens.txt"
    f.write_text("# observed\n120\n\n80\n")
    d = parse_length(f"file:{f}")
    assert d == EmpiricalLength(values=(120, 80), source=str(f))
    assert length_spec(d) == f"file:{f}" and length_spec(EmpiricalLength(values=(3,))) is None


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("fixed", "is not fixed:N, uniform:LO:HI"),
        ("gamma:3", "is not fixed:N"),
        ("fixed:x", "invalid literal"),
        ("fixed:0", "value input should be greater than or equal to 1"),
        ("uniform:64:16", "low <= high"),
        ("lognormal:inf", "not a finite number"),
        ("lognormal:100:9", "sigma input should be less than or equal to 3"),
        (f"fixed:{MAX_LENGTH + 1}", "less than or equal to 1048576"),
    ],
)
def test_a_bad_length_flag_names_the_problem(text: str, says: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_length(text)
    assert repr(text) in str(info.value) and says in str(info.value)


def test_a_length_file_names_the_line_at_fault(tmp_path: Path) -> None:
    f = tmp_path / "lens.txt"
    f.write_text("12\nlots\n")
    with pytest.raises(ConfigError, match=r"lens.txt:2: 'lots' is not an integer length"):
        parse_length(f"file:{f}")
    f.write_text("0\n")
    with pytest.raises(ConfigError, match=r"lens.txt:1: length 0 must be in 1\.\.1,048,576"):
        parse_length(f"file:{f}")
    f.write_text("# nothing\n")
    with pytest.raises(ConfigError, match="no lengths found"):
        parse_length(f"file:{f}")
    with pytest.raises(ConfigError, match="not found"):
        parse_length(f"file:{tmp_path / 'none.txt'}")


@pytest.mark.parametrize(
    "dist",
    [
        FixedLength(value=100),
        UniformLength(low=10, high=90),
        LognormalLength(mean=256, sigma=0.6),
        EmpiricalLength(values=(5, 50, 500)),
    ],
)
def test_samples_have_the_stated_mean_and_second_moment(dist: LengthDist) -> None:
    n = 200_000
    raw = sample_lengths(dist, n, np.random.default_rng(3))
    assert raw.dtype == np.int64 and raw.shape == (n,) and raw.min() >= 1
    x = raw.astype(np.float64)
    mean, second = length_mean(dist), length_second_moment(dist)
    var = max(second - mean**2, 0.0)
    # lognormal draws are rounded up: their mean sits in [mean, mean + 1)
    shift = 1.0 if isinstance(dist, LognormalLength) else 0.0
    se = math.sqrt(var / n)
    assert mean - Z * se <= x.mean() <= mean + shift + Z * se
    if isinstance(dist, FixedLength):
        assert np.all(x == dist.value)


def test_the_empirical_second_moment_and_uniform_moments_by_hand() -> None:
    assert length_second_moment(EmpiricalLength(values=(1, 3))) == 5.0
    assert length_mean(UniformLength(low=1, high=3)) == 2.0
    assert length_second_moment(UniformLength(low=1, high=3)) == pytest.approx(13 / 3)
    # lognormal with mean m and log-sd σ: E[L²] = m² e^{σ²}
    assert length_second_moment(LognormalLength(mean=10, sigma=0.5)) == pytest.approx(
        100 * math.exp(0.25)
    )


def test_a_sequence_in_flight_carries_the_length_biased_half_of_its_output() -> None:
    """Sequences stay in the batch in proportion to their output length: the tokens generated so
    far average E[L²] / (2 E[L]) — half the output for fixed lengths, more when they vary."""
    fixed = WorkloadConfig(prompt_len=FixedLength(value=100), output_len=FixedLength(value=50))
    assert fixed.mean_context() == 125.0 and fixed.mean_sequence_tokens() == 150.0
    spread = WorkloadConfig(
        prompt_len=FixedLength(value=100), output_len=EmpiricalLength(values=(10, 90))
    )
    assert spread.mean_context() == pytest.approx(100 + (8200 / 2) / (2 * 50))


def test_a_workload_validates_its_classes() -> None:
    wl = WorkloadConfig()
    assert [c.name for c in wl.classes] == ["default"]
    two = (TrafficClass(name="a", share=0.5), TrafficClass(name="b", share=0.5))
    assert wl.with_classes(two).classes == two and wl.with_classes(two).output_len == wl.output_len
    with pytest.raises(ValidationError, match="sum to 1"):
        wl.with_classes((TrafficClass(name="a", share=0.5),))
    with pytest.raises(ValidationError):
        WorkloadConfig(classes=())
