"""The twin's HTTP surface: OpenAI shapes, errors, auth, metrics, classes, disconnects."""

from __future__ import annotations

import asyncio
import json
import time

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from alphagate.core.traffic import TrafficClass
from alphagate.specs import DeploymentConfig, WorkloadConfig
from alphagate.twin.config import TwinConfig
from tests.servers import twin

FAST = TwinConfig(
    deployment=DeploymentConfig(model="llama-3.1-8b", weight_dtype="bf16"), k=3, time_scale=0.0
)


async def _post(
    url: str,
    path: str,
    body: object,
    headers: dict[str, str] | None = None,
    raw: bytes | None = None,
) -> tuple[int, str]:
    async with aiohttp.ClientSession() as s:
        kw = {"data": raw} if raw is not None else {"json": body}
        async with s.post(url + path, headers=headers or {}, **kw) as r:  # type: ignore[arg-type]
            return r.status, await r.text()


def _run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


def test_streaming_completion_chunks_usage_and_done() -> None:
    with twin(FAST) as (url, _):
        status, text = _run(
            _post(
                url,
                "/v1/completions",
                {
                    "prompt": "one two three",
                    "max_tokens": 20,
                    "stream": True,
                    "stream_options": {"include_usage": True, "continuous_usage_stats": True},
                },
            )
        )
    assert status == 200
    events = [line[6:] for line in text.split("\n") if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    objs = [json.loads(e) for e in events[:-1]]
    usage = objs[-1]["usage"]
    assert objs[-1]["choices"] == [] and usage == {
        "prompt_tokens": 3,
        "completion_tokens": 20,
        "total_tokens": 23,
    }
    cum = [o["usage"]["completion_tokens"] for o in objs[:-1]]
    assert cum == sorted(cum) and cum[-1] == 20
    per_chunk = [b - a for a, b in zip([0, *cum], cum, strict=False)]
    assert max(per_chunk) <= 4 and sum(per_chunk) == 20  # 1..K+1 tokens per chunk
    assert any(n > 1 for n in per_chunk)
    assert objs[-2]["choices"][0]["finish_reason"] == "length"


def test_chat_non_streaming_and_models_and_health() -> None:
    async def go(url: str) -> None:
        async with aiohttp.ClientSession() as s:
            async with s.post(
                url + "/v1/chat/completions",
                json={"messages": [{"role": "user", "content": "hi there"}], "max_tokens": 7},
            ) as r:
                body = await r.json()
                assert body["object"] == "chat.completion"
                assert body["choices"][0]["message"]["role"] == "assistant"
                assert body["usage"]["completion_tokens"] == 7
            async with s.get(url + "/v1/models") as r:
                assert (await r.json())["data"][0]["id"] == "alphagate-twin"
            async with s.get(url + "/health") as r:
                assert r.status == 200

    with twin(FAST) as (url, _):
        _run(go(url))


@pytest.mark.parametrize(
    ("body", "raw", "param"),
    [
        (None, b"{not json", None),
        ({"prompt": "x", "max_tokens": 0}, None, "max_tokens"),
        ({"prompt": "x", "max_tokens": "ten"}, None, "max_tokens"),
        ({"prompt": "x", "stream": "yes"}, None, "stream"),
        ({"prompt": "x", "temperature": "hot"}, None, "temperature"),
        ({"max_tokens": 5}, None, "prompt"),
    ],
)
def test_bad_requests_get_openai_style_400(
    body: object, raw: bytes | None, param: str | None
) -> None:
    with twin(FAST) as (url, _):
        status, text = _run(
            _post(
                url, "/v1/completions", body, raw=raw, headers={"Content-Type": "application/json"}
            )
        )
    assert status == 400
    err = json.loads(text)["error"]
    assert err["type"] == "BadRequestError" and err["code"] == 400 and err["param"] == param
    if body == {"prompt": "x", "max_tokens": 0}:
        assert err["message"].startswith(
            "max_tokens must be at least 1, got 0."
        )  # vLLM 0.32's words


def test_api_key_and_unknown_model() -> None:
    cfg = FAST.model_copy(update={"api_key": "s3cret"})
    with twin(cfg) as (url, _):
        assert _run(_post(url, "/v1/completions", {"prompt": "x"}))[0] == 401
        assert (
            _run(_post(url, "/v1/completions", {"prompt": "x"}, {"Authorization": "Bearer wrong"}))[
                0
            ]
            == 401
        )
        ok, _ = _run(
            _post(
                url,
                "/v1/completions",
                {"prompt": "x", "max_tokens": 2},
                {"Authorization": "Bearer s3cret"},
            )
        )
        assert ok == 200
        missing, text = _run(
            _post(
                url,
                "/v1/completions",
                {"prompt": "x", "model": "gpt-9"},
                {"Authorization": "Bearer s3cret"},
            )
        )
        assert missing == 404 and "gpt-9" in text


def _metric_names(text: str) -> set[str]:
    return {s.name for fam in text_string_to_metric_families(text) for s in fam.samples}


def test_spec_metrics_only_when_speculating_and_classes() -> None:
    async def scrape(url: str) -> str:
        async with aiohttp.ClientSession() as s, s.get(url + "/metrics") as r:
            return await r.text()

    base = FAST.model_copy(update={"k": 0})
    with twin(base) as (url, _):
        _run(_post(url, "/v1/completions", {"prompt": "x", "max_tokens": 5}))
        names = _metric_names(_run(scrape(url)))
    assert "vllm:generation_tokens_total" in names
    assert not any(n.startswith("vllm:spec_decode") for n in names)

    cfg = FAST.model_copy(
        update={
            "workload": WorkloadConfig(
                classes=(
                    TrafficClass(name="chat", share=0.5, alpha=1.0),
                    TrafficClass(name="code", share=0.5, alpha=0.0),
                )
            )
        }
    )
    with twin(cfg) as (url, engine):
        _run(
            _post(
                url,
                "/v1/completions",
                {"prompt": "x", "max_tokens": 41, "alphagate_class": "chat", "ignore_eos": True},
            )
        )
        text = _run(scrape(url))
        fams = {f.name: f for f in text_string_to_metric_families(text)}
        drafts = fams["vllm:spec_decode_num_drafts"].samples[0].value
        accepted = fams["vllm:spec_decode_num_accepted_tokens"].samples[0].value
        assert accepted == 3 * drafts  # α = 1: every draft accepted
        labels = fams["vllm:spec_decode_num_accepted_tokens_per_pos"].samples[0].labels
        assert set(labels) == {"model_name", "engine", "position"}
        engine.reset_metrics()
        _run(
            _post(
                url,
                "/v1/completions",
                {
                    "prompt": "x",
                    "max_tokens": 10,
                    "model": "alphagate-twin:code",
                    "ignore_eos": True,
                },
            )
        )
        fams = {f.name: f for f in text_string_to_metric_families(_run(scrape(url)))}
        assert (
            fams["vllm:spec_decode_num_accepted_tokens"].samples[0].value == 0
        )  # α = 0 via the model-name suffix


def test_disconnect_frees_the_slot() -> None:
    cfg = FAST.model_copy(update={"time_scale": 1.0})

    async def go(url: str, engine) -> None:  # type: ignore[no-untyped-def]
        async with aiohttp.ClientSession() as s:
            resp = await s.post(
                url + "/v1/completions",
                json={"prompt": "x", "max_tokens": 3000, "stream": True, "ignore_eos": True},
            )
            await resp.content.readline()
            assert engine.n_running == 1
            resp.close()
        deadline = time.monotonic() + 5
        while engine.n_running and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        assert engine.n_running == 0

    with twin(cfg) as (url, engine):
        asyncio.run(go(url, engine))
