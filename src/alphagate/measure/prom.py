"""vLLM / SGLang speculative-decoding metrics: parse, snapshot, diff, derive ρ, τ, per-position α.

Three separate pieces (as vLLM splits SpecDecodingStats / Logging / Prom): :func:`parse_spec_counters`
reads one exposition text with ``prometheus_client.parser``; :class:`SpecCounters` holds totals
summed across every ``engine`` (and other) label set; :func:`spec_delta` diffs two snapshots —
per source, so replicas are summed after their own reset handling — and :class:`SpecAcceptance`
derives the three quantities exactly as vLLM's ``SpecDecodingLogging`` does:

    ρ = Δaccepted / Δdraft_tokens        τ = 1 + Δaccepted / Δdrafts
    per-position rate_i = Δaccepted_per_pos[i] / Δdrafts   (unconditional; α_i = rate_i / rate_{i−1})

PromQL equivalents (vllm/v1/spec_decode/metrics.py docstring):
``rate(vllm:spec_decode_num_accepted_tokens_total[$i]) / rate(vllm:spec_decode_num_draft_tokens_total[$i])``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from alphagate.core.records import Frozen
from alphagate.theory.acceptance import (
    alpha_from_draft_acceptance_rate,
    conditional_from_unconditional,
)

__all__ = ["SpecAcceptance", "SpecCounters", "parse_spec_counters", "spec_delta"]

DRAFTS = "vllm:spec_decode_num_drafts"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens"
PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos"
SGLANG_ACCEPT_LENGTH = "sglang:spec_accept_length"


@dataclass
class SpecCounters:
    """Totals of vLLM's spec-decode counters in one scrape (summed over label sets)."""

    drafts: float = 0.0
    draft_tokens: float = 0.0
    accepted: float = 0.0
    per_pos: dict[int, float] = field(default_factory=dict)
    present: bool = False
    sglang_accept_length: list[float] = field(default_factory=list)


def _counter_total(family_name: str) -> str:
    # prometheus_client's parser strips the _total suffix from counter family names
    return family_name[:-6] if family_name.endswith("_total") else family_name


def parse_spec_counters(text: str) -> SpecCounters:
    """Read the spec-decode counters from Prometheus text exposition (unknown samples ignored)."""
    c = SpecCounters()
    for fam in text_string_to_metric_families(text):
        name = _counter_total(fam.name)
        if name == SGLANG_ACCEPT_LENGTH:
            c.sglang_accept_length += [s.value for s in fam.samples]
            continue
        if name not in (DRAFTS, DRAFT_TOKENS, ACCEPTED, PER_POS):
            continue
        for s in fam.samples:
            if not s.name.endswith("_total") and fam.type == "counter":
                continue  # _created samples
            c.present = True
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


def _diff(before: float, after: float) -> tuple[float, bool]:
    """Counter delta; a decrease means the server restarted, so ``after`` counts since the reset."""
    return (after, True) if after < before else (after - before, False)


class SpecAcceptance(Frozen):
    """Acceptance over one window, in vLLM's semantics, with the i.i.d. α it implies."""

    num_drafts: float
    num_draft_tokens: float
    num_accepted_tokens: float
    accepted_per_pos: list[float]
    k: int | None
    draft_acceptance_rate: float | None
    mean_acceptance_length: float | None
    per_position_acceptance: list[float]
    implied_alpha_by_pos: list[float | None]
    implied_alpha_iid: float | None
    counter_reset: bool
    sources: int
    sglang_accept_length: float | None = None


def spec_delta(before: list[SpecCounters], after: list[SpecCounters]) -> SpecAcceptance:
    """Acceptance between two scrapes of the same list of sources (replicas), summed."""
    if len(before) != len(after):
        raise ValueError("before and after must list the same sources")
    drafts = draft_tokens = accepted = 0.0
    per_pos: dict[int, float] = {}
    reset = False
    sg: list[float] = []
    for b, a in zip(before, after, strict=True):
        for attr in ("drafts", "draft_tokens", "accepted"):
            d, r = _diff(getattr(b, attr), getattr(a, attr))
            reset |= r
            if attr == "drafts":
                drafts += d
            elif attr == "draft_tokens":
                draft_tokens += d
            else:
                accepted += d
        for pos in set(a.per_pos) | set(b.per_pos):
            d, r = _diff(b.per_pos.get(pos, 0.0), a.per_pos.get(pos, 0.0))
            reset |= r
            per_pos[pos] = per_pos.get(pos, 0.0) + d
        sg += a.sglang_accept_length
    k = (max(per_pos) + 1) if per_pos else (round(draft_tokens / drafts) if drafts else None)
    rho = accepted / draft_tokens if draft_tokens > 0 else None
    tau = 1.0 + accepted / drafts if drafts > 0 else None
    counts = [per_pos.get(i, 0.0) for i in range(k or 0)]
    rates = [x / drafts for x in counts] if drafts > 0 else []
    implied: list[float | None] = []
    if rates:
        implied = [
            None if x != x else float(x) for x in conditional_from_unconditional(rates)
        ]  # NaN → None
    iid = float(alpha_from_draft_acceptance_rate(rho, k)) if rho is not None and k else None
    return SpecAcceptance(
        num_drafts=drafts,
        num_draft_tokens=draft_tokens,
        num_accepted_tokens=accepted,
        accepted_per_pos=counts,
        k=k,
        draft_acceptance_rate=rho,
        mean_acceptance_length=tau,
        per_position_acceptance=rates,
        implied_alpha_by_pos=implied,
        implied_alpha_iid=None if iid is None or iid != iid else iid,
        counter_reset=reset,
        sources=len(after),
        sglang_accept_length=sum(sg) / len(sg) if sg else None,
    )
