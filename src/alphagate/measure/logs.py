"""``alphagate measure logs``: acceptance from vLLM's periodic ``SpecDecoding metrics`` lines.

vLLM's ``SpecDecodingLogging.log`` (``vllm/v1/spec_decode/metrics.py``) writes, every
``VLLM_LOG_STATS_INTERVAL`` seconds and for that interval only::

    (APIServer pid=12675) INFO 11-30 13:37:02 [metrics.py:120] SpecDecoding metrics: Mean
    acceptance length: 1.50, Accepted throughput: 48.34 tokens/s, Drafted throughput: 287.86
    tokens/s, Accepted: 133 tokens, Drafted: 792 tokens, Per-position acceptance rate: 0.333,
    0.144, 0.027, Avg Draft acceptance rate: 16.8%

(on one line). Summing the lines of a window gives exact accepted and drafted token counts. The
number of drafts is not printed: it is the integer that the printed mean acceptance length
(1 + accepted ÷ drafts, two decimals) and per-position rates (accepted at position i ÷ drafts,
three decimals) allow, between drafted ÷ K (every draft proposed K tokens, as EAGLE and draft
models do) and drafted (an n-gram proposer may propose fewer). The per-position counts are the
rates × drafts.

SGLang's logs are read too, where vLLM lines are absent:

- responses of its native ``/generate`` logged one JSON object per line: ``meta_info`` holds
  ``completion_tokens`` and ``spec_verify_ct`` (verify passes), so τ = completion ÷ verify passes
  (``python/sglang/srt/managers/tokenizer_manager.py``; SGLang's own tests compute it so), with
  exact counts — ρ and α need K (``--k``, SGLang's ``--speculative-num-steps``);
- its ``Decode batch … accept len: 2.53, …`` lines (``scheduler_metrics_mixin.py``): averages
  over each logging interval with no counts behind them, so τ only, without an interval.

What is refused (:class:`MeasureError`, exit 2): input with no line of a log at all (no log
level and time anywhere: not a server log); a window whose every line has impossible figures;
and the same SpecDecoding line twice — the same time and the same text, which one process never
logs twice: a log given twice, or concatenated with its copy, would otherwise count every
interval twice (and meet ``--min-drafts`` by doubling). Lines are named ``FILE:LINE`` when the
input says which file each came from (:func:`read_lines`), else by their number in the input.
A log that works but holds no SpecDecoding line yet, or none inside the window, is exit 3.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import re
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from alphagate.measure.engines import (
    EngineInfo,
    current_accept_rate,
    from_log_line,
    from_meta_keys,
)
from alphagate.measure.estimate import estimate
from alphagate.measure.results import MeasureError, MeasureResult

__all__ = ["LogLine", "measure_logs", "parse_log_line", "parse_sglang_line", "read_lines"]

#: one line of input: its text, or (file, line number, text) when the file is known
InputLine = str | tuple[str, int, str]

_SGLANG_DECODE = re.compile(r"Decode batch.*?accept len: (?P<len>[\d.]+)")
_SGLANG_RATE = re.compile(r"accept rate: (?P<rate>[\d.]+)")
_META_KEYS = ("spec_num_correct_drafts", "spec_accepted_drafts", "spec_accept_token_num")
_PID = re.compile(r"pid=(\d+)")
_TIME = re.compile(r"\b(\d\d-\d\d \d\d:\d\d:\d\d)\b")
#: what a line of a server log starts with: a level and a time (vLLM ``INFO 11-30 13:37:02``,
#: SGLang ``[2025-11-30 13:37:02]``, Python logging ``2025-11-30 13:37:02,123 INFO``)
_LOG_LINE = re.compile(
    r"\b(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\b.{0,40}?\d\d:\d\d:\d\d"
    r"|\d\d:\d\d:\d\d.{0,40}?\b(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\b"
    r"|^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d"
)
_LINE = re.compile(
    r"SpecDecoding metrics: Mean acceptance length: (?P<tau>[\d.]+), "
    r"Accepted throughput: [\d.]+ tokens/s, Drafted throughput: [\d.]+ tokens/s, "
    r"Accepted: (?P<acc>\d+) tokens, Drafted: (?P<dr>\d+) tokens, "
    r"Per-position acceptance rate: (?P<pos>[\d., ]+?), "
    r"Avg Draft acceptance rate: (?P<rate>[\d.]+|nan)%"
)


@dataclass(frozen=True)
class LogLine:
    """One ``SpecDecoding metrics`` line: one logging interval of one server process."""

    lineno: int
    when: datetime | None  # month, day and time as logged (the year is not in the log)
    pid: str | None
    accepted: int
    drafted: int
    per_pos_rates: tuple[float, ...]
    tau: float  # the printed mean acceptance length (2 decimals)

    @property
    def k(self) -> int:
        return len(self.per_pos_rates)

    @property
    def consistent(self) -> bool:
        """Figures one interval of one speculative decoder can print."""
        lo, hi = self._bounds()
        rates = self.per_pos_rates
        return (
            self.accepted <= self.drafted
            and math.ceil(lo - 1e-9) <= math.floor(hi + 1e-9)
            and all(b <= a + 0.001 for a, b in itertools.pairwise(rates))
        )

    def _bounds(self) -> tuple[float, float]:
        k = self.k
        if not k or not self.drafted:
            return 0.0, 0.0
        lo, hi = self.drafted / k, float(self.drafted)
        if self.accepted > 0:
            t = self.tau - 1.0
            lo = max(lo, self.accepted / (t + 0.005))
            if t > 0.005:
                hi = min(hi, self.accepted / (t - 0.005))
            s, slack = sum(self.per_pos_rates), k * 0.0005
            lo = max(lo, self.accepted / (s + slack))
            if s > slack:
                hi = min(hi, self.accepted / (s - slack))
        return lo, hi

    def drafts_range(self) -> tuple[int, int]:
        """The whole numbers of drafts the printed figures allow (see the module docstring)."""
        lo, hi = self._bounds()
        ilo, ihi = math.ceil(lo - 1e-9), math.floor(hi + 1e-9)
        return (ilo, ihi) if ilo <= ihi else (round(lo), round(lo))

    @property
    def drafts(self) -> float:
        """The likeliest number of drafts: drafted ÷ K when allowed, else the nearest allowed
        whole number to accepted ÷ the summed rates."""
        lo, hi = self.drafts_range()
        full = self.drafted / self.k if self.k else 0.0
        if self.drafted % max(self.k, 1) == 0 and lo <= full <= hi:
            return full
        guess = (
            round(self.accepted / sum(self.per_pos_rates))
            if self.accepted > 0 and sum(self.per_pos_rates) > 0
            else full
        )
        return float(min(hi, max(lo, guess)))


def parse_log_line(text: str, lineno: int = 0) -> LogLine | None:
    """The line's figures, or None when it is not a (whole) SpecDecoding line."""
    if "SpecDecoding metrics:" not in text:
        return None
    m = _LINE.search(text)
    if m is None:
        return None
    head = text[: m.start()]
    ts, pid = _TIME.search(head), _PID.search(head)
    when = None
    if ts:
        try:
            when = datetime.strptime("2000-" + ts.group(1), "%Y-%m-%d %H:%M:%S")
        except ValueError:
            when = None
    try:
        rates = tuple(float(x) for x in m.group("pos").split(",") if x.strip())
        tau = float(m.group("tau"))
    except ValueError:  # "1.2.3": digits and dots that are not a number
        return None
    return LogLine(
        lineno,
        when,
        pid.group(1) if pid else None,
        int(m.group("acc")),
        int(m.group("dr")),
        rates,
        tau,
    )


