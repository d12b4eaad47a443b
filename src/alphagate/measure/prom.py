"""vLLM / SGLang speculative-decoding metrics: parse, snapshot, accumulate, derive ρ, τ, α.

Three separate pieces, as vLLM splits ``SpecDecodingStats`` / ``SpecDecodingLogging`` /
``SpecDecodingProm`` (``vllm/v1/spec_decode/metrics.py``):

- :func:`parse_spec_counters` reads one exposition text with ``prometheus_client.parser`` into a
  :class:`SpecCounters` snapshot, summed over every matching label set (``engine``, replicas'
  ``model_name`` filtered when asked);
- :class:`CounterWindow` accumulates the increase of one source's counters over successive
  snapshots, surviving restarts (a counter that goes down restarted from zero);
- :func:`spec_delta` / :meth:`CounterWindow.acceptance` turn the totals into a
  :class:`SpecAcceptance` (an :class:`~alphagate.measure.estimate.AcceptanceEstimate` with the
  window's bookkeeping).

PromQL equivalents, from the ``SpecDecodingProm`` docstring::

    ρ = rate(vllm:spec_decode_num_accepted_tokens_total[$i]) / rate(vllm:spec_decode_num_draft_tokens_total[$i])
    τ = 1 + rate(vllm:spec_decode_num_accepted_tokens_total[$i]) / rate(vllm:spec_decode_num_drafts_total[$i])

SGLang exports only an interval gauge, ``sglang:spec_accept_length`` (τ over its last logging
window, ``python/sglang/srt/metrics/collector.py``): it is averaged, never diffed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from pydantic import Field

from alphagate.measure.estimate import AcceptanceEstimate, Batch, estimate

__all__ = [
    "ACCEPTED",
    "DRAFTS",
    "DRAFT_TOKENS",
    "PER_POS",
    "SGLANG_ACCEPT_LENGTH",
    "CounterWindow",
    "Series",
    "SpecAcceptance",
    "SpecCounters",
    "acceptance_of",
    "merge_acceptance",
    "parse_spec_counters",
    "spec_delta",
]

DRAFTS = "vllm:spec_decode_num_drafts"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens"
PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos"
SGLANG_ACCEPT_LENGTH = "sglang:spec_accept_length"
_FAMILIES = (DRAFTS, DRAFT_TOKENS, ACCEPTED, PER_POS)
#: the twin's clock counters (alphagate.twin.metrics), by the field they fill
_TWIN = {
    "alphagate:twin_steps": "twin_steps",
    "alphagate:twin_step_lag_seconds": "twin_lag_s",
    "alphagate:twin_resyncs": "twin_resyncs",
}


SeriesKey = tuple[tuple[str, str], ...]


@dataclass
class Series:
    """The spec-decode counters of one label set (one engine of one server)."""

    drafts: float = 0.0
    draft_tokens: float = 0.0
    accepted: float = 0.0
    per_pos: dict[int, float] = field(default_factory=dict)

    def went_down_from(self, old: Series) -> bool:
        """A counter below its previous value: the process restarted (all its counters did)."""
        return (
            self.drafts < old.drafts
            or self.draft_tokens < old.draft_tokens
            or self.accepted < old.accepted
            or any(self.per_pos.get(p, 0.0) < v for p, v in old.per_pos.items())
        )


@dataclass
class SpecCounters:
    """vLLM's spec-decode counters in one scrape: per label set (``series``) and summed.

    ``present``: the families exist at all (speculation is on); ``engine``: some family is
    vLLM's or SGLang's own (``vllm:``, ``sglang:``) — the server itself answered, so families
    absent mean speculation is off; ``matched``: some sample passed the label filter; ``models_seen``: the ``model_name`` values on offer, for error messages.
    Built with totals only (no ``series``), the totals are one series.
    """

    drafts: float = 0.0
    draft_tokens: float = 0.0
    accepted: float = 0.0
    per_pos: dict[int, float] = field(default_factory=dict)
    present: bool = False
    engine: bool = False
    #: speculation is on: a vLLM spec-decode counter exists, or SGLang's accept length (a gauge
    #: SGLang registers on every server) reads 1 or more
    speculating: bool = False
    matched: bool = False
    models_seen: set[str] = field(default_factory=set)
    #: the ``model_name`` values of the series counted (the filter's, or every one on offer)
    models_counted: set[str] = field(default_factory=set)
    sglang_accept_length: list[float] = field(default_factory=list)
    since_boot: bool = False  # SGLang /get_server_info: τ averaged since the server started
    series: dict[SeriesKey, Series] = field(default_factory=dict)
    #: the twin's own clock counters (``alphagate:twin_*``); None from any other server
    twin_steps: float | None = None
    twin_lag_s: float | None = None
    twin_resyncs: float | None = None

    def __post_init__(self) -> None:
        if not self.series and (self.drafts or self.draft_tokens or self.accepted or self.per_pos):
            self.series = {(): Series(self.drafts, self.draft_tokens, self.accepted, self.per_pos)}


def _family_name(name: str) -> str:
    # prometheus_client's parser strips the _total suffix from counter family names
    return name[:-6] if name.endswith("_total") else name


def parse_spec_counters(
    text: str, *, model_name: str | None = None, engine: str | None = None
) -> SpecCounters:
    """Read the spec-decode counters from Prometheus text exposition (unknown samples ignored).

    Raises ``ValueError`` when the text is not Prometheus exposition, or a counter is negative,
    NaN or infinite.
    """
    # imported here: the package's exposition side (http.server, wsgiref) costs a CLI's start
    from prometheus_client.parser import text_string_to_metric_families

    c = SpecCounters()
    for fam in text_string_to_metric_families(text):
        name = _family_name(fam.name)
        c.engine = c.engine or name.startswith(("vllm:", "sglang:"))
        if name in _TWIN:
            total = sum(s.value for s in fam.samples if s.name.endswith("_total"))
            setattr(c, _TWIN[name], (getattr(c, _TWIN[name]) or 0.0) + total)
            continue
        if name == SGLANG_ACCEPT_LENGTH:
            c.present = True
            c.speculating = c.speculating or any(s.value >= 1.0 for s in fam.samples)
            for s in fam.samples:
                if model_name is None or s.labels.get("model_name") == model_name:
                    c.matched = True
                    if math.isfinite(s.value) and s.value >= 1.0:
                        c.sglang_accept_length.append(s.value)
            continue
        if name not in _FAMILIES:
            continue
        for s in fam.samples:
            if not s.name.endswith("_total") and fam.type == "counter":
                continue  # _created samples
            c.present = c.speculating = True
            c.models_seen.add(s.labels.get("model_name", ""))
            if model_name is not None and s.labels.get("model_name") != model_name:
                continue
            if engine is not None and s.labels.get("engine") != engine:
                continue
            if not math.isfinite(s.value) or s.value < 0:
                raise ValueError(f"{s.name}{s.labels} = {s.value} is not a counter value")
            c.matched = True
            if s.labels.get("model_name"):
                c.models_counted.add(s.labels["model_name"])
            key = tuple(sorted((k, v) for k, v in s.labels.items() if k != "position"))
            one = c.series.setdefault(key, Series())
            if name == DRAFTS:
                one.drafts += s.value
            elif name == DRAFT_TOKENS:
                one.draft_tokens += s.value
            elif name == ACCEPTED:
                one.accepted += s.value
            else:
                pos = int(s.labels.get("position", "0"))
                one.per_pos[pos] = one.per_pos.get(pos, 0.0) + s.value
    for one in c.series.values():
        c.drafts += one.drafts
        c.draft_tokens += one.draft_tokens
        c.accepted += one.accepted
        for pos, v in one.per_pos.items():
            c.per_pos[pos] = c.per_pos.get(pos, 0.0) + v
    return c


class SpecAcceptance(AcceptanceEstimate):
    """Acceptance over one window of counter scrapes."""

    counter_reset: bool = Field(description="a counter went down (a restart) inside the window")
    sources: int = Field(description="metrics endpoints (replicas) summed")


@dataclass
class CounterWindow:
    """The increase of one source's counters over successive snapshots, per label set.

    A label set whose counters went down restarted: all of its counters count from zero again
    (one counter checked alone would mix a restart with growth). A label set that appears after
    the first snapshot was created inside the window (a new engine process) and counts from zero;
    one that disappears stops counting. Each snapshot after the first adds one *batch* (the
    increase since the previous one).
    """

    last: SpecCounters | None = None
    drafts: float = 0.0
    draft_tokens: float = 0.0
    accepted: float = 0.0
    per_pos: dict[int, float] = field(default_factory=dict)
    resets: int = 0
    appeared: int = 0
    sglang: list[float] = field(default_factory=list)
    batches: list[Batch] = field(default_factory=list)

    def add(self, snap: SpecCounters) -> None:
        prev, self.last = self.last, snap
        self.sglang += snap.sglang_accept_length
        if prev is None:
            return
        batch = [0.0, 0.0, 0.0]
        for key, cur in snap.series.items():
            old = prev.series.get(key)
            if old is None:
                self.appeared += 1
                base = Series()
            else:
                base = Series() if cur.went_down_from(old) else old
                self.resets += int(base is not old)
            d = (cur.drafts - base.drafts, cur.draft_tokens - base.draft_tokens,
                 cur.accepted - base.accepted)  # fmt: skip
            self.drafts += d[0]
            self.draft_tokens += d[1]
            self.accepted += d[2]
            for i in range(3):
                batch[i] += d[i]
            for pos, v in cur.per_pos.items():
                self.per_pos[pos] = self.per_pos.get(pos, 0.0) + v - base.per_pos.get(pos, 0.0)
        self.batches.append((batch[0], batch[1], batch[2]))


def acceptance_of(windows: list[CounterWindow], k: int | None = None) -> SpecAcceptance:
    """The acceptance of several sources (replicas) summed; the i-th batches of all sources (one
    scrape round) form one batch. Raises ``ValueError`` on inconsistent counts or K."""
    per_pos: dict[int, float] = {}
    for w in windows:
        for pos, v in w.per_pos.items():
            per_pos[pos] = per_pos.get(pos, 0.0) + v
    drafts = sum(w.drafts for w in windows)
    draft_tokens = sum(w.draft_tokens for w in windows)
    counts = [per_pos.get(i, 0.0) for i in range(max(per_pos) + 1)] if per_pos else []
    rounds = max((len(w.batches) for w in windows), default=0)
    batches = [
        (
            sum(w.batches[i][0] for w in windows if i < len(w.batches)),
            sum(w.batches[i][1] for w in windows if i < len(w.batches)),
            sum(w.batches[i][2] for w in windows if i < len(w.batches)),
        )
        for i in range(rounds)
    ]
    est = estimate(
        drafts, draft_tokens, sum(w.accepted for w in windows), counts, k, batches=batches
    )
    sg = [x for w in windows for x in w.sglang]
    return SpecAcceptance(
        **(est.model_dump() | {"sglang_accept_length": sum(sg) / len(sg) if sg else None}),
        counter_reset=any(w.resets for w in windows),
        sources=len(windows),
    )


def merge_acceptance(parts: list[SpecAcceptance]) -> SpecAcceptance:
    """Several windows of the same servers (the runs of a level) as one: counts summed, each
    window one batch of the cluster-robust interval. Raises ``ValueError`` on inconsistent
    counts."""
    if len(parts) == 1:
        return parts[0]
    width = max((len(p.accepted_per_pos) for p in parts), default=0)
    per_pos = [sum(p.accepted_per_pos[i] for p in parts if i < len(p.accepted_per_pos))
               for i in range(width)]  # fmt: skip
    ks = [p.k for p in parts if p.k is not None]
    est = estimate(
        sum(p.num_drafts for p in parts),
        sum(p.num_draft_tokens for p in parts),
        sum(p.num_accepted_tokens for p in parts),
        per_pos,
        max(ks) if ks else None,
        batches=[(p.num_drafts, p.num_draft_tokens, p.num_accepted_tokens) for p in parts],
        batch_unit="runs",
    )
    sg = [p.sglang_accept_length for p in parts if p.sglang_accept_length is not None]
    return SpecAcceptance(
        **(est.model_dump() | {"sglang_accept_length": sum(sg) / len(sg) if sg else None}),
        counter_reset=any(p.counter_reset for p in parts),
        sources=max(p.sources for p in parts),
    )


def spec_delta(before: list[SpecCounters], after: list[SpecCounters]) -> SpecAcceptance:
    """Acceptance between two scrapes of the same list of sources (replicas), summed."""
    if len(before) != len(after):
        raise ValueError("before and after must list the same sources")
    windows = []
    for b, a in zip(before, after, strict=True):
        w = CounterWindow(last=b)  # the gauge is read at the end of the window only
        w.add(a)
        windows.append(w)
    return acceptance_of(windows)
