"""The training loop of ``train-head`` on this machine: ``speculators``' own model, batch layout
and loss, driven by a loop of ours.

Ours because the ``speculators`` trainer cannot run without a GPU (``speculators/train/
trainer.py``): it moves the model and every batch to ``local_rank`` (the integer 0, which torch
reads as ``cuda:0``), autocasts on ``"cuda"`` when no accelerator is found, synchronises
``torch.accelerator`` to time each logged step, and its default losses are Triton kernels
(``losses/fused.py``). What runs here is theirs: the samples are built as their dataset builds
them (``ArrowDataset._get_raw_data``: the auxiliary states, the tokens, the last layer's states
that recompute the target's distribution, the loss mask), shifted by their ``shift_batch`` and
packed by their ``CollateFn`` (documents side by side, positions restarting, padding masked), and
``Eagle3DraftModel.forward`` computes the training-time-test loss (Li et al. 2025: each of
``ttt_steps`` steps feeds the head its own previous hidden state) with their eager KL divergence
to the target's distribution. The optimizer and schedule are those their trainer defaults to with
``--optimizer adamw``: AdamW with weight decay 0.01, a linear warm-up over 1% of the steps then a
linear decay, gradients clipped at norm 1.

The loss mask covers the output tokens: the head drafts after the prompt, on the target's own
continuations. A checkpoint (the head and the optimizer's state) is written whole every
``checkpoint_every`` steps; interrupted, the last one is kept, and a resumed run goes on from it
with the same batches (the batch plan depends on the seed and the requests only).
"""

from __future__ import annotations

import os
import shutil
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch
from safetensors.torch import load_file

from alphagate.train.capture import Captured, hs_file
from alphagate.train.head import save_head

__all__ = ["LoopSettings", "StepStats", "batch_plan", "checkpoint", "saved_step", "train_loop"]

#: the checkpoint's optimizer state, beside the head's files
STATE = "state.pt"


class LoopSettings(NamedTuple):
    steps: int
    lr: float
    tokens_per_step: int
    ttt_steps: int
    seed: int
    checkpoint_every: int
    eval_every: int | None


class StepStats(NamedTuple):
    """One optimizer step: the training loss (KL to the target, summed over the training-time-
    test steps), the teacher-forced top-1 agreement with the target at each of those steps (the
    drafts of steps 0 … j all the target's argmax), and the tokens it trained on."""

    step: int
    loss: float
    agreement: tuple[float, ...]
    tokens: int
    seconds: float


def batch_plan(lengths: list[int], tokens_per_step: int, steps: int, seed: int) -> list[list[int]]:
    """The requests of each step's batch: epochs of a seeded permutation, packed in order until
    the next would pass ``tokens_per_step`` (a request longer than a batch is cut to it)."""
    plan: list[list[int]] = []
    cur: list[int] = []
    used, epoch = 0, 0
    while len(plan) < steps:
        for i in np.random.default_rng([seed, epoch]).permutation(len(lengths)).tolist():
            n = lengths[i] - 1  # shifted: one pair fewer than tokens
            if cur and used + n > tokens_per_step:
                plan.append(cur)
                cur, used = [], 0
            cur.append(i)
            used += n
        epoch += 1
    return plan[:steps]


def _sample(folder: Path, c: Captured) -> dict[str, torch.Tensor]:
    """One request as ``speculators``' dataset hands it over (before ``shift_batch``)."""
    hs = load_file(str(hs_file(folder, c.file)))
    states = hs["hidden_states"].float()  # [n, L_aux + 1, h]
    mask = torch.zeros(c.tokens, dtype=torch.long)
    mask[c.prompt_tokens :] = 1
    return {
        "hidden_states": states[:, :-1].flatten(1),
        "input_ids": hs["token_ids"],
        "verifier_last_hidden_states": states[:, -1],
        "loss_mask": mask,
        "lengths": torch.tensor([c.tokens], dtype=torch.long),
        "position_ids": torch.arange(c.tokens, dtype=torch.long),
    }


def _collate(model: Any, s: LoopSettings) -> Callable[[list[dict[str, torch.Tensor]]], Any]:
    from speculators.models.eagle3.data import shift_batch
    from speculators.train.data import CollateFn

    hidden = int(model.config.transformer_layer_config.hidden_size)
    aux = len(model.config.eagle_aux_hidden_state_layer_ids)
    return CollateFn(
        s.tokens_per_step,
        hidden,
        num_target_layers=aux,
        dtype=torch.float32,
        preprocess=shift_batch,
    )