def _time_unreadable(text: str) -> bool:
    """A SpecDecoding line whose time is there but is no date (``13-45 99:99:99``)."""
    head = text[: text.find("SpecDecoding metrics:")]
    ts = _TIME.search(head)
    if ts is None:
        return bool(re.search(r"\d\d-\d\d \d", head))
    try:
        datetime.strptime("2000-" + ts.group(1), "%Y-%m-%d %H:%M:%S")
    except ValueError:
        return True
    return False


def read_lines(files: Sequence[str]) -> Iterator[tuple[str, int, str]]:
    """(file, line number, text) of every line of ``files`` in order (``-``: standard input),
    streamed — a log of days need not fit in memory; undecodable bytes become U+FFFD. Raises
    ``OSError`` for a file that cannot be read."""
    for f in files:
        if f == "-":
            for i, text in enumerate(sys.stdin, start=1):
                yield "<stdin>", i, text
            continue
        with Path(f).open(encoding="utf-8", errors="replace") as fh:
            for i, text in enumerate(fh, start=1):
                yield f, i, text


def parse_sglang_line(text: str) -> tuple[str, float, float] | None:
    """``("meta", completion_tokens, spec_verify_ct)`` for a logged ``/generate`` response,
    ``("decode", accept_len, 1)`` for a ``Decode batch`` line, else None."""
    if "spec_verify_ct" in text:
        try:
            obj = json.loads(text[text.index("{") :])
        except (ValueError, json.JSONDecodeError):
            return None
        meta = obj.get("meta_info") if isinstance(obj, dict) else None
        if isinstance(meta, dict):
            n, ct = meta.get("completion_tokens"), meta.get("spec_verify_ct")
            if isinstance(n, int) and isinstance(ct, int) and ct > 0 and n >= ct:
                return "meta", float(n), float(ct)
        return None
    m = _SGLANG_DECODE.search(text)
    if m is not None:
        with contextlib.suppress(ValueError):
            return "decode", float(m.group("len")), 1.0
    return None


