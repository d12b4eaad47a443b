"""What one ``measure offline`` run is: the settings, validated once, and the ``--drafter`` spec."""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from alphagate.core.errors import ConfigError, validation_problem
from alphagate.core.records import Frozen
from alphagate.measure.offline.stats import BOOTSTRAP
from alphagate.measure.results import MeasureError
from alphagate.specs.deployment import SuffixParams
from alphagate.specs.tree import TreeShape, parse_tree_shape

__all__ = ["OfflineConfig", "parse_drafter"]


class OfflineConfig(Frozen):
    """One offline measurement, validated once."""

    logs: tuple[Path, ...] = Field(min_length=1)
    target: str
    tokenizer: str | None = None
    drafter: Literal["ngram", "draft_model", "eagle3", "suffix"]
    drafter_path: str | None = None
    prompt_lookup_min: int = Field(default=2, ge=1)
    prompt_lookup_max: int = Field(default=5, ge=1)
    suffix: SuffixParams = Field(default_factory=SuffixParams)
    k: int = Field(
        default=3, ge=1, le=64, description="suffix decoding: num_speculative_tokens (its cap)"
    )
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

    @model_validator(mode="before")
    @classmethod
    def _suffix_k(cls, data: object) -> object:
        """Suffix decoding without K: vLLM's default cap, the tree depth (``_validate_suffix_decoding``)."""
        if isinstance(data, dict) and data.get("drafter") == "suffix" and data.get("k") is None:
            depth = SuffixParams.model_validate(data.get("suffix") or {}).max_tree_depth
            data = {**data, "k": depth}
        return data

    @model_validator(mode="after")
    def _check(self) -> OfflineConfig:
        if self.drafter == "suffix":
            self._check_suffix()
        if self.drafter != "suffix" and self.k > 32:
            raise ValueError(f"--k {self.k}: at most 32 draft tokens per step")
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
        if self.drafter in ("draft_model", "eagle3") and not self.drafter_path:
            raise ValueError(f"--drafter {self.drafter} needs a path: {self.drafter}:PATH")
        if self.prompt_lookup_min > self.prompt_lookup_max:
            raise ValueError("prompt_lookup_min is above prompt_lookup_max")
        if self.ray_workers is not None and self.ray is None:
            raise ValueError("--ray-workers needs --ray (local or a cluster address)")
        if self.ray is not None and not self.ray.strip():
            raise ValueError("--ray: expected local or a cluster address (HOST:PORT)")
        return self

    def _check_suffix(self) -> None:
        """What a suffix replay cannot do: its cache is one server's, fed every request in log
        order, and its drafts depend on their cap."""
        if self.k_max not in (None, self.k):
            raise ValueError(
                "--k-max: suffix decoding's drafts depend on their cap (--k, vLLM's "
                "num_speculative_tokens): replay each cap in a run of its own"
            )
        if self.temperature != 0.0:
            raise ValueError("--drafter suffix replays greedy decoding: --temperature 0")
        refused = {"--sample": self.sample, "--ray": self.ray, "--checkpoint": self.checkpoint}
        for flag, value in refused.items():
            if value is not None:
                raise ValueError(
                    f"{flag}: suffix decoding's cache holds every earlier response, so the "
                    "replay runs the whole log in order, in one process, in one go"
                )

    @property
    def kmax(self) -> int:
        """The largest K replayed: ``--k-max`` (else ``--k``), and at least the deepest tree's
        steps, so that each tree is beside the chain of its depth."""
        return max([self.k_max or self.k, *(t.steps for t in self.tree)])

    def drafter_label(self) -> str:
        if self.drafter == "ngram":
            return f"ngram(prompt_lookup_min={self.prompt_lookup_min}, prompt_lookup_max={self.prompt_lookup_max})"
        if self.drafter == "suffix":
            kv = ", ".join(f"{k}={v}" for k, v in self.suffix.model_dump().items())
            return f"suffix(num_speculative_tokens={self.k}, {kv})"
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


def _suffix_fields(spec: str, rest: str) -> dict[str, Any]:
    """``suffix`` or ``suffix:KEY=VALUE,…`` (vLLM's ``suffix_decoding_*`` names, less the
    prefix) → config fields; :class:`MeasureError` naming the spec."""
    params: dict[str, str] = {}
    for item in filter(None, rest.split(",")):
        key, eq, value = item.partition("=")
        if not eq or key.strip() not in SuffixParams.model_fields:
            names = ", ".join(SuffixParams.model_fields)
            raise MeasureError(
                f"--drafter {spec!r}: expected suffix or suffix:KEY=VALUE,… ({names})"
            )
        params[key.strip()] = value.strip()
    try:
        return {"drafter": "suffix", "suffix": SuffixParams.model_validate(params)}
    except ValidationError as exc:
        raise MeasureError(f"--drafter {spec!r}: {validation_problem(exc)}") from None


def parse_drafter(spec: str) -> dict[str, Any]:
    """``ngram``, ``ngram:MIN:MAX``, ``draft_model:PATH``, ``eagle3:PATH``, ``suffix`` or
    ``suffix:KEY=VALUE,…`` → config fields."""
    method, _, rest = spec.partition(":")
    if method == "suffix":
        return _suffix_fields(spec, rest)
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
        f"--drafter {spec!r}: expected ngram, ngram:MIN:MAX, draft_model:PATH, eagle3:PATH or "
        "suffix[:KEY=VALUE,…]"
    )