def _optimizer(model: Any, s: LoopSettings) -> tuple[Any, Any]:
    from transformers import get_linear_schedule_with_warmup

    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=s.lr, weight_decay=0.01)
    sched = get_linear_schedule_with_warmup(opt, s.steps // 100, s.steps)  # type: ignore[no-untyped-call]
    return opt, sched


def checkpoint(folder: Path) -> Path | None:
    """The whole checkpoint ``folder`` names: itself, or the one it replaced when a swap was cut
    off between its two renames (None: there is none)."""
    return next((f for f in (folder, _old(folder)) if (f / STATE).is_file()), None)


def saved_step(folder: Path) -> int:
    """The step the checkpoint in ``folder`` was taken at."""
    return int(torch.load(folder / STATE, weights_only=False)["step"])


def _old(folder: Path) -> Path:
    return folder.with_name(folder.name + ".old")


def _save_checkpoint(model: Any, opt: Any, sched: Any, step: int, folder: Path) -> None:
    """The head and the optimizer's state, written beside and swapped in whole."""
    new = folder.with_name(folder.name + ".new")
    shutil.rmtree(new, ignore_errors=True)
    save_head(model, new)
    state = {"step": step, "optimizer": opt.state_dict(), "scheduler": sched.state_dict()}
    torch.save(state, new / STATE)
    shutil.rmtree(_old(folder), ignore_errors=True)
    if folder.exists():
        os.replace(folder, _old(folder))
    os.replace(new, folder)
    shutil.rmtree(_old(folder), ignore_errors=True)


def _restore(opt: Any, sched: Any, folder: Path) -> int:
    """The optimizer's state from the checkpoint ``folder`` names; its step."""
    f = checkpoint(folder)
    assert f is not None, f"no checkpoint in {folder}"
    state = torch.load(f / STATE, weights_only=False)
    opt.load_state_dict(state["optimizer"])
    sched.load_state_dict(state["scheduler"])
    return int(state["step"])


def _step(model: Any, batch: dict[str, Any], opt: Any, sched: Any, s: LoopSettings) -> StepStats:
    """One optimizer step on one packed batch."""
    from speculators.losses import resolve_loss_config

    t0 = time.perf_counter()
    inputs = {k: v for k, v in batch.items() if isinstance(v, torch.Tensor)}
    with warnings.catch_warnings():
        # speculators 0.9 passes the KV cache by the name transformers 5.2x deprecates
        warnings.filterwarnings("ignore", "`past_key_values` is deprecated", FutureWarning)
        _, loss, metrics = model(
            **inputs, ttt_steps=s.ttt_steps, loss_config=resolve_loss_config("kl_div", "eager")
        )
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    sched.step()
    agree = tuple(
        float(metrics[f"full_acc_{j}_sum"] / max(float(metrics[f"full_acc_{j}_total"]), 1.0))
        for j in range(s.ttt_steps)
    )
    tokens = int((batch["document_ids"] != -1).sum())
    return StepStats(0, float(loss.detach()), agree, tokens, time.perf_counter() - t0)


def train_loop(
    model: Any,
    data: tuple[Path, list[Captured]],
    s: LoopSettings,
    ckpt: Path,
    *,
    resume: bool,
    on_step: Callable[[StepStats], None] | None = None,
    on_eval: Callable[[int], None] | None = None,
) -> list[StepStats]:
    """Train ``model`` for the steps not yet done (from the checkpoint when ``resume``); returns
    the stats of the steps run here. ``on_eval(step)`` is called every ``eval_every`` steps."""
    folder, captured = data
    plan = batch_plan([c.tokens for c in captured], s.tokens_per_step, s.steps, s.seed)
    collate = _collate(model, s)
    opt, sched = _optimizer(model, s)
    start = _restore(opt, sched, ckpt) if resume else 0
    model.train()
    out = []
    for step in range(start + 1, s.steps + 1):
        batch = collate([_sample(folder, captured[i]) for i in plan[step - 1]])
        st = _step(model, batch, opt, sched, s)._replace(step=step)
        out.append(st)
        if on_step is not None:
            on_step(st)
        if step % s.checkpoint_every == 0 or step == s.steps:
            _save_checkpoint(model, opt, sched, step, ckpt)
        if on_eval is not None and s.eval_every is not None and step % s.eval_every == 0:
            model.eval()
            on_eval(step)
            model.train()
    model.eval()
    return out
