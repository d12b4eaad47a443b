"""The known step-time coefficients the calibration tests fit back: the simulator's (test_fit)
and the twin's (test_twin_roundtrip) run the same deployment with them, away from its defaults."""

from __future__ import annotations

from alphagate.specs import DeploymentConfig

BASE = DeploymentConfig(model="llama-3.1-8b", weight_dtype="bf16", gpu="h100")
TRUTH = {
    "target_time_scale": 1.15,
    "draft_time_scale": 1.3,
    "step_overhead_s": 1.6e-3,
    "per_seq_overhead_s": 12e-6,
    "per_token_overhead_s": 3e-6,
    "spec_step_overhead_s": 0.3e-3,
    "draft_forward_overhead_s": 0.25e-3,
}
#: the EAGLE-3 head's α by position
ALPHA = (0.8, 0.7, 0.6)
