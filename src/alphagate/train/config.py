"""What one ``train-head`` run is: its settings, validated once; the folder it writes; and what a
run resumed with ``--resume`` must repeat (:func:`resume_mismatch`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from alphagate.core.errors import ConfigError
from alphagate.core.records import Frozen

__all__ = ["RUN_FILE", "TrainError", "TrainHeadConfig", "resume_mismatch"]

#: the settings of the run a folder holds (its head line for ``--resume``)
RUN_FILE = "run.json"

#: the flag of each setting a resumed run must repeat (the others are named as their flags)
_FLAGS = {"logs": "--log", "class_rules": "--class-rule", "only_class": "--class"}
#: settings that do not change what is trained or measured: a resumed run may change them
_FREE = frozenset({"resume", "eval_every", "checkpoint_every", "threads", "run"})


class TrainError(ConfigError):
    """A head that cannot be trained from these inputs: exit 2, the message names the flag or
    file."""


class TrainHeadConfig(Frozen):
    """One ``train-head`` run, validated once."""

    logs: tuple[Path, ...] = Field(min_length=1)
    class_field: str | None = None
    class_rules: tuple[str, ...] = ()
    only_class: str | None = Field(default=None, description="train on this class only")
    sample: int | None = Field(default=None, ge=1)
    target: str
    init: str | None = Field(default=None, description="the head to start from (warm start)")
    out: Path
    steps: int = Field(default=300, ge=1)
    lr: float = Field(default=1e-3, gt=0.0, le=1.0)
    tokens_per_step: int = Field(default=1024, ge=64)
    ttt_steps: int = Field(default=3, ge=1, le=8, description="training-time test steps")
    held_out: float = Field(default=0.2, gt=0.0, lt=1.0)
    seed: int = Field(default=0, ge=0)
    k: int = Field(default=3, ge=1, le=16)
    checkpoint_every: int = Field(default=50, ge=1)
    eval_every: int | None = Field(default=None, ge=1)
    threads: int | None = Field(default=None, ge=1)
    backend: Literal["alphagate", "speculators"] = "alphagate"
    run: bool = False
    resume: bool = False

    @model_validator(mode="after")
    def _check(self) -> TrainHeadConfig:
        if self.run and self.backend != "speculators":
            raise ConfigError(
                "--run executes the speculators commands: add --backend speculators", field="run"
            )
        return self

    @property
    def work(self) -> Path:
        """Where the run keeps what it is working on: the capture and the checkpoint."""
        return self.out / ".train"

    @property
    def held_out_log(self) -> Path:
        """The held-out requests, as the log's own lines (what ``measure offline`` re-reads)."""
        return self.out / "held-out.jsonl"

    def settings(self) -> dict[str, Any]:
        """What a resumed run must repeat (kept in the folder's :data:`RUN_FILE`)."""
        return self.model_dump(mode="json", exclude=set(_FREE))


def resume_mismatch(saved: dict[str, Any], cfg: TrainHeadConfig) -> str | None:
    """Why ``cfg`` cannot resume the run whose settings are ``saved``: the first setting that
    differs, by its flag, with both values; None when they agree."""
    ours = cfg.settings()
    for key in sorted(set(saved) | set(ours)):
        if saved.get(key) != ours.get(key):
            flag = _FLAGS.get(key, "--" + key.replace("_", "-"))
            return (
                f"{flag}: the run in {cfg.out} was started with {_shown(saved.get(key))}, "
                f"this one gives {_shown(ours.get(key))}; resume with the same flags, or give "
                "another --out"
            )
    return None


def _shown(v: Any) -> str:
    if v is None:
        return "none"
    if isinstance(v, list):
        return " ".join(str(x) for x in v) or "none"
    return str(v)