def _sglang(read: _Read, source: str, k: int | None) -> MeasureResult:
    items = read.sglang
    engine = read.engine or EngineInfo(
        engine="sglang", source="its log lines; no server_args line in the log"
    )
    meta = [(n, ct) for kind, n, ct in items if kind == "meta"]
    if meta:
        completion, verify = sum(n for n, _ in meta), sum(ct for _, ct in meta)
        accepted = completion - verify  # every verify pass emits its accepted drafts + 1
        try:
            overall = estimate(
                verify,
                verify * k if k else 0.0,
                accepted,
                [],
                k,
                batches=[(ct, ct * k, n - ct) for n, ct in meta] if k else None,
            )
        except ValueError as exc:
            raise MeasureError(
                f"{source}: {exc}: with K = {k} a verify pass emits at most {(k or 0) + 1} "
                "tokens — is --k SGLang's --speculative-num-steps?"
            ) from None
        notes = [
            f"SGLang meta_info of {len(meta):,} responses: τ = completion tokens ÷ verify passes"
        ]
        if k is None:
            notes.append("give --k (SGLang's --speculative-num-steps) for ρ, α and intervals")
        return MeasureResult(
            verb="measure logs",
            source=f"{source}: {len(meta):,} SGLang responses",
            overall=overall,
            notes=notes,
            engine=engine,
        )
    lens = [x for kind, x, _ in items if kind == "decode"]
    rate, rate_note = _sglang_rate(read.sglang_rates, engine)
    overall = estimate(0.0, 0.0, 0.0, [], k).model_copy(
        update={"sglang_accept_length": sum(lens) / len(lens), "sglang_accept_rate": rate}
    )
    return MeasureResult(
        verb="measure logs",
        source=f"{source}: {len(lens):,} SGLang 'Decode batch' lines",
        overall=overall,
        notes=[
            "SGLang logs an average accept length per interval with no counts behind it: τ "
            "only, the mean of the intervals, without a confidence interval; log the meta_info "
            "of responses, or scrape /metrics, for counts",
            *([rate_note] if rate_note else []),
        ],
        engine=engine,
    )


