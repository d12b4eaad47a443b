"""GPU presets: the roofline oracles at the data sheets' figures, a spec file with its errors,
and an unknown preset naming the choices."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from alphagate import theory
from alphagate.core.errors import SpecError
from alphagate.specs import GPU_PRESETS, load_gpu_spec, resolve_gpu, resolve_model


def test_oracle_22_weight_read_time_70b_fp8_h100() -> None:
    # 70.55e9 params, FP8, H100 3.35e12 B/s → 21.06 ms per step (±1%)
    h100 = GPU_PRESETS["h100"]
    t = theory.weight_read_seconds(70.55e9, 1.0, h100.hbm_bandwidth)
    assert t * 1e3 == pytest.approx(21.06, rel=0.01)


def test_oracle_23_ridge_h100_bf16() -> None:
    # H100 BF16 ridge 989e12 / 3.35e12 = 295 FLOP/B; weight GEMMs compute-bound at ≳ 295 tokens
    h100 = GPU_PRESETS["h100"]
    assert h100.ridge_point("bf16") == pytest.approx(295, rel=0.01)
    assert theory.compute_bound_tokens(h100.bf16_flops, h100.hbm_bandwidth, 2.0) == pytest.approx(
        295, rel=0.01
    )
    # FP8 weights with FP8 compute: ridge 591, but b_w = 1 so the token count is the same
    assert h100.ridge_point("fp8") == pytest.approx(591, rel=0.01)
    assert theory.compute_bound_tokens(
        h100.fp8_flops or 0.0, h100.hbm_bandwidth, 1.0
    ) == pytest.approx(295, rel=0.01)


@pytest.mark.parametrize(
    ("slug", "ridge_bf16"),
    [("h100", 295), ("h200", 206), ("a100-80gb", 153), ("b200", 292), ("mi300x", 247)],
)
def test_preset_ridges(slug: str, ridge_bf16: float) -> None:
    # dense BF16 peak ÷ HBM bandwidth from the data sheets (B200 with the HGX 7.7 TB/s: 292)
    assert GPU_PRESETS[slug].ridge_point("bf16") == pytest.approx(ridge_bf16, rel=0.01)


def test_a100_has_no_fp8_units() -> None:
    a100 = resolve_gpu("A100-80GB")
    assert a100.peak_flops("fp8") == a100.bf16_flops


def test_gpu_spec_file(tmp_path: Path) -> None:
    spec = {
        "name": "Lab GPU",
        "memory_bytes": 48e9,
        "hbm_bandwidth": 1e12,
        "bf16_flops": 200e12,
        "interconnect_bandwidth": 100e9,
    }
    path = tmp_path / "gpu.json"
    path.write_text(json.dumps(spec))
    g = resolve_gpu(str(path))
    assert g.name == "Lab GPU" and g.fp8_flops is None
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**spec, "hbm_bandwith": 1}))
    with pytest.raises(SpecError, match="hbm_bandwith"):
        load_gpu_spec(bad)
    with pytest.raises(SpecError, match="not found"):
        load_gpu_spec(tmp_path / "missing.json")


def test_unknown_presets_name_the_choices() -> None:
    with pytest.raises(SpecError, match="h100"):
        resolve_gpu("h1000")
    with pytest.raises(SpecError, match=r"llama-3\.1-8b"):
        resolve_model("llama-9b")
