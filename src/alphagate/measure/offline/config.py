"""What one ``measure offline`` run is: the settings, validated once, and the ``--drafter`` spec."""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from alphagate.core.errors import ConfigError
from alphagate.core.records import Frozen
from alphagate.measure.offline.stats import BOOTSTRAP
from alphagate.measure.results import MeasureError
from alphagate.specs.tree import TreeShape, parse_tree_shape

__all__ = ["OfflineConfig", "parse_drafter"]


class OfflineConfig(Frozen):
    """One offline measurement, validated once."""

    logs: tuple[Path, ...] = Field(min_length=1)
    target: str
    tokenizer: str | None = None
    drafter: Literal["ngram", "draft_model", "eagle3"]
    drafter_path: str | None = None
    prompt_lookup_min: int = Field(default=2, ge=1)
    prompt_lookup_max: int = Field(default=5, ge=1)
    k: int = Field(default=3, ge=1, le=32)
    k_max: int | None = Field(default=None, ge=1, le=32, description="default: K")
    class_field: str | None = None
    class_rules: tuple[str, ...] = ()
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    top_k: int = Field(default=0, ge=0)
    draft_sampling: Literal["greedy", "probabilistic"] = "greedy"
    sample: int | None = Field(default=None, ge=1)
    seed: int = 0
    regenerate: bool = False
    device: str = "auto"
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    max_model_len: int | None = Field(default=None, ge=8)
    threads: int | None = Field(default=None, ge=1, description="torch CPU threads")
    checkpoint: Path | None = None
    resamples: int = Field(default=BOOTSTRAP, ge=0)
    ray: str | None = Field(default=None, description="score on Ray: 'local' or a cluster address")
    ray_workers: int | None = Field(default=None, ge=1, description="default: one per CPU / GPU")
    tree: tuple[TreeShape, ...] = Field(
        default=(), description="SGLang draft trees (steps, top-k, draft tokens) also replayed"
    )

    @field_validator("tree", mode="before")
    @classmethod
    def _parse_trees(cls, value: object) -> object:
        """``STEPS:TOPK:DRAFT_TOKENS`` strings (the flag's form) as shapes."""
        if isinstance(value, list | tuple):
            return tuple(parse_tree_shape(v) if isinstance(v, str) else v for v in value)
        return value

    @model_validator(mode="after")
    def _check(self) -> OfflineConfig:
        if self.tree and self.drafter != "eagle3":
            raise ConfigError(
                "--tree: SGLang's draft tree is replayed for an EAGLE-3 head (--drafter "
                "eagle3:PATH)",
                field="tree",
            )
        if self.tree and self.temperature != 0.0:
            raise ConfigError(
                "--tree is replayed greedy (temperature 0), where the accepted path is exact; "
                "SGLang's tree sampling is not replayed",
                field="tree",
            )
        if self.k_max is not None and self.k_max < self.k:
            raise ValueError(f"--k-max {self.k_max} is below --k {self.k}")
        if self.drafter != "ngram" and not self.drafter_path:
            raise ValueError(f"--drafter {self.drafter} needs a path: {self.drafter}:PATH")
        if self.prompt_lookup_min > self.prompt_lookup_max:
            raise ValueError("prompt_lookup_min is above prompt_lookup_max")
        if self.ray_workers is not None and self.ray is None:
            raise ValueError("--ray-workers needs --ray (local or a cluster address)")
        if self.ray is not None and not self.ray.strip():
            raise ValueError("--ray: expected local or a cluster address (HOST:PORT)")
        return self

    @property
    def kmax(self) -> int:
        """The largest K replayed: ``--k-max`` (else ``--k``), and at least the deepest tree's
        steps, so that each tree is beside the chain of its depth."""
        return max([self.k_max or self.k, *(t.steps for t in self.tree)])

    def drafter_label(self) -> str:
        if self.drafter == "ngram":
            return f"ngram(prompt_lookup_min={self.prompt_lookup_min}, prompt_lookup_max={self.prompt_lookup_max})"
        return f"{self.drafter} {self.drafter_path}"

    def fingerprint(self) -> str:
        """What a checkpoint must match to be resumed: everything that changes a request's counts."""
        return f"{zlib.crc32(json.dumps(self.settings(), sort_keys=True).encode()):08x}"

    def settings(self) -> dict[str, Any]:
        """The settings the fingerprint is of (kept in the checkpoint's head line)."""
        return self.model_dump(
            mode="json",
            exclude={
                "checkpoint",
                "resamples",
                "device",
                "threads",
                "class_field",
                "class_rules",
                "ray",
                "ray_workers",
            },
        )


def parse_drafter(spec: str) -> dict[str, Any]:
    """``ngram``, ``ngram:MIN:MAX``, ``draft_model:PATH`` or ``eagle3:PATH`` → config fields."""
    method, _, rest = spec.partition(":")
    if method == "ngram":
        if not rest:
            return {"drafter": "ngram"}
        parts = rest.split(":")
        if len(parts) != 2 or not all(p.isdigit() for p in parts):
            raise MeasureError(f"--drafter {spec!r}: expected ngram:MIN:MAX (prompt lookup window)")
        return {
            "drafter": "ngram",
            "prompt_lookup_min": int(parts[0]),
            "prompt_lookup_max": int(parts[1]),
        }
    if method in ("draft_model", "eagle3"):
        if not rest:
            raise MeasureError(f"--drafter {spec!r}: expected {method}:PATH")
        return {"drafter": method, "drafter_path": rest}
    if method == "eagle":
        raise MeasureError("--drafter eagle (EAGLE-1 heads) is not supported yet; eagle3 is")
    raise MeasureError(
        f"--drafter {spec!r}: expected ngram, ngram:MIN:MAX, draft_model:PATH or eagle3:PATH"
    )