def _sglang_rate(
    rates: list[tuple[float, float, str]], engine: EngineInfo
) -> tuple[float | None, str | None]:
    """SGLang's logged accept rates in their current definition, averaged, and what was done
    (:func:`~alphagate.measure.engines.current_accept_rate`); None with the reason when they
    cannot be converted (the accept length τ stands either way)."""
    if not rates:
        return None, None
    try:
        now = [current_accept_rate(r, tau, engine, where) for tau, r, where in rates]
    except ValueError as exc:
        return None, f"accept rate not reported: {exc}"
    mean = sum(now) / len(now)
    changed = any(abs(a - r) > 1e-9 for a, (_, r, _) in zip(now, rates, strict=True))
    how = (
        "converted from the definition before SGLang 0.5.11 (PR #23530: (accepted + passes) ÷ "
        f"(passes · num_draft_tokens), num_draft_tokens = {engine.num_draft_tokens})"
        if changed
        else "as logged"
    )
    return mean, (
        f"SGLang's accept rate {mean:.3f}: accepted ÷ (passes · (num_draft_tokens − 1)), {how}"
    )


def _in_window(line: LogLine, since: datetime | None, until: datetime | None) -> bool:
    if line.when is None:
        return since is None and until is None
    return (since is None or line.when >= since) and (until is None or line.when <= until)


def parse_when(text: str) -> datetime:
    """``MM-DD HH:MM[:SS]`` as vLLM logs it."""
    for fmt in ("%m-%d %H:%M:%S", "%m-%d %H:%M"):
        try:
            return datetime.strptime("2000-" + text.strip(), "%Y-" + fmt)
        except ValueError:
            continue
    raise MeasureError(f"{text!r} is not MM-DD HH:MM[:SS] (the time format of vLLM's log lines)")


def measure_logs(
    lines: Iterable[InputLine],
    source: str,
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    last_s: float | None = None,
    k: int | None = None,
) -> MeasureResult:
    """Sum the SpecDecoding lines of a window (or, without them, SGLang's lines). ``lines``: the
    texts, or (file, line number, text) from :func:`read_lines` so that messages name the file.
    ``last_s``: the window is the last so many seconds before the newest line. Raises
    :class:`MeasureError`: exit 2 for input that is not a log, repeated lines or impossible
    figures; exit 3 for a log with no SpecDecoding line (in the window) yet."""
    read = _read(lines, source)
    if not read.found and read.sglang:
        return _sglang(read, source, k)
    if not read.found:
        raise _no_spec_lines(read, source)
    since, until = _bounds(read.found, since, until, last_s)
    window, notes = _usable(read, source, since, until)
    k = _window_k(window, source, k)
    pids = {x.pid for x in window if x.pid}
    if len(pids) > 1:
        notes.append(
            f"lines from {len(pids)} server processes (pids {', '.join(sorted(pids))}) are summed"
        )
    total = _LogSum.of(window, k)
    if total.drafts_high > total.drafts_low:
        notes.append(
            f"drafts are not logged: {total.drafts:,.0f} is the likeliest count the printed "
            f"figures allow ({total.drafts_low:,}–{total.drafts_high:,}); ρ and the token counts "
            "are exact"
        )
    notes.append("per-position counts are the logged rates × drafts (rates printed to 3 decimals)")
    whens = sorted(x.when for x in window if x.when is not None)
    try:
        overall = estimate(
            total.drafts,
            total.drafted,
            total.accepted,
            total.per_pos,
            k,
            batches=[(x.drafts, float(x.drafted), float(x.accepted)) for x in window],
        )
    except ValueError as exc:
        raise MeasureError(f"{source}: inconsistent figures: {exc}") from None
    return MeasureResult(
        verb="measure logs",
        source=f"{source}: {len(window)} SpecDecoding lines"
        + (f" from {whens[0]:%m-%d %H:%M:%S} to {whens[-1]:%m-%d %H:%M:%S}" if whens else ""),
        window_s=_span_s(whens),
        overall=overall,
        sources=max(1, len(pids)),
        drafts_range=(float(total.drafts_low), float(total.drafts_high)),
        notes=notes,
        engine=read.engine
        or EngineInfo(engine="vllm", source="SpecDecoding lines; no version header in the log"),
    )


