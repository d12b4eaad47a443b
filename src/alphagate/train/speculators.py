"""``train-head --backend speculators``: the same job as ``speculators train`` commands for a GPU
machine, on the data this run captured.

The data folder is what ``speculators``' ``ArrowDataset`` reads (``speculators/train/data.py``):
an Arrow dataset saved with ``datasets`` (``input_ids``, ``loss_mask`` — the output tokens —,
``seq_len``; torch format, as their ``prepare-data`` leaves it) and, beside it, the hidden-state
files :mod:`alphagate.train.capture` wrote, so ``--on-missing raise`` finds every sample without
a vLLM server. The head starts from the one this run would start from, saved in their format
(``--from-pretrained``), so the auxiliary layers and the norms are the same; the optimizer and
the loss are pinned to what this machine's loop runs (AdamW, eager KL divergence), and the batch
size (``--total-seq-len``) and the number of steps to this run's.
"""

from __future__ import annotations

import math
from pathlib import Path

from alphagate.train.capture import Captured
from alphagate.train.config import TrainHeadConfig

__all__ = ["SAVE", "speculators_argv", "trained_head", "write_dataset"]

#: where ``speculators train`` writes its checkpoints, inside the run's folder
SAVE = "speculators-checkpoints"
#: the validation share their loader needs (it refuses none); the held-out requests judge the head
_VAL_RATIO = 0.9


def write_dataset(data: Path, captured: list[Captured], tokens: list[list[int]]) -> None:
    """The Arrow dataset of the captured requests (row i ↔ ``hidden_states/hs_{i}``)."""
    from datasets import Dataset  # type: ignore[import-untyped]

    rows = Dataset.from_dict(
        {
            "input_ids": tokens,
            "loss_mask": [
                [0] * c.prompt_tokens + [1] * (c.tokens - c.prompt_tokens) for c in captured
            ],
            "seq_len": [c.tokens for c in captured],
        }
    )
    rows.set_format("torch")
    rows.save_to_disk(str(data))


def _epochs(cfg: TrainHeadConfig, captured: list[Captured]) -> int:
    """Epochs enough for ``steps`` batches of ``tokens_per_step`` over the train share of theirs."""
    tokens = sum(c.tokens for c in captured) * _VAL_RATIO
    return max(1, math.ceil(cfg.steps * cfg.tokens_per_step / max(tokens, 1.0)))


def trained_head(cfg: TrainHeadConfig, captured: list[Captured]) -> Path:
    """The checkpoint ``speculators train`` leaves last: its last epoch's folder."""
    return cfg.out / SAVE / str(_epochs(cfg, captured) - 1)


def speculators_argv(
    cfg: TrainHeadConfig, target: str, data: Path, start: Path, captured: list[Captured]
) -> list[list[str]]:
    """The commands: train with ``speculators``, then measure the head it writes on the
    held-out requests (what ``plan --alpha-from`` reads)."""
    train = [
        "speculators", "train", "--speculator-type", "eagle3",
        "--verifier-name-or-path", target, "--from-pretrained", str(start),
        "--data-path", str(data), "--on-missing", "raise",
        "--total-seq-len", str(cfg.tokens_per_step), "--train-data-ratio", str(_VAL_RATIO),
        "--epochs", str(_epochs(cfg, captured)), "--max-steps", str(cfg.steps),
        "--optimizer", "adamw", "--lr", f"{cfg.lr:g}", "--weight-decay", "0.01",
        "--loss-fn", "kl_div",
        "--ttt-steps", str(cfg.ttt_steps), "--seed", str(cfg.seed),
        "--save-path", str(cfg.out / SAVE), "--log-dir", str(cfg.out / "speculators-logs"),
    ]  # fmt: skip
    measure = [
        "alphagate", "measure", "offline", "--log", str(cfg.held_out_log), "--target", target,
        "--drafter", f"eagle3:{trained_head(cfg, captured)}", "--k", str(cfg.k),
        "--seed", str(cfg.seed), *_class_flags(cfg), "--out", str(cfg.out / "alpha.json"),
    ]  # fmt: skip
    return [train, measure]


def _class_flags(cfg: TrainHeadConfig) -> list[str]:
    flags = ["--class-field", cfg.class_field] if cfg.class_field else []
    for rule in cfg.class_rules:
        flags += ["--class-rule", rule]
    return flags
