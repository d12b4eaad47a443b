"""Prompt datasets for ``alphagate bench``: ShareGPT JSON, JSONL, and ``synthetic:in=N,out=M``.

A malformed JSONL line is reported with its line number and skipped (or fatal with ``strict``).
The same seed selects the same prompts in the same order.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

T = TypeVar("T")

__all__ = [
    "DatasetError",
    "Prompt",
    "jsonl_entries",
    "load_prompts",
    "prompt_of",
    "synthetic_text",
    "token_count",
]

VOCAB = [
    "data",
    "model",
    "token",
    "draft",
    "verify",
    "accept",
    "serve",
    "batch",
    "latency",
    "cache",
    "memory",
    "tensor",
    "kernel",
    "stream",
    "request",
    "reply",
    "question",
    "answer",
    "system",
    "user",
    "code",
    "text",
    "value",
    "window",
    "layer",
    "head",
    "weight",
]


class DatasetError(ValueError):
    """A dataset that cannot be used; the message names the file and line, ``flag`` the option
    that gave what was wrong."""

    def __init__(self, message: str, flag: str = "--dataset") -> None:
        super().__init__(message)
        self.flag = flag


@dataclass(frozen=True)
class Prompt:
    prompt: str | None
    messages: list[dict[str, Any]] | None
    cls: str | None
    max_tokens: int | None
    ignore_eos: bool = False
    arrival_s: float | None = None  # trace replay: when to send it, seconds after the first

    def as_text(self) -> str:
        if self.prompt is not None:
            return self.prompt
        return "\n".join(str(m.get("content", "")) for m in self.messages or [])


#: the largest token count a request may ask for (or a prompt hold), as ``--random-input-len``
MAX_TOKENS = 1_048_576
#: the most words the synthetic prompts of one run may hold in all (built in memory at once:
#: 2**24 words are ~128 MB while they are drawn)
MAX_SYNTHETIC_WORDS = 2**24


def _synthetic(spec: str, n: int, rng: np.random.Generator) -> list[Prompt]:
    m = re.fullmatch(r"synthetic:in=(\d+),out=(\d+)", spec.strip())
    if not m:
        raise DatasetError(f"{spec!r}: expected synthetic:in=N,out=M")
    n_in, n_out = int(m.group(1)), int(m.group(2))
    if not (1 <= n_in <= MAX_TOKENS and 1 <= n_out <= MAX_TOKENS):
        raise DatasetError(f"{spec!r}: in and out must be whole numbers in 1..{MAX_TOKENS:,}")
    if n * n_in > MAX_SYNTHETIC_WORDS:
        raise DatasetError(
            f"{spec!r}: {n:,} prompts of {n_in:,} words are {n * n_in:,} words, above the "
            f"{MAX_SYNTHETIC_WORDS:,} this client builds in memory; lower -n or in"
        )
    return [Prompt(t, None, None, n_out, ignore_eos=True) for t in synthetic_texts(n, n_in, rng)]


def synthetic_texts(n: int, n_words: int, rng: np.random.Generator) -> list[str]:
    """``n`` texts of :func:`synthetic_text`, drawn in one call (the same words as ``n`` calls)."""
    words = np.asarray(VOCAB)[rng.integers(0, len(VOCAB), (n, n_words))]
    return [" ".join(w) for w in words.tolist()]


def synthetic_text(n_words: int, rng: np.random.Generator) -> str:
    """``n_words`` words drawn from a small vocabulary: about one token each on most tokenizers
    (exactly one on the twin)."""
    return synthetic_texts(1, n_words, rng)[0]


def jsonl_entries(
    path: Path, strict: bool, problems: list[str], parse: Callable[[dict[str, Any], str], T]
) -> list[T]:
    """``parse(object, "FILE:LINE")`` for every JSON-object line of ``path``. A bad line is a
    numbered problem in ``problems`` (fatal with ``strict``); blank lines are skipped."""
    out: list[T] = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            obj = json.loads(line)
            if not isinstance(obj, dict):
                raise DatasetError(f"{where}: expected a JSON object")
            _check_text(obj, where)
            out.append(parse(obj, where))
        except json.JSONDecodeError as exc:
            problems.append(f"{where}: not valid JSON ({exc.msg})")
        except DatasetError as exc:
            problems.append(str(exc))
        if strict and problems:
            raise DatasetError(problems[0])
    return out


def _check_text(obj: object, where: str) -> None:
    """JSON may escape half of a UTF-16 pair (``"\\udcff"``), which is no text: no request
    could carry it (UTF-8 has no encoding for it)."""
    try:
        json.dumps(obj, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise DatasetError(
            f"{where}: a string holds a lone UTF-16 surrogate (an escape like \\udcff without "
            "its pair), which is not text"
        ) from None


def _jsonl(path: Path, strict: bool, problems: list[str], class_field: str) -> list[Prompt]:
    return jsonl_entries(
        path, strict, problems, lambda obj, where: prompt_of(obj, where, class_field=class_field)
    )


def token_count(obj: dict[str, Any], key: str, where: str) -> int | None:
    """``obj[key]`` as a token count in 1..1,048,576, or None when absent."""
    n = obj.get(key)
    if n is not None and (
        not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_TOKENS
    ):
        raise DatasetError(f"{where}: {key!r} must be an integer in 1..{MAX_TOKENS:,}")
    return n


def prompt_of(
    obj: dict[str, Any], where: str, *, text_required: bool = True, class_field: str = "class"
) -> Prompt:
    """One dataset (or trace) line: ``prompt`` or ``messages``, ``max_tokens``, and the traffic
    class in ``class_field`` (a string or a number; absent: no class)."""
    prompt, messages = obj.get("prompt"), obj.get("messages")
    if prompt is not None and messages is not None:
        raise DatasetError(f"{where}: give 'prompt' or 'messages', not both")
    if text_required and prompt is None and messages is None:
        raise DatasetError(f"{where}: needs exactly one of 'prompt' or 'messages'")
    if prompt is not None and not isinstance(prompt, str):
        raise DatasetError(f"{where}: 'prompt' must be a string")
    if messages is not None and (
        not isinstance(messages, list) or not all(isinstance(x, dict) for x in messages)
    ):
        raise DatasetError(f"{where}: 'messages' must be a list of objects")
    cls = obj.get(class_field)
    if cls is not None and (isinstance(cls, bool) or not isinstance(cls, str | int)):
        raise DatasetError(f"{where}: the class field {class_field!r} must be a string")
    if isinstance(cls, str) and not cls.strip():
        raise DatasetError(f"{where}: the class field {class_field!r} is empty")
    mt = token_count(obj, "max_tokens", where)
    return Prompt(prompt, messages, None if cls is None else str(cls).strip(), mt)


def _sharegpt(path: Path, problems: list[str]) -> list[Prompt]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(data, list):
        raise DatasetError(f"{path}: a ShareGPT file is a JSON list of conversations")
    out: list[Prompt] = []
    for i, conv in enumerate(data):
        turns = conv.get("conversations") if isinstance(conv, dict) else None
        if not isinstance(turns, list) or len(turns) < 2:
            problems.append(f"{path}: entry {i} has fewer than two turns; skipped")
            continue
        human = next(
            (
                t.get("value")
                for t in turns
                if isinstance(t, dict) and t.get("from") in ("human", "user")
            ),
            None,
        )
        reply = next(
            (
                t.get("value")
                for t in turns
                if isinstance(t, dict) and t.get("from") in ("gpt", "assistant")
            ),
            None,
        )
        if not isinstance(human, str) or not isinstance(reply, str):
            problems.append(f"{path}: entry {i} lacks a human prompt or a reply; skipped")
            continue
        try:
            _check_text(human, f"{path}: entry {i}")
        except DatasetError as exc:
            problems.append(f"{exc}; skipped")
            continue
        out.append(
            Prompt(None, [{"role": "user", "content": human}], None, max(1, len(reply.split())))
        )
    return out


def load_prompts(
    spec: str,
    n: int,
    seed: int,
    *,
    strict: bool = False,
    class_field: str | None = None,
    only_class: str | None = None,
) -> tuple[list[Prompt], list[str]]:
    """``n`` prompts from ``spec`` in a seeded order, and the problems found (line-numbered).

    ``class_field``: the JSONL field that names a line's traffic class (default ``class``; a
    field named here that no line has is an error). ``only_class``: keep that class's lines."""
    rng = np.random.default_rng(seed)
    if spec.startswith("synthetic:"):
        if class_field is not None or only_class is not None:
            raise DatasetError(
                f"{spec}: synthetic prompts have no classes (--class-field and --only-class "
                "need a JSONL dataset)",
                "--class-field" if class_field is not None else "--only-class",
            )
        return _synthetic(spec, n, rng), []
    path = Path(spec)
    if not path.exists():
        raise DatasetError(f"dataset not found: {path}")
    if not path.is_file():
        raise DatasetError(f"{path} is not a file")
    problems: list[str] = []
    try:
        if path.suffix.lower() == ".jsonl":
            pool = _jsonl(path, strict, problems, class_field or "class")
        else:
            if class_field is not None or only_class is not None:
                raise DatasetError(
                    f"{path}: a ShareGPT file has no class field (--class-field and --only-class "
                    "need a JSONL dataset)",
                    "--class-field" if class_field is not None else "--only-class",
                )
            pool = _sharegpt(path, problems)
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise DatasetError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if not pool:
        raise DatasetError(f"{path}: no usable prompts" + (f" ({problems[0]})" if problems else ""))
    seen = sorted({p.cls for p in pool if p.cls is not None})
    if class_field is not None and not seen:
        raise DatasetError(f"{path}: no line has the class field {class_field!r}", "--class-field")
    if only_class is not None:
        pool = [p for p in pool if p.cls == only_class]
        if not pool:
            found = ", ".join(seen) if seen else "none"
            raise DatasetError(
                f"{path}: no line of class {only_class!r} (classes found: {found})", "--only-class"
            )
    order = rng.permutation(len(pool))
    reps = -(-n // len(pool))
    idx = np.concatenate([order] * reps)[:n]
    return [pool[i] for i in idx], problems
