"""The twin's /metrics are the events of its streams, and its steps are priced as speculative
steps: counters checked request by request against what each stream delivered."""

from __future__ import annotations

import asyncio
import json

import aiohttp
import numpy as np
import pytest

from alphagate.core.traffic import TrafficClass
from alphagate.measure.prom import SpecCounters, parse_spec_counters
from alphagate.specs import DeploymentConfig, WorkloadConfig
from alphagate.twin.config import TwinConfig
from tests.servers import twin

K = 3
CFG = TwinConfig(
    deployment=DeploymentConfig(model="llama-3.1-8b", weight_dtype="bf16"),
    workload=WorkloadConfig(classes=(TrafficClass(name="a", share=1.0, alpha=0.6),)),
    k=K,
    time_scale=0.0,
    seed=11,
)


async def _stream_tokens(s: aiohttp.ClientSession, url: str, max_tokens: int) -> list[int]:
    """Tokens per content chunk, from continuous usage."""
    body = {
        "prompt": "a b c d",
        "max_tokens": max_tokens,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }
    cum: list[int] = []
    async with s.post(url + "/v1/completions", json=body) as r:
        async for line in r.content:
            text = line.decode().strip()
            if text.startswith("data: {"):
                obj = json.loads(text[6:])
                if obj["choices"]:
                    cum.append(obj["usage"]["completion_tokens"])
    return [b - a for a, b in zip([0, *cum], cum, strict=False)]


async def _counters(s: aiohttp.ClientSession, url: str) -> SpecCounters:
    async with s.get(url + "/metrics") as r:
        return parse_spec_counters(await r.text())


def test_counters_equal_the_events_in_the_streams() -> None:
    """Per request: drafts = decode chunks; accepted = Σ (tokens − 1) over decode chunks, except the
    last chunk, which max_tokens may cut (accepted drafts are counted before the cut, as in vLLM);
    position i's counter = decode chunks that carried more than i + 1 tokens, likewise."""

    async def go(url: str) -> int:
        checked = 0
        async with aiohttp.ClientSession() as s:
            before = await _counters(s, url)
            for n in (60, 37, 81, 50, 73, 44, 90, 58, 66, 35, 77, 49):
                chunks = await _stream_tokens(s, url, n)
                after = await _counters(s, url)
                assert sum(chunks) == n and chunks[0] == 1  # the first token comes from prefill
                decode = np.asarray(chunks[1:])
                assert after.drafts - before.drafts == decode.size
                assert after.draft_tokens - before.draft_tokens == K * decode.size
                seen = int((decode[:-1] - 1).sum())  # whole chunks: exact
                last = int(decode[-1] - 1)  # the last chunk: at least what it shows
                got = int(after.accepted - before.accepted)
                assert seen + last <= got <= seen + K, (chunks, got)
                for i in range(K):
                    whole = int((decode[:-1] - 1 > i).sum())
                    d = int(after.per_pos.get(i, 0) - before.per_pos.get(i, 0))
                    assert whole + int(last > i) <= d <= whole + 1, (i, chunks, d)
                before = after
                checked += decode.size
        return checked

    with twin(CFG) as (url, _):
        decode_chunks = asyncio.run(go(url))
    assert decode_chunks > 200  # a strictly-between-0-and-1 α over hundreds of steps


def test_a_speculative_step_costs_drafts_and_verify() -> None:
    """One sequence at a time: the speculative twin's decode step costs K draft forwards plus a
    verify over K + 1 tokens more than the baseline twin's plain decode step."""

    async def one(url: str) -> None:
        async with aiohttp.ClientSession() as s:
            await _stream_tokens(s, url, 64)

    steps = {}
    for k in (0, K):
        with twin(CFG.model_copy(update={"k": k})) as (url, engine):
            asyncio.run(one(url))
            decode = [st for st in engine.steps if st.n_decode == 1 and st.prefill_tokens == 0]
            steps[k] = float(np.mean([st.model_dt_s for st in decode]))
            cost = engine.cost
    ctx = 4 + 32.0  # the mean context of a 64-token reply to a 4-token prompt
    assert cost.draft is not None
    extra = float(cost.step_time(k=K, n_decode=1, ctx_decode=ctx)) - float(
        cost.step_time(k=0, n_decode=1, ctx_decode=ctx)
    )
    assert extra > 0
    assert steps[K] - steps[0] == pytest.approx(extra, rel=0.05)
