"""The requests a head is trained and judged on: the log's requests of one class, split by request
into a train and a held-out part (seeded), and the held-out part written back as the log's own
lines, so that ``measure offline`` reads exactly those requests again.

A request is never split across the parts: a head judged on other halves of the prompts it was
trained on would be judged on what it has seen.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import NamedTuple

import numpy as np

from alphagate.measure.offline.requests import LoggedRequest
from alphagate.train.config import TrainError

__all__ = [
    "MIN_HELD_OUT_REQUESTS",
    "MIN_HELD_OUT_TOKENS",
    "MIN_TRAIN_TOKENS",
    "Split",
    "check_sizes",
    "class_requests",
    "distinct",
    "log_lines",
    "split_requests",
]

#: held-out requests at least: the intervals are a bootstrap over requests
MIN_HELD_OUT_REQUESTS = 8
#: held-out output tokens at least: about as many drafts are measured on them
MIN_HELD_OUT_TOKENS = 256
#: output tokens to train on at least (one packed step's worth at the default size)
MIN_TRAIN_TOKENS = 1024


class Split(NamedTuple):
    """The requests trained on and the requests held out, each in log order."""

    train: list[LoggedRequest]
    held_out: list[LoggedRequest]


def class_requests(
    requests: list[LoggedRequest], only_class: str | None, logs: str
) -> list[LoggedRequest]:
    """The requests of ``only_class`` (all of them when None); :class:`TrainError` naming the
    classes the log does hold when none is of it."""
    if only_class is None:
        return list(requests)
    chosen = [r for r in requests if r.cls == only_class]
    if chosen:
        return chosen
    counts = Counter(r.cls for r in requests if r.cls is not None)
    have = ", ".join(f"{c} ({n})" for c, n in sorted(counts.items()))
    why = (
        f"its classes: {have}"
        if have
        else "no request there carries a class: bench records name theirs, else give "
        "--class-field or --class-rule"
    )
    raise TrainError(f"--class {only_class}: no request of this class in {logs} ({why})")


def distinct(requests: list[LoggedRequest]) -> list[LoggedRequest]:
    """The requests without repeats (the same prompt and output logged again: a load generator
    cycling its dataset): a repeat on both sides of the split would be judged on what was
    trained."""
    seen: set[str] = set()
    out = []
    for r in requests:
        key = json.dumps(
            [r.prompt_token_ids or r.prompt or r.messages, r.output_token_ids or r.output],
            sort_keys=True,
        )
        if key not in seen:
            seen.add(key)
            out.append(r)
    return out


def split_requests(requests: list[LoggedRequest], held_out: float, seed: int) -> Split:
    """A seeded ``held_out`` share of the requests (at least one) held out, the rest trained on."""
    n = len(requests)
    if n < 2:
        raise TrainError(
            f"--log: {n} usable request(s); a head needs some to train on and "
            f"at least {MIN_HELD_OUT_REQUESTS} to hold out"
        )
    m = min(max(1, round(held_out * n)), n - 1)
    held = set(np.random.default_rng(seed).permutation(n)[:m].tolist())
    return Split(
        train=[r for i, r in enumerate(requests) if i not in held],
        held_out=[r for i, r in enumerate(requests) if i in held],
    )


def check_sizes(*, train_tokens: int, held_out_tokens: int, held_out_requests: int) -> None:
    """Enough to train on and enough to judge by (output tokens): :class:`TrainError` saying
    how many are needed."""
    if train_tokens < MIN_TRAIN_TOKENS:
        raise TrainError(
            f"--log: the train split holds {train_tokens:,} output tokens; training needs at "
            f"least {MIN_TRAIN_TOKENS:,} (log more requests of the class, or lower --held-out)"
        )
    if held_out_requests < MIN_HELD_OUT_REQUESTS or held_out_tokens < MIN_HELD_OUT_TOKENS:
        raise TrainError(
            f"--held-out: {held_out_requests} held-out requests with {held_out_tokens:,} output "
            f"tokens; judging the head needs at least {MIN_HELD_OUT_REQUESTS} requests and "
            f"{MIN_HELD_OUT_TOKENS:,} output tokens (log more requests, or raise --held-out)"
        )


def log_lines(requests: list[LoggedRequest], logs: tuple[Path, ...]) -> list[str]:
    """Each request as its log holds it, one JSON line each (a JSON array's item, dumped)."""
    paths = {p.name: p for p in logs}
    cache: dict[str, list[str | None]] = {}
    out = []
    for r in requests:
        if r.source not in cache:
            cache[r.source] = _items(paths[r.source])
        item = cache[r.source][r.line - 1]
        assert item is not None, f"{r.where} was read as a request"
        out.append(item)
    return out


def _items(path: Path) -> list[str | None]:
    """Line i − 1 of a JSONL file (None for a blank one), or item i − 1 of a JSON array."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if text.lstrip().startswith("["):
        return [json.dumps(x, ensure_ascii=False) for x in json.loads(text)]
    return [ln if ln.strip() else None for ln in text.splitlines()]
