"""Typed presets and loaders: models, GPUs, drafters and deployments."""

from alphagate.specs.deployment import (
    DeploymentConfig,
    DrafterConfig,
    DraftModelDrafter,
    Eagle3Drafter,
    EagleDrafter,
    MtpDrafter,
    NgramDrafter,
    ResolvedDeployment,
    resolve_deployment,
)
from alphagate.specs.gpus import GPU_PRESETS, GpuSpec, gpu_preset_names, load_gpu_spec, resolve_gpu
from alphagate.specs.models import (
    MODEL_PRESETS,
    SpecError,
    load_hf_config,
    model_preset_names,
    resolve_model,
)

__all__ = [
    "GPU_PRESETS",
    "MODEL_PRESETS",
    "DeploymentConfig",
    "DraftModelDrafter",
    "DrafterConfig",
    "Eagle3Drafter",
    "EagleDrafter",
    "GpuSpec",
    "MtpDrafter",
    "NgramDrafter",
    "ResolvedDeployment",
    "SpecError",
    "gpu_preset_names",
    "load_gpu_spec",
    "load_hf_config",
    "model_preset_names",
    "resolve_deployment",
    "resolve_gpu",
    "resolve_model",
]
