"""Request records built by hand for the tests of what reads them (summaries, SLOs, validity,
intervals, renderers): one streamed request from its chunk times, the other fields named."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from alphagate.bench.records import RequestRecord


def streamed(
    times: Sequence[float], tokens: Sequence[int] | None = None, **fields: Any
) -> RequestRecord:
    """A request whose chunks arrived ``times`` seconds after it was sent, carrying ``tokens``
    each (one by default): its TTFT is the first time, its end-to-end latency the last, its output
    the tokens' sum (none for a request that failed, ``error_type`` given). Any other field by
    keyword; by default run "r", request 0, target "candidate", level "c1", no class, 8 prompt
    tokens, sent at 0, token counts from ``usage``."""
    tokens = [1] * len(times) if tokens is None else list(tokens)
    failed = fields.get("error_type") is not None
    base: dict[str, Any] = {
        "run_id": "r",
        "id": 0,
        "target": "candidate",
        "level": "c1",
        "cls": None,
        "prompt_tokens": 8,
        "output_tokens": None if failed else sum(tokens),
        "send_s": 0.0,
        "ttft_s": times[0] if times else None,
        "chunk_times_s": list(times),
        "chunk_tokens": tokens,
        "tokens_per_chunk_source": "usage" if times else "none",
        "e2e_s": times[-1] if times else None,
    }
    return RequestRecord(**{**base, **fields})
