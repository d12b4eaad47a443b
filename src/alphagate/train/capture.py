"""The target's hidden states over the train split, written in the ``speculators`` library's
hidden-state file layout (``speculators/train/data.py``, ``hs_connectors/transfer.py``): one
``hs_{i}.safetensors`` per request under ``hidden_states/``, holding ``token_ids [n]`` and
``hidden_states [n, L_aux + 1, h]`` — the residual stream entering each auxiliary layer the head
reads (vLLM's ``_maybe_add_hidden_state``), then the last layer's output before the final norm,
from which the target's own distribution is recomputed as the training target.

Each file is written whole or not at all (a temporary file, then a rename): a capture stopped by a
full disk or Ctrl-C keeps every complete file, and the next run (``--resume``) captures only the
requests that have none. This module imports torch: it is imported only when a run captures.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch
from safetensors import safe_open
from safetensors.torch import save

from alphagate.measure.offline.models import CausalLM
from alphagate.measure.offline.replay import Encoded
from alphagate.measure.offline.requests import LoggedRequest
from alphagate.train.config import TrainError

__all__ = ["HIDDEN", "Captured", "capture", "hs_file", "untokenizable"]

#: the folder of the hidden-state files, inside the data folder (as ``speculators`` reads it)
HIDDEN = "hidden_states"
#: requests done, requests in all, tokens captured
Progress = Callable[[int, int, int], None]


class Captured(NamedTuple):
    """One request of the train split, as captured."""

    file: int  # hs_{file}.safetensors
    where: str
    prompt_tokens: int
    tokens: int  # prompt + output
    fresh: bool  # captured by this run (not found complete on disk)


def hs_file(folder: Path, file: int) -> Path:
    return folder / HIDDEN / f"hs_{file}.safetensors"


def untokenizable(requests: list[LoggedRequest], tokenizer: Any) -> list[str]:
    """The requests whose logged token ids are not the target tokenizer's (an id outside its
    vocabulary, or output ids that do not decode to the logged text): file:line of each."""
    vocab = len(tokenizer)
    bad = []
    for r in requests:
        ids = (r.prompt_token_ids or ()) + (r.output_token_ids or ())
        if ids and (max(ids) >= vocab or min(ids) < 0):
            bad.append(r.where)
        elif r.output_token_ids and r.output is not None:
            out = list(r.output_token_ids)
            # vLLM's text leaves special tokens out (skip_special_tokens); a log may keep them
            texts = (tokenizer.decode(out, skip_special_tokens=True), tokenizer.decode(out))
            if r.output not in texts:
                bad.append(r.where)
    return bad


def capture(
    target: CausalLM,
    items: list[tuple[str, Encoded]],
    folder: Path,
    aux_ids: tuple[int, ...],
    on_progress: Progress | None = None,
) -> list[Captured]:
    """Capture every request of ``items`` (where, encoded) that has no complete file yet; returns
    what each file holds. :class:`TrainError` when the disk fills (what was complete is kept)."""
    (folder / HIDDEN).mkdir(parents=True, exist_ok=True)
    for stale in (folder / HIDDEN).glob(".*.tmp"):  # a write a crash cut off
        stale.unlink()
    layers = (*aux_ids, target.num_layers)
    out, tokens = [], 0
    for i, (where, enc) in enumerate(items):
        seq = np.concatenate([enc.prompt, enc.output])
        path = hs_file(folder, i)
        fresh = not _complete(path, seq)
        if fresh:
            _, aux, _ = target.hidden(seq, aux_ids=layers)
            assert aux is not None
            states = aux.reshape(seq.size, len(layers), -1)  # [n, L_aux + 1, h]
            _write(path, seq, states, done=i, total=len(items))
        out.append(Captured(i, where, int(enc.prompt.size), int(seq.size), fresh))
        tokens += int(seq.size)
        if on_progress is not None:
            on_progress(i + 1, len(items), tokens)
    return out


def _complete(path: Path, seq: np.ndarray) -> bool:
    """Whether ``path`` holds the states of exactly this token sequence."""
    if not path.is_file():
        return False
    try:
        with safe_open(str(path), framework="pt") as fh:
            ids = fh.get_tensor("token_ids").numpy()
            ok = "hidden_states" in fh.keys()  # noqa: SIM118 (safe_open has no __contains__)
    except Exception:  # not a safetensors file any more: captured again
        return False
    return ok and ids.shape == seq.shape and bool((ids == seq).all())


def _write(path: Path, seq: np.ndarray, states: torch.Tensor, *, done: int, total: int) -> None:
    """One file, whole or not at all."""
    data = save(
        {"token_ids": torch.as_tensor(seq, dtype=torch.long), "hidden_states": states.contiguous()}
    )
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with tmp.open("wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
        why = "the disk is full" if full else f"cannot write ({exc.strerror or exc})"
        raise TrainError(
            f"--out {path.parent}: {why} after capturing {done} of {total} requests; the "
            f"{done} complete files are kept — free space and run again with --resume"
        ) from None
