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
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from alphagate.measure.estimate import estimate
from alphagate.measure.results import MeasureError, MeasureResult

__all__ = ["LogLine", "measure_logs", "parse_log_line", "parse_sglang_line"]

_SGLANG_DECODE = re.compile(r"Decode batch.*?accept len: (?P<len>[\d.]+)")
_PID = re.compile(r"pid=(\d+)")
_TIME = re.compile(r"\b(\d\d-\d\d \d\d:\d\d:\d\d)\b")
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
    rates = tuple(float(x) for x in m.group("pos").split(",") if x.strip())
    return LogLine(
        lineno,
        when,
        pid.group(1) if pid else None,
        int(m.group("acc")),
        int(m.group("dr")),
        rates,
        float(m.group("tau")),
    )


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


def _sglang(items: list[tuple[str, float, float]], source: str, k: int | None) -> MeasureResult:
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
        )
    lens = [x for kind, x, _ in items if kind == "decode"]
    overall = estimate(0.0, 0.0, 0.0, [], k).model_copy(
        update={"sglang_accept_length": sum(lens) / len(lens)}
    )
    return MeasureResult(
        verb="measure logs",
        source=f"{source}: {len(lens):,} SGLang 'Decode batch' lines",
        overall=overall,
        notes=[
            "SGLang logs an average accept length per interval with no counts behind it: τ "
            "only, the mean of the intervals, without a confidence interval; log the meta_info "
            "of responses, or scrape /metrics, for counts"
        ],
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
    lines: Iterable[str],
    source: str,
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    last_s: float | None = None,
    k: int | None = None,
) -> MeasureResult:
    """Sum the SpecDecoding lines of a window (or, without them, SGLang's lines). ``last_s``: the
    window is the last so many seconds before the newest line. Raises :class:`MeasureError`
    (exit 3 when no line matches)."""
    found: list[LogLine] = []
    cut: list[int] = []
    sglang: list[tuple[str, float, float]] = []
    for i, text in enumerate(lines, start=1):
        parsed = parse_log_line(text, i)
        if parsed is not None:
            found.append(parsed)
        elif "SpecDecoding metrics:" in text:
            cut.append(i)
        elif not found:
            sg = parse_sglang_line(text)
            if sg is not None:
                sglang.append(sg)
    k_given = k
    if not found and sglang:
        return _sglang(sglang, source, k)
    if not found:
        why = f" ({len(cut)} cut-off lines)" if cut else ""
        raise MeasureError(
            f"{source}: no 'SpecDecoding metrics' lines{why} (nor SGLang accept lengths): is "
            "speculation on, and are these vLLM logs at INFO level?",
            exit_code=3,
        )
    if last_s is not None:
        newest = max((x.when for x in found if x.when is not None), default=None)
        if newest is not None:
            since = newest - timedelta(seconds=last_s)
    if since is not None and until is not None and since > until:
        raise MeasureError(
            f"--since {since:%m-%d %H:%M:%S} is after --until {until:%m-%d %H:%M:%S}"
        )
    window = [x for x in found if _in_window(x, since, until)]
    notes = []
    bad = [x for x in window if not x.consistent]
    if bad:
        window = [x for x in window if x.consistent]
        notes.append(
            f"{len(bad)} lines with impossible figures skipped (accepted above drafted, or "
            f"rates that no draft count gives; lines {', '.join(str(x.lineno) for x in bad[:10])})"
        )
    if cut:
        notes.append(
            f"{len(cut)} cut-off SpecDecoding lines skipped (lines {', '.join(map(str, cut[:10]))})"
        )
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
    pids = {x.pid for x in window if x.pid}
    if len(pids) > 1:
        notes.append(
            f"lines from {len(pids)} server processes (pids {', '.join(sorted(pids))}) are summed"
        )
    drafts = sum(x.drafts for x in window)
    ranges = [x.drafts_range() for x in window]
    lo, hi = sum(r[0] for r in ranges), sum(r[1] for r in ranges)
    per_pos = [sum(x.per_pos_rates[i] * x.drafts for x in window) for i in range(k)]
    accepted = float(sum(x.accepted for x in window))
    if sum(per_pos) > 0:  # rounded rates: scaled to the exact accepted count, never growing
        scale = accepted / sum(per_pos)
        per_pos = [min(v * scale for v in per_pos[: i + 1]) for i in range(k)]
    if hi > lo:
        notes.append(
            f"drafts are not logged: {drafts:,.0f} is the likeliest count the printed figures "
            f"allow ({lo:,}–{hi:,}); ρ and the token counts are exact"
        )
    notes.append("per-position counts are the logged rates × drafts (rates printed to 3 decimals)")
    whens = sorted(x.when for x in window if x.when is not None)
    # each line covers the logging interval before it: add one (the median spacing)
    gaps = sorted((b - a).total_seconds() for a, b in itertools.pairwise(whens))
    span = (whens[-1] - whens[0]).total_seconds() + (gaps[len(gaps) // 2] if gaps else 0.0)
    try:
        overall = estimate(
            drafts,
            float(sum(x.drafted for x in window)),
            accepted,
            per_pos,
            k,
            batches=[(x.drafts, float(x.drafted), float(x.accepted)) for x in window],
        )
    except ValueError as exc:
        raise MeasureError(f"{source}: inconsistent figures: {exc}") from None
    return MeasureResult(
        verb="measure logs",
        source=f"{source}: {len(window)} SpecDecoding lines"
        + (f" from {whens[0]:%m-%d %H:%M:%S} to {whens[-1]:%m-%d %H:%M:%S}" if whens else ""),
        window_s=span if whens else None,
        overall=overall,
        sources=max(1, len(pids)),
        drafts_range=(float(lo), float(hi)),
        notes=notes,
    )
