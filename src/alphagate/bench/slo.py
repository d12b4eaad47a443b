"""Latency SLOs per request, and goodput: the requests per second that meet every bound.

A request is **good** when it completed and each of its latencies is within its bound: the
definition of ``vllm bench serve --goodput`` (``vllm/benchmarks/serve.py``, ``calculate_metrics``:
a request counts when every SLO value is ≥ its metric; after DistServe, Zhong et al. 2024) and of
AIPerf's ``--goodput`` (``docs/tutorials/goodput.md``). Goodput = good requests ÷ the level's
duration, and the good requests' output tokens ÷ the same duration.

A level **meets** the SLO when the fraction of its requests that are good (a failed request is not)
reaches ``attainment`` — DistServe's SLO attainment. With one bound and attainment 0.99 that is
exactly "P99 of that latency ≤ bound" over the level's requests, so ``ttft_p99_ms=2000`` is read as
the per-request bound ``ttft_ms ≤ 2000`` judged at 99 %.

Per-request quantities, in ms (the names users type for each are in :data:`ALIASES`):

- ``ttft_ms`` — first content chunk − send;
- ``tpot_ms`` — (E2E − TTFT) ÷ (output tokens − 1), output tokens from ``usage``;
- ``e2e_ms`` — last content chunk − send;
- ``itl_per_token_p99_ms`` — the request's own P99 of chunk gap ÷ tokens in the chunk (one sample
  per token), ``itl_per_token_max_ms`` — its largest.

A request that delivered no token has no TTFT or E2E and is never good. TPOT and ITL bounds do not
apply to a request of one output token or one chunk (vLLM counts such a TPOT as 0).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Literal, get_args

from pydantic import Field, field_validator

from alphagate.core.errors import ConfigError
from alphagate.core.records import Frozen
from alphagate.sim.results import weighted_quantiles

if TYPE_CHECKING:
    from alphagate.bench.request_record import RequestRecord

__all__ = [
    "ALIASES",
    "SLO",
    "Goodput",
    "SloKey",
    "goodput_of",
    "missed_bounds",
    "parse_slo",
    "request_latencies_ms",
]

SloKey = Literal["ttft_ms", "tpot_ms", "e2e_ms", "itl_per_token_p99_ms", "itl_per_token_max_ms"]
SLO_KEYS: tuple[SloKey, ...] = get_args(SloKey)

#: Names accepted on the command line → the per-request quantity (vLLM: ttft, tpot, e2el;
#: AIPerf: time_to_first_token, inter_token_latency, request_latency).
ALIASES: dict[str, SloKey] = {
    **{k: k for k in SLO_KEYS},
    **dict.fromkeys(
        ("ttft", "time_to_first_token", "ttft_p99", "ttft_p99_ms", "time_to_first_token_ms"),
        "ttft_ms",
    ),
    **dict.fromkeys(
        ("tpot", "tpot_p99", "tpot_p99_ms", "inter_token_latency", "inter_token_latency_ms"),
        "tpot_ms",
    ),
    **dict.fromkeys(
        ("e2e", "e2el", "e2el_ms", "e2e_p99", "e2e_p99_ms", "e2el_p99_ms", "request_latency"),
        "e2e_ms",
    ),
    **dict.fromkeys(
        ("itl_per_token_p99", "itl_token_p99_ms", "itl_per_token_ms"), "itl_per_token_p99_ms"
    ),
    **dict.fromkeys(("itl_per_token_max", "itl_token_max_ms"), "itl_per_token_max_ms"),
}


class SLO(Frozen):
    """Upper bounds on per-request latencies (ms), and the fraction of requests that must meet
    all of them for a level to meet the SLO."""

    bounds_ms: dict[SloKey, float] = Field(min_length=1, description="per-request bound, ms")
    attainment: float = Field(
        default=0.99,
        gt=0.0,
        le=1.0,
        allow_inf_nan=False,
        description="fraction of a level's requests that must be good for it to meet the SLO",
    )

    @field_validator("bounds_ms")
    @classmethod
    def _positive(cls, v: dict[SloKey, float]) -> dict[SloKey, float]:
        for key, bound in v.items():
            if not (math.isfinite(bound) and bound > 0):
                raise ValueError(f"{key}: the bound must be a positive number of ms, got {bound}")
        return v

    def describe(self) -> str:
        """``itl_per_token_p99_ms ≤ 50, ttft_ms ≤ 2000 for 99% of requests``."""
        bounds = ", ".join(f"{k} ≤ {v:g}" for k, v in self.bounds_ms.items())
        return f"{bounds} for {self.attainment * 100:g}% of requests"


_ITEM = re.compile(r"^\s*([A-Za-z0-9_.]+)\s*[=:]\s*([0-9.eE+-]+)\s*(ms|s)?\s*$")


def parse_slo(text: str, attainment: float = 0.99) -> SLO:
    """``itl_per_token_p99_ms=50,ttft_ms=2000`` (or vLLM's ``ttft:500 tpot:50``) → :class:`SLO`.

    Values are milliseconds; a trailing ``s`` means seconds. Raises ConfigError naming the item.
    """
    items = [x for x in re.split(r"[,\s]+", text.strip()) if x]
    if not items:
        raise ConfigError("give at least one bound, e.g. itl_per_token_p99_ms=50")
    bounds: dict[SloKey, float] = {}
    for item in items:
        m = _ITEM.match(item)
        if m is None:
            raise ConfigError(f"{item!r}: expected NAME=MS, e.g. ttft_ms=2000")
        name, value, unit = m.group(1).lower(), m.group(2), m.group(3)
        key = ALIASES.get(name)
        if key is None:
            hint = (
                " (ITL per chunk or per token? use itl_per_token_p99_ms, or tpot_ms)"
                if name.startswith("itl")
                else ""
            )
            raise ConfigError(
                f"{name!r} is not a per-request latency{hint}; known: {', '.join(SLO_KEYS)}"
            )
        try:
            ms = float(value) * (1e3 if unit == "s" else 1.0)
        except ValueError:
            raise ConfigError(f"{item!r}: {value!r} is not a number") from None
        if not (math.isfinite(ms) and ms > 0):
            raise ConfigError(f"{item!r}: the bound must be a positive number of ms")
        if key in bounds:
            raise ConfigError(f"{item!r}: {key} is bounded twice")
        bounds[key] = ms
    return SLO(bounds_ms=bounds, attainment=attainment)


def request_latencies_ms(rec: RequestRecord) -> dict[SloKey, float | None]:
    """Every per-request quantity an SLO can bound, in ms (None where undefined)."""
    gaps, tokens = rec.itl_per_token_s()
    p99 = mx = None
    if gaps.size:
        p99 = float(weighted_quantiles(gaps, tokens, [0.99])[0]) * 1e3
        mx = float(gaps.max()) * 1e3
    tpot = rec.tpot_s
    return {
        "ttft_ms": None if rec.ttft_s is None else rec.ttft_s * 1e3,
        "tpot_ms": None if tpot is None else tpot * 1e3,
        "e2e_ms": None if rec.e2e_s is None else rec.e2e_s * 1e3,
        "itl_per_token_p99_ms": p99,
        "itl_per_token_max_ms": mx,
    }


#: bounds that a request without the quantity fails (no token delivered) rather than passes
_REQUIRED: frozenset[SloKey] = frozenset({"ttft_ms", "e2e_ms"})


def missed_bounds(rec: RequestRecord, slo: SLO) -> list[SloKey] | None:
    """The bounds a completed request misses ([] = good); None for a failed request."""
    if not rec.ok:
        return None
    values = request_latencies_ms(rec)
    out: list[SloKey] = []
    for key, bound in slo.bounds_ms.items():
        v = values[key]
        if (v is None and key in _REQUIRED) or (v is not None and v > bound):
            out.append(key)
    return out


class Goodput(Frozen):
    """Goodput of one level under an SLO."""

    requests: int = Field(description="measured requests (completed + failed, warm-up excluded)")
    good: int = Field(description="requests that completed within every bound")
    attainment: float | None = Field(description="good ÷ requests")
    meets_slo: bool = Field(description="attainment ≥ the SLO's attainment target")
    good_requests_per_s: float = Field(description="good ÷ the level's duration")
    good_output_tokens_per_s: float = Field(
        description="output tokens of good requests ÷ the level's duration"
    )
    missed: dict[str, int] = Field(
        description="completed requests that missed each bound (a request may miss several)"
    )


def goodput_of(records: Iterable[RequestRecord], slo: SLO, duration_s: float) -> Goodput:
    """Goodput of the non-warm-up ``records`` over ``duration_s`` (the level's Stats duration)."""
    recs = [r for r in records if not r.warmup]
    good = good_tokens = 0
    missed = dict.fromkeys(slo.bounds_ms, 0)
    for r in recs:
        miss = missed_bounds(r, slo)
        if miss is None:
            continue
        for key in miss:
            missed[key] += 1
        if not miss:
            good += 1
            good_tokens += r.output_tokens or 0
    attainment = good / len(recs) if recs else None
    return Goodput(
        requests=len(recs),
        good=good,
        attainment=attainment,
        meets_slo=attainment is not None and attainment >= slo.attainment,
        good_requests_per_s=good / duration_s if duration_s > 0 else 0.0,
        good_output_tokens_per_s=good_tokens / duration_s if duration_s > 0 else 0.0,
        missed={str(k): v for k, v in missed.items()},
    )
