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

from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families
from pydantic import Field

from alphagate.measure.estimate import AcceptanceEstimate, estimate

__all__ = [
    "ACCEPTED",
    "DRAFTS",
    "DRAFT_TOKENS",
    "PER_POS",
    "SGLANG_ACCEPT_LENGTH",
    "CounterWindow",
    "SpecAcceptance",
    "SpecCounters",
    "acceptance_of",
    "parse_spec_counters",
    "spec_delta",
]

DRAFTS = "vllm:spec_decode_num_drafts"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens"
PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos"
SGLANG_ACCEPT_LENGTH = "sglang:spec_accept_length"
_FAMILIES = (DRAFTS, DRAFT_TOKENS, ACCEPTED, PER_POS)


@dataclass
class SpecCounters:
    """Totals of vLLM's spec-decode counters in one scrape (summed over the matching label sets).

    ``present``: the families exist at all (speculation is on); ``matched``: some sample passed
    the label filter; ``models_seen``: the ``model_name`` values on offer, for error messages.
    """

    drafts: float = 0.0
    draft_tokens: float = 0.0
    accepted: float = 0.0
    per_pos: dict[int, float] = field(default_factory=dict)
    present: bool = False
    matched: bool = False
    models_seen: set[str] = field(default_factory=set)
    sglang_accept_length: list[float] = field(default_factory=list)
    since_boot: bool = False  # SGLang /get_server_info: τ averaged since the server started


def _family_name(name: str) -> str:
    # prometheus_client's parser strips the _total suffix from counter family names
    return name[:-6] if name.endswith("_total") else name


def parse_spec_counters(
    text: str, *, model_name: str | None = None, engine: str | None = None
) -> SpecCounters:
    """Read the spec-decode counters from Prometheus text exposition (unknown samples ignored).

    Raises ``ValueError`` when the text is not Prometheus exposition.
    """
    c = SpecCounters()
    for fam in text_string_to_metric_families(text):
        name = _family_name(fam.name)
        if name == SGLANG_ACCEPT_LENGTH:
            c.present = True
            for s in fam.samples:
                if model_name is None or s.labels.get("model_name") == model_name:
                    c.matched = True
                    c.sglang_accept_length.append(s.value)
            continue
        if name not in _FAMILIES:
            continue
        for s in fam.samples:
            if not s.name.endswith("_total") and fam.type == "counter":
                continue  # _created samples
            c.present = True
            c.models_seen.add(s.labels.get("model_name", ""))
            if model_name is not None and s.labels.get("model_name") != model_name:
                continue
            if engine is not None and s.labels.get("engine") != engine:
                continue
            c.matched = True
            if name == DRAFTS:
                c.drafts += s.value
            elif name == DRAFT_TOKENS:
                c.draft_tokens += s.value
            elif name == ACCEPTED:
                c.accepted += s.value
            else:
                pos = int(s.labels.get("position", "0"))
                c.per_pos[pos] = c.per_pos.get(pos, 0.0) + s.value
    return c


def _increase(before: float, after: float) -> tuple[float, bool]:
    """Counter increase; a decrease means the server restarted, so ``after`` counts since then."""
    return (after, True) if after < before else (after - before, False)


class SpecAcceptance(AcceptanceEstimate):
    """Acceptance over one window of counter scrapes."""

    counter_reset: bool = Field(description="a counter went down (a restart) inside the window")
    sources: int = Field(description="metrics endpoints (replicas) summed")


@dataclass
class CounterWindow:
    """The increase of one source's counters over successive snapshots, across restarts."""

    last: SpecCounters | None = None
    drafts: float = 0.0
    draft_tokens: float = 0.0
    accepted: float = 0.0
    per_pos: dict[int, float] = field(default_factory=dict)
    resets: int = 0
    sglang: list[float] = field(default_factory=list)

    def add(self, snap: SpecCounters) -> None:
        prev, self.last = self.last, snap
        self.sglang += snap.sglang_accept_length
        if prev is None:
            return
        reset = False
        for attr in ("drafts", "draft_tokens", "accepted"):
            d, r = _increase(getattr(prev, attr), getattr(snap, attr))
            setattr(self, attr, getattr(self, attr) + d)
            reset |= r
        for pos in set(prev.per_pos) | set(snap.per_pos):
            d, r = _increase(prev.per_pos.get(pos, 0.0), snap.per_pos.get(pos, 0.0))
            self.per_pos[pos] = self.per_pos.get(pos, 0.0) + d
            reset |= r
        self.resets += int(reset)


def acceptance_of(windows: list[CounterWindow], k: int | None = None) -> SpecAcceptance:
    """The acceptance of several sources (replicas) summed."""
    per_pos: dict[int, float] = {}
    for w in windows:
        for pos, v in w.per_pos.items():
            per_pos[pos] = per_pos.get(pos, 0.0) + v
    drafts = sum(w.drafts for w in windows)
    draft_tokens = sum(w.draft_tokens for w in windows)
    if k is None:
        k = (max(per_pos) + 1) if per_pos else (round(draft_tokens / drafts) if drafts else None)
    counts = [per_pos.get(i, 0.0) for i in range(k or 0)] if per_pos else []
    est = estimate(drafts, draft_tokens, sum(w.accepted for w in windows), counts, k)
    sg = [x for w in windows for x in w.sglang]
    return SpecAcceptance(
        **(est.model_dump() | {"sglang_accept_length": sum(sg) / len(sg) if sg else None}),
        counter_reset=any(w.resets for w in windows),
        sources=len(windows),
    )


def spec_delta(before: list[SpecCounters], after: list[SpecCounters]) -> SpecAcceptance:
    """Acceptance between two scrapes of the same list of sources (replicas), summed."""
    if len(before) != len(after):
        raise ValueError("before and after must list the same sources")
    windows = []
    for b, a in zip(before, after, strict=True):
        w = CounterWindow()
        w.add(b)
        w.sglang = []  # the gauge is read at the end of the window only
        w.add(a)
        windows.append(w)
    return acceptance_of(windows)
