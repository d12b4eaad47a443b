"""Request logs for ``alphagate measure offline``: what was asked and what the server answered.

Accepted, one file at a time (JSONL unless the file is one JSON array):

- the request log of ``alphagate bench --save-text`` (``requests.jsonl``): each record's ``text``
  (the prompt or messages, the output text, and the token ids vLLM returned with
  ``return_token_ids``); failed records and an A/B's candidate side are left out;
- OpenAI requests with their responses, one pair per line: ``{"request": {...}, "response":
  {...}}`` (``response`` may wrap the body as ``{"body": {...}}``, as batch files do) — chat
  (``messages`` → ``choices[0].message.content``) or completions (``prompt`` →
  ``choices[0].text``), with ``prompt_token_ids`` / ``choices[0].token_ids`` when present;
- a conversation per line or item, ``{"messages": [..., {"role": "assistant", ...}]}``: the last
  assistant message is the output, the messages before it the prompt;
- ShareGPT (``{"conversations": [{"from": "human", "value": ...}, {"from": "gpt", ...}]}``): the
  first human turn (after any system turn) is the prompt, the next gpt turn the output.

The class of a request comes from a field (``--class-field``, a dotted path such as
``metadata.class``; a bench record's ``cls`` by default) or from regex rules over the prompt text
(first match wins, ``other`` when none does). Lines that cannot be used are skipped and counted
with their numbers; nothing here loads a tokenizer or a model.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from alphagate.measure.results import MeasureError

__all__ = ["ClassRule", "LogRead", "LoggedRequest", "parse_class_rule", "read_logs", "sample"]

#: a request no rule matches
OTHER = "other"


@dataclass(frozen=True)
class LoggedRequest:
    """One logged request and its response. Chat requests carry ``messages``, completions a
    ``prompt``; token ids are kept when the log has them (then no re-tokenization is needed)."""

    source: str
    line: int
    cls: str | None
    prompt: str | None = None
    messages: tuple[dict[str, Any], ...] | None = None
    prompt_token_ids: tuple[int, ...] | None = None
    output: str | None = None
    output_token_ids: tuple[int, ...] | None = None
    finish_reason: str | None = None

    @property
    def where(self) -> str:
        return f"{self.source}:{self.line}"

    def prompt_text(self) -> str:
        """The prompt as text, for class rules: the prompt, or the messages' contents."""
        if self.prompt is not None:
            return self.prompt
        return "\n".join(str(m.get("content") or "") for m in self.messages or ())


@dataclass(frozen=True)
class ClassRule:
    name: str
    pattern: re.Pattern[str]


def parse_class_rule(text: str) -> ClassRule:
    """``NAME=REGEX`` → a rule; raises ``MeasureError`` naming the flag."""
    name, sep, rx = text.partition("=")
    if not sep or not name.strip() or not rx:
        raise MeasureError(f"--class-rule {text!r}: expected NAME=REGEX")
    try:
        return ClassRule(name.strip(), re.compile(rx))
    except re.error as exc:
        raise MeasureError(f"--class-rule {text!r}: not a regular expression ({exc})") from None


@dataclass
class LogRead:
    """What reading the logs gave: the requests, and every line that could not be used."""

    requests: list[LoggedRequest] = field(default_factory=list)
    skipped: dict[str, list[str]] = field(default_factory=dict)  # reason → ["file:line", …]
    left_out: dict[str, int] = field(default_factory=dict)  # deliberate: failed, candidate side

    def skip(self, reason: str, where: str) -> None:
        self.skipped.setdefault(reason, []).append(where)

    @property
    def num_skipped(self) -> int:
        return sum(len(v) for v in self.skipped.values())