def _no_spec_lines(read: _Read, source: str) -> MeasureError:
    """Why input without a SpecDecoding line is refused: not a log (exit 2), or none yet (3)."""
    if not read.cut and not read.looks_like_a_log:
        return MeasureError(
            f"{source}: not a vLLM or SGLang log: no 'SpecDecoding metrics' line, and no line "
            "carries a log level and a time (vLLM writes 'INFO 11-30 13:37:02 [file.py:N] …')"
        )
    why = f" ({len(read.cut)} cut-off lines)" if read.cut else ""
    return MeasureError(
        f"{source}: no 'SpecDecoding metrics' lines{why} (nor SGLang accept lengths): is "
        "speculation on, and are these vLLM logs at INFO level?",
        exit_code=3,
    )


def _bounds(
    found: list[LogLine], since: datetime | None, until: datetime | None, last_s: float | None
) -> tuple[datetime | None, datetime | None]:
    """The window's ends: ``--last`` counts back from the newest line."""
    if last_s is not None:
        newest = max((x.when for x in found if x.when is not None), default=None)
        if newest is not None:
            since = newest - timedelta(seconds=last_s)
    if since is not None and until is not None and since > until:
        raise MeasureError(
            f"--since {since:%m-%d %H:%M:%S} is after --until {until:%m-%d %H:%M:%S}"
        )
    return since, until


def _usable(
    read: _Read, source: str, since: datetime | None, until: datetime | None
) -> tuple[list[LogLine], list[str]]:
    """The window's lines whose figures a decoder can print, and notes on what was skipped
    (refused when every line is impossible)."""
    window = [x for x in read.found if _in_window(x, since, until)]
    notes = []
    if read.bad_time:
        outside = " (outside any --since/--until/--last window)" if since or until else ""
        notes.append(
            f"{len(read.bad_time)} SpecDecoding lines have a time that is no date{outside} "
            f"(lines {', '.join(read.bad_time[:10])})"
        )
    bad = [x for x in window if not x.consistent]
    if bad:
        where = ", ".join(read.where[x.lineno] for x in bad[:10])
        if len(bad) == len(window):
            raise MeasureError(
                f"{source}: every SpecDecoding line in the window has figures no decoder prints "
                f"(accepted above drafted, or rates that no draft count gives; lines {where})"
            )
        window = [x for x in window if x.consistent]
        notes.append(
            f"{len(bad)} lines with impossible figures skipped (accepted above drafted, or "
            f"rates that no draft count gives; lines {where})"
        )
    if read.cut:
        notes.append(
            f"{len(read.cut)} cut-off SpecDecoding lines skipped (lines {', '.join(read.cut[:10])})"
        )
    return window, notes


def _window_k(window: list[LogLine], source: str, k_given: int | None) -> int:
    """The one K the window's lines were logged at (refused when they mix, or differ from --k)."""
    ks = {x.k for x in window}
    if len(ks) > 1:
        raise MeasureError(f"{source}: the window mixes K = {sorted(ks)}; narrow it with --since")
    if not window:
        raise MeasureError(f"{source}: no SpecDecoding line inside the window", exit_code=3)
    k = ks.pop()
    if k_given is not None and k_given != k:
        raise MeasureError(
            f"{source}: the lines show K = {k} per-position rates, not --k {k_given}"
        )
    return k


