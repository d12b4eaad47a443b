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
        await _until_idle(engine)

    with twin(cfg) as (url, engine):
        asyncio.run(go(url, engine))


async def _until_idle(engine) -> None:  # type: ignore[no-untyped-def]
    """Wait until the twin runs no request (a minute at most: a guard against a hang, which a
    loaded machine never comes near)."""
    deadline = time.monotonic() + 60
    while engine.n_running and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert engine.n_running == 0


def test_an_abandoned_request_stops_generating() -> None:
    """A non-streaming client that hangs up: its request is cancelled, not served to the end."""
    cfg = FAST.model_copy(
        update={
            "time_scale": 1.0,
            "deployment": FAST.deployment.model_copy(update={"max_num_seqs": 4}),
        }
    )

    async def go(url: str, engine) -> None:  # type: ignore[no-untyped-def]
        async with aiohttp.ClientSession() as s:
            tasks = [
                asyncio.create_task(
                    s.post(
                        url + "/v1/completions",
                        json={"prompt": "x", "max_tokens": 3000, "ignore_eos": True},
                    )
                )
                for _ in range(4)
            ]
            admitted = time.monotonic() + 60  # a guard against a hang, not a speed
            while engine.n_running < 4 and time.monotonic() < admitted:
                await asyncio.sleep(0.02)
            assert engine.n_running == 4
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        await _until_idle(engine)
        generated = engine.metrics.generation_tokens._value.get()
        assert generated < 4 * 3000
        # the next client is served at once, not after 4 × 3,000 abandoned tokens: the engine
        # generates its two tokens and nothing else
        async with aiohttp.ClientSession() as s:
            await _post_json(s, url, {"prompt": "x", "max_tokens": 2})
        assert engine.metrics.generation_tokens._value.get() == generated + 2

    with twin(cfg) as (url, engine):
        asyncio.run(go(url, engine))


async def _post_json(s: aiohttp.ClientSession, url: str, body: object) -> object:
    async with s.post(url + "/v1/completions", json=body) as r:
        return await r.json()


def test_unfinished_requests_time_out() -> None:
    import socket

    cfg = FAST.model_copy(update={"request_timeout_s": 1.0})
    with twin(cfg) as (url, _):
        host, port = url.split("//")[1].split(":")
        # headers that never end: the connection is closed
        with socket.create_connection((host, int(port))) as sock:
            sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Len")
            # closed by the server's timeout (1 s), not refused at once; the socket's own 60 s
            # timeout only guards against a hang
            sock.settimeout(60)
            t0 = time.monotonic()
            assert sock.recv(100) == b""
            assert time.monotonic() - t0 >= 0.5
        # a body that never ends: 408
        with socket.create_connection((host, int(port))) as sock:
            sock.sendall(
                b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b'Content-Length: 100\r\n\r\n{"prompt"'
            )
            sock.settimeout(10)
            head = sock.recv(200)
            assert head.startswith(b"HTTP/1.1 408")


def test_seeds_and_deep_nesting_are_answered_never_with_a_500() -> None:
    """vLLM takes any signed 64-bit seed (-1 included: the same reply each time, as any seed);
    outside it, or a body nested past MAX_JSON_DEPTH, is a 400 — not the 500 of a traceback."""
    from alphagate.twin.server import MAX_JSON_DEPTH

    deep = b'{"prompt": "x", "a": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    shallow = b'{"prompt": "x", "max_tokens": 2, "a": ' + b"[" * 60 + b"]" * 60 + b"}"
    in_text = json.dumps({"prompt": "[" * 5000, "max_tokens": 2}).encode()

    async def go(url: str) -> list[tuple[int, str]]:
        out = []
        for seed in (-1, -(2**63), 2**63 - 1, 2**63, "7"):
            out.append(
                await _post(url, "/v1/completions", {"prompt": "x", "max_tokens": 3, "seed": seed})
            )
        for raw in (deep, shallow, in_text):
            out.append(await _post(url, "/v1/completions", None, raw=raw))
        return out

    with twin(FAST) as (url, _):
        (neg, lo, hi, above, text, deep_r, shallow_r, in_text_r) = _run(go(url))
        again = _run(_post(url, "/v1/completions", {"prompt": "x", "max_tokens": 3, "seed": -1}))
    assert neg[0] == lo[0] == hi[0] == 200
    assert json.loads(neg[1])["choices"][0]["text"] == json.loads(again[1])["choices"][0]["text"]
    assert above[0] == 400 and json.loads(above[1])["error"]["param"] == "seed"
    assert text[0] == 400
    assert (
        deep_r[0] == 400
        and f"deeper than {MAX_JSON_DEPTH}" in json.loads(deep_r[1])["error"]["message"]
    )
    assert shallow_r[0] == 200 and in_text_r[0] == 200  # brackets inside a string are text


def test_a_served_name_with_a_colon_is_refused() -> None:
    """``NAME:CLASS`` picks a request's class; a served name with ':' would make every request
    of that name a class lookup (and ``twin --served-model-name a:b`` never what was meant)."""
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="separates a traffic class"):
        TwinConfig(served_model_name="a:b")
    assert TwinConfig(served_model_name="a-b.c_d").served_model_name == "a-b.c_d"