def _get(obj: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(obj, dict) or part not in obj:
            return None
        obj = obj[part]
    return obj


def _ids(x: Any) -> tuple[int, ...] | None:
    if isinstance(x, list) and x and all(isinstance(t, int) and not isinstance(t, bool) for t in x):
        return tuple(x)
    return None


def _messages(x: Any) -> tuple[dict[str, Any], ...] | None:
    if isinstance(x, list) and x and all(isinstance(m, dict) and "role" in m for m in x):
        return tuple(x)
    return None


def _content(m: dict[str, Any]) -> str | None:
    c = m.get("content")
    if isinstance(c, str):
        return c
    if isinstance(c, list):  # content parts: keep the text ones
        return "".join(p.get("text", "") for p in c if isinstance(p, dict))
    return None


class _Unusable(Exception):
    """A line that parsed but holds no usable request; the message is the reason."""


def _from_bench(obj: dict[str, Any], src: str, line: int, read: LogRead) -> LoggedRequest | None:
    if obj.get("error_type") is not None:
        read.left_out["failed requests"] = read.left_out.get("failed requests", 0) + 1
        return None
    if obj.get("target") == "candidate":
        read.left_out["A/B candidate side"] = read.left_out.get("A/B candidate side", 0) + 1
        return None
    t = obj.get("text")
    if not isinstance(t, dict):
        raise _Unusable("a bench record without text: run `alphagate bench --save-text`")
    return LoggedRequest(
        src,
        line,
        obj.get("cls") if isinstance(obj.get("cls"), str) else None,
        prompt=t.get("prompt") if isinstance(t.get("prompt"), str) else None,
        messages=_messages(t.get("messages")),
        prompt_token_ids=_ids(t.get("prompt_token_ids")),
        output=t.get("output") if isinstance(t.get("output"), str) else None,
        output_token_ids=_ids(t.get("output_token_ids")),
        finish_reason=t.get("finish_reason") if isinstance(t.get("finish_reason"), str) else None,
    )


def _from_pair(req: dict[str, Any], resp: Any, src: str, line: int) -> LoggedRequest:
    if isinstance(resp, dict) and isinstance(resp.get("body"), dict):
        resp = resp["body"]
    choice = _get(resp, "choices")
    if not isinstance(choice, list) or not choice or not isinstance(choice[0], dict):
        raise _Unusable("response has no choices[0]")
    c = choice[0]
    msg = c.get("message")
    text = c.get("text") if isinstance(c.get("text"), str) else None
    if text is None and isinstance(msg, dict):
        text = _content(msg)
    prompt = req.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    return LoggedRequest(
        src,
        line,
        None,
        prompt=prompt if isinstance(prompt, str) else None,
        messages=_messages(req.get("messages")),
        prompt_token_ids=_ids(resp.get("prompt_token_ids")) or _ids(c.get("prompt_token_ids"))
        if isinstance(resp, dict)
        else None,
        output=text,
        output_token_ids=_ids(c.get("token_ids")),
        finish_reason=c.get("finish_reason") if isinstance(c.get("finish_reason"), str) else None,
    )


_HUMAN = {"human", "user"}
_BOT = {"gpt", "assistant", "chatgpt", "bard", "bing"}


def _from_sharegpt(conv: list[Any], src: str, line: int) -> LoggedRequest:
    turns = [t for t in conv if isinstance(t, dict) and isinstance(t.get("value"), str)]
    system = [t for t in turns[:1] if t.get("from") == "system"]
    rest = turns[len(system) :]
    if len(rest) < 2 or rest[0].get("from") not in _HUMAN or rest[1].get("from") not in _BOT:
        raise _Unusable("no human turn followed by a gpt turn")
    msgs = [{"role": "system", "content": system[0]["value"]}] if system else []
    msgs.append({"role": "user", "content": rest[0]["value"]})
    return LoggedRequest(src, line, None, messages=tuple(msgs), output=rest[1]["value"])


def _from_conversation(msgs: tuple[dict[str, Any], ...], src: str, line: int) -> LoggedRequest:
    last = msgs[-1]
    out = _content(last)
    if last.get("role") != "assistant" or out is None or len(msgs) < 2:
        raise _Unusable("messages do not end with an assistant message")
    return LoggedRequest(src, line, None, messages=msgs[:-1], output=out)


def _one(obj: Any, src: str, line: int, read: LogRead) -> LoggedRequest | None:
    if not isinstance(obj, dict):
        raise _Unusable("not a JSON object")
    if "run_id" in obj and "chunk_times_s" in obj:
        return _from_bench(obj, src, line, read)
    if isinstance(obj.get("request"), dict) and "response" in obj:
        return _from_pair(obj["request"], obj["response"], src, line)
    if isinstance(obj.get("conversations"), list):
        return _from_sharegpt(obj["conversations"], src, line)
    msgs = _messages(obj.get("messages"))
    if msgs is not None:
        return _from_conversation(msgs, src, line)
    raise _Unusable("neither a bench record, a request/response pair, messages nor ShareGPT")


def _check(r: LoggedRequest) -> None:
    if r.prompt is None and r.messages is None and r.prompt_token_ids is None:
        raise _Unusable("no prompt (prompt, messages or prompt_token_ids)")
    if r.output is None and r.output_token_ids is None:
        raise _Unusable("no output (response text or token ids)")


def _items(path: Path) -> Iterable[tuple[int, Any | None, str | None]]:
    """(line or item number, object or None, parse error or None)."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if text.lstrip().startswith("["):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise MeasureError(f"{path}: a JSON array that does not parse ({exc})") from None
        for i, obj in enumerate(data, 1):
            yield i, obj, None
        return
    for i, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            yield i, json.loads(raw), None
        except json.JSONDecodeError as exc:
            yield i, None, f"not JSON ({exc.msg})"


def read_logs(
    paths: list[Path],
    *,
    class_field: str | None = None,
    class_rules: tuple[ClassRule, ...] = (),
) -> LogRead:
    """Read every file; raises ``MeasureError`` for a missing file, skips (and counts) bad lines."""
    read = LogRead()
    found_field, first_keys = False, None
    for path in paths:
        if not path.is_file():
            raise MeasureError(f"log file not found (or not a file): {path}")
        src = path.name
        for line, obj, err in _items(path):
            where = f"{src}:{line}"
            if err is not None:
                read.skip(err, where)
                continue
            try:
                r = _one(obj, src, line, read)
                if r is None:
                    continue
                _check(r)
            except _Unusable as exc:
                read.skip(str(exc), where)
                continue
            cls = r.cls
            if class_field is not None:
                v = _get(obj, class_field)
                cls = str(v) if v is not None else None
            if class_rules:
                text = r.prompt_text()
                cls = next((c.name for c in class_rules if c.pattern.search(text)), OTHER)
            read.requests.append(LoggedRequest(**{**r.__dict__, "cls": cls}) if cls != r.cls else r)
            if class_field is not None and cls is not None:
                found_field = True
            elif class_field is not None and first_keys is None and isinstance(obj, dict):
                first_keys = sorted(obj)
    if class_field is not None and read.requests and not found_field:
        keys = ", ".join(first_keys or [])
        raise MeasureError(
            f"--class-field {class_field}: no request in the log has this field"
            + (f" (the first one has: {keys})" if keys else "")
        )
    return read


def sample(requests: list[LoggedRequest], n: int | None, seed: int) -> list[LoggedRequest]:
    """A seeded subset of ``n`` requests in log order (all of them when ``n`` is None or more)."""
    if n is None or n >= len(requests):
        return list(requests)
    keep = np.sort(np.random.default_rng(seed).choice(len(requests), size=n, replace=False))
    return [requests[int(i)] for i in keep]
