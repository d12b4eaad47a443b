"""Request traces for replay: arrival times and lengths (or texts) of production traffic.

JSONL, one request per line — the Mooncake trace format that AIPerf replays
(``docs/benchmark-modes/trace-replay.md``), plus the fields of a bench dataset line::

    {"timestamp": 0,    "input_length": 812, "output_length": 143}
    {"timestamp": 12.5, "prompt": "Summarise …", "output_length": 64, "class": "chat"}
    {"timestamp": 40,   "messages": [{"role": "user", "content": "…"}], "max_tokens": 200}

- ``timestamp`` (required): arrival time in **milliseconds**, a finite number ≥ 0; only
  differences matter (the earliest request is sent at once). Lines are replayed in timestamp
  order.
- the prompt: ``prompt`` (text) or ``messages`` (chat), else ``input_length`` words drawn from a
  fixed vocabulary (about one token each);
- ``output_length`` (or ``max_tokens``): tokens to generate, sent as ``max_tokens`` with
  ``ignore_eos`` so that the server produces exactly that many;
- ``class`` (optional): the traffic class; other fields (``hash_ids``, ``session_id``) are ignored.

The Azure LLM inference trace CSV (``TIMESTAMP,ContextTokens,GeneratedTokens``; Patel et al.,
"Splitwise", 2024, and its 2024 week-long release) is read directly: ``TIMESTAMP`` as a date-time
(``2023-11-16 18:15:46.6805900``) or as seconds, the two counts as input and output lengths.

A malformed line is reported with its line number and skipped (fatal with ``strict``).
"""

from __future__ import annotations

import csv
import datetime as dt
import math
import re
from pathlib import Path
from typing import Any

import numpy as np

from alphagate.bench.dataset import (
    DatasetError,
    Prompt,
    jsonl_entries,
    prompt_of,
    synthetic_text,
    token_count,
)

__all__ = ["load_trace"]

_AZURE = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
_DATETIME = re.compile(r"(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2})(?:\.(\d+))?")


def _jsonl_entry(obj: dict[str, Any], where: str) -> tuple[float, int | None, Prompt]:
    t = obj.get("timestamp")
    if isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t):
        raise DatasetError(f"{where}: 'timestamp' (ms) must be a number")
    if t < 0:
        raise DatasetError(f"{where}: 'timestamp' (ms) must be ≥ 0, got {t:g}")
    p = prompt_of(obj, where, text_required=False)
    n_in = token_count(obj, "input_length", where)
    if p.prompt is None and p.messages is None and n_in is None:
        raise DatasetError(f"{where}: needs 'input_length', 'prompt' or 'messages'")
    out_len = token_count(obj, "output_length", where)
    if out_len is not None and p.max_tokens is not None and out_len != p.max_tokens:
        raise DatasetError(f"{where}: 'output_length' and 'max_tokens' disagree")
    return float(t) / 1e3, n_in, p if out_len is None else _with_max_tokens(p, out_len)


def _with_max_tokens(p: Prompt, n: int) -> Prompt:
    return Prompt(p.prompt, p.messages, p.cls, n)


def _azure_time(text: str, where: str) -> float:
    """A TIMESTAMP cell → seconds (date-times as seconds since the epoch, in UTC)."""
    s = text.strip()
    try:
        t = float(s)
    except ValueError:
        pass
    else:
        if not math.isfinite(t) or t < 0:
            raise DatasetError(f"{where}: TIMESTAMP {s!r} must be a finite number of seconds ≥ 0")
        return t
    m = _DATETIME.fullmatch(s)
    if m is None:
        raise DatasetError(f"{where}: TIMESTAMP {s!r} is neither seconds nor YYYY-MM-DD HH:MM:SS")
    base = dt.datetime.strptime(m.group(1).replace("T", " "), "%Y-%m-%d %H:%M:%S")
    frac = float("0." + m.group(2)) if m.group(2) else 0.0
    return base.replace(tzinfo=dt.timezone.utc).timestamp() + frac


def _count(cell: str | None, col: str, where: str) -> int:
    try:
        n = int((cell or "").strip())
    except ValueError:
        raise DatasetError(f"{where}: {col} must be an integer") from None
    counted = token_count({col: n}, col, where)
    assert counted is not None
    return counted


def _read_jsonl(
    path: Path, strict: bool, problems: list[str]
) -> list[tuple[float, int | None, Prompt]]:
    return jsonl_entries(path, strict, problems, _jsonl_entry)


def _read_azure_csv(
    path: Path, strict: bool, problems: list[str]
) -> list[tuple[float, int | None, Prompt]]:
    with path.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        header = [h.strip() for h in reader.fieldnames or []]
        missing = [c for c in _AZURE if c not in header]
        if missing:
            raise DatasetError(
                f"{path}: a CSV trace needs the columns {', '.join(_AZURE)} (Azure LLM inference "
                f"trace); missing {', '.join(missing)}"
            )
        out: list[tuple[float, int | None, Prompt]] = []
        for row in reader:
            where = f"{path}:{reader.line_num}"
            cells = {k.strip(): v for k, v in row.items() if k is not None}
            try:
                t = _azure_time(cells["TIMESTAMP"] or "", where)
                n_in = _count(cells["ContextTokens"], "ContextTokens", where)
                n_out = _count(cells["GeneratedTokens"], "GeneratedTokens", where)
                out.append((t, n_in, Prompt(None, None, None, n_out)))
            except DatasetError as exc:
                problems.append(str(exc))
            if strict and problems:
                raise DatasetError(problems[0])
    return out


def load_trace(
    spec: str, n: int | None, seed: int, *, strict: bool = False
) -> tuple[list[Prompt], list[str]]:
    """The first ``n`` requests of a trace (all when None) in arrival order, each with its
    ``arrival_s`` after the first; and the problems found (line-numbered)."""
    path = Path(spec)
    if not path.exists():
        raise DatasetError(f"trace not found: {path}")
    if not path.is_file():
        raise DatasetError(f"{path} is not a file")
    problems: list[str] = []
    try:
        if path.suffix.lower() == ".csv":
            entries = _read_azure_csv(path, strict, problems)
        else:
            entries = _read_jsonl(path, strict, problems)
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except (OSError, csv.Error) as exc:
        raise DatasetError(
            f"{path}: cannot be read ({getattr(exc, 'strerror', None) or exc})"
        ) from None
    if not entries:
        raise DatasetError(
            f"{path}: no usable requests" + (f" ({problems[0]})" if problems else "")
        )
    times = np.asarray([e[0] for e in entries], dtype=np.float64)
    order = np.argsort(times, kind="stable")[: n if n is not None else len(entries)]
    rng = np.random.default_rng(seed)
    t0 = float(times[order[0]])
    out = []
    for i in order:
        t, n_in, p = entries[int(i)]
        text = p.prompt
        if text is None and p.messages is None and n_in is not None:
            text = synthetic_text(n_in, rng)
        out.append(
            Prompt(
                text,
                p.messages,
                p.cls,
                p.max_tokens,
                ignore_eos=p.max_tokens is not None,
                arrival_s=t - t0,
            )
        )
    return out, problems
