"""Twin configuration: the same deployment, drafter and traffic records as ``alphagate simulate``."""

from __future__ import annotations

from pydantic import Field, model_validator

from alphagate.quantities import Frozen
from alphagate.sim.workload import LengthDist, LognormalLength, SimClass
from alphagate.specs import DeploymentConfig

__all__ = ["TwinConfig"]


class TwinConfig(Frozen):
    """A twin server: one deployment, a fixed K (0 = no speculation) and its traffic classes.

    The class of a request is its ``alphagate_class`` body field, else the suffix of the model
    name (``<served>:<class>``), else drawn by the class shares.
    """

    deployment: DeploymentConfig = Field(default_factory=DeploymentConfig)
    k: int = Field(default=3, ge=0)
    classes: tuple[SimClass, ...] = (SimClass(name="default", share=1.0, alpha=0.7),)
    output_len: LengthDist = Field(default_factory=lambda: LognormalLength(mean=256, sigma=0.6))
    served_model_name: str = "alphagate-twin"
    time_scale: float = Field(
        default=1.0,
        ge=0.0,
        description="wall seconds per simulated second; 0 = as fast as possible",
    )
    max_model_len: int = Field(default=8192, ge=2)
    api_key: str | None = None
    seed: int = 0
    engine_index: int = 0
    emit_send_time: bool = Field(
        default=False, description="add alphagate_sent_s (wall clock) to chunks, for benchmarks"
    )

    @model_validator(mode="after")
    def _shares(self) -> TwinConfig:
        total = sum(c.share for c in self.classes)
        if abs(total - 1.0) > 1e-3:
            raise ValueError(f"class shares must sum to 1, got {total:.4g}")
        return self

    @property
    def speculative(self) -> bool:
        return self.k > 0