@dataclass(frozen=True)
class _LogSum:
    """A window's counts: drafts (the likeliest, and the range the printed figures allow),
    drafted and accepted tokens, and accepted tokens per position."""

    drafts: float
    drafts_low: int
    drafts_high: int
    drafted: float
    accepted: float
    per_pos: list[float]

    @classmethod
    def of(cls, window: list[LogLine], k: int) -> _LogSum:
        ranges = [x.drafts_range() for x in window]
        per_pos = [sum(x.per_pos_rates[i] * x.drafts for x in window) for i in range(k)]
        accepted = float(sum(x.accepted for x in window))
        if sum(per_pos) > 0:  # rounded rates: scaled to the exact accepted count, never growing
            scale = accepted / sum(per_pos)
            per_pos = [min(v * scale for v in per_pos[: i + 1]) for i in range(k)]
        return cls(
            drafts=sum(x.drafts for x in window),
            drafts_low=sum(r[0] for r in ranges),
            drafts_high=sum(r[1] for r in ranges),
            drafted=float(sum(x.drafted for x in window)),
            accepted=accepted,
            per_pos=per_pos,
        )


def _span_s(whens: list[datetime]) -> float | None:
    """Seconds the window's lines cover: each line covers the logging interval before it, so the
    first line's interval (the median spacing) is added to the span between first and last."""
    if not whens:
        return None
    gaps = sorted((b - a).total_seconds() for a, b in itertools.pairwise(whens))
    return (whens[-1] - whens[0]).total_seconds() + (gaps[len(gaps) // 2] if gaps else 0.0)


@dataclass
class _Read:
    """What the input held: SpecDecoding lines, cut ones, SGLang's, and where each was."""

    found: list[LogLine]
    cut: list[str]  # where each cut-off SpecDecoding line was
    sglang: list[tuple[str, float, float]]
    bad_time: list[str]  # where each SpecDecoding line with a time that is no date was
    where: dict[int, str]  # a found line's input number → FILE:LINE (or its number)
    looks_like_a_log: bool
    engine: EngineInfo | None = None  # from the log's header (vLLM's version, SGLang's args)
    sglang_rates: list[tuple[float, float, str]] = field(default_factory=list)  # τ, rate, where


def _read(lines: Iterable[InputLine], source: str) -> _Read:
    """One pass over the input; the same SpecDecoding line twice (same time, same text) is
    refused, naming both places."""
    out = _Read([], [], [], [], {}, False)
    seen: dict[str, tuple[int, str]] = {}  # line text → (input number, where) of its first
    for i, item in enumerate(lines, start=1):
        if isinstance(item, str):
            text, where = item, str(i)
        else:
            name, lineno, text = item
            where = f"{name}:{lineno}"
        if not out.looks_like_a_log and _LOG_LINE.search(text):
            out.looks_like_a_log = True
        if out.engine is None and ("version" in text or "server_args=" in text):
            out.engine = from_log_line(text)
        if "SpecDecoding metrics:" not in text:
            if not out.found:
                sg = parse_sglang_line(text)
                if sg is not None:
                    out.sglang.append(sg)
                    rate = _SGLANG_RATE.search(text) if sg[0] == "decode" else None
                    if rate is not None:
                        out.sglang_rates.append((sg[1], float(rate.group("rate")), where))
                    if sg[0] == "meta" and out.engine is None:
                        out.engine = from_meta_keys({k: 1 for k in _META_KEYS if k in text})
            continue
        out.looks_like_a_log = True
        parsed = parse_log_line(text, i)
        if parsed is None:
            out.cut.append(where)
            continue
        if parsed.when is None and _time_unreadable(text):
            out.bad_time.append(where)
        if parsed.when is not None:
            key = text.rstrip("\r\n")
            first_i, first = seen.setdefault(key, (i, where))
            if first_i != i:
                shown = (
                    f"{where} repeats {first}"
                    if isinstance(item, tuple)
                    else f"line {where} of the input ({source}) repeats line {first}"
                )
                raise MeasureError(
                    f"{shown}: the same SpecDecoding line (same time, same figures) twice, which "
                    "one server process never logs — a log given twice, or its lines repeated, "
                    "would count each interval twice. Give each log once"
                )
        out.where[i] = where
        out.found.append(parsed)
    return out
