"""Property-based fuzzing of what a user or a server can produce. The only invariant: the exit code
is 0, 1, 2 or 130, no traceback is printed, and every line of requests.jsonl is valid JSON.

Bounded example counts keep it inside ``make test``; raise ``ALPHAGATE_FUZZ_EXAMPLES`` to go
further.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from aiohttp import web
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from alphagate.specs import DeploymentConfig
from alphagate.twin.config import TwinConfig
from tests.conftest import Cli
from tests.servers import serve, twin

EXAMPLES = int(os.environ.get("ALPHAGATE_FUZZ_EXAMPLES", "40"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
EXIT_CODES = {0, 1, 2, 130}

NASTY = [
    "",
    " ",
    "-1",
    "0",
    "1",
    "2",
    "0.5",
    "1.5",
    "nan",
    "NaN",
    "inf",
    "-inf",
    "1e308",
    "1e-320",
    "99999999999999999999",
    "abc",
    "α",
    "1,2",
    "0.4,0.7",
    ",",
    "a:b",
    "chat:0.5:0.7",
    "chat:1:0.7",
    "chat:1",
    "chat:1:0.8,0.7",
    "x:1:2",
    "fixed:0",
    "fixed:16",
    "uniform:5:1",
    "lognormal:inf",
    "lognormal:512:-1",
    "file:/nonexistent",
    "file:/proc",
    "/dev/null",
    "/proc/x",
    "-",
    "--",
    "llama-3.1-8b",
    "h100",
    "eagle3",
    "ngram",
    "bf16",
    "fp8",
    "0.11",
    "v0.32.1",
    "banana",
]
VALUES = st.sampled_from(NASTY) | st.text(max_size=12)

MODEL_FLAGS = {
    "speedup": ["--alpha", "--k", "--draft-cost", "--verify-cost"],
    "breakeven": ["--k", "--draft-cost", "--verify-cost"],
    "required": ["--speedup", "--k", "--draft-cost", "--verify-cost"],
    "optimal-k": ["--alpha", "--draft-cost", "--verify-cost", "--k-max"],
    "blend": ["--class", "--k", "--draft-cost", "--verify-cost"],
    "convert": ["--k", "--alpha", "--rho", "--tau"],
    "memory": ["--target", "--draft", "--dtype", "--kv-dtype", "--draft-vocab-size"],
    "table": ["--alphas", "--ks", "--draft-cost", "--verify-cost"],
}
SIM_FLAGS = [
    "--alpha",
    "--k",
    "--class",
    "--prompt-len",
    "--output-len",
    "--burstiness",
    "--think-time",
    "--disable-above-batch",
    "--seed",
    "--dtype",
    "--tp",
    "--gpu",
    "--method",
    "--max-num-batched-tokens",
    "--step-overhead-ms",
]
PLAN_FLAGS = [
    "--class",
    "--peak-concurrency",
    "--engine",
    "--engine-version",
    "--k",
    "--dtype",
    "--method",
    "--slo-p99-itl-ms",
    "--output-len",
    "--prompt-len",
    "--seed",
]


def _check(result: Any) -> None:
    assert result.exit_code in EXIT_CODES, (result.exit_code, result.output)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    assert "Traceback" not in result.output


def _flags(names: list[str]) -> st.SearchStrategy[list[str]]:
    pair = st.tuples(st.sampled_from(names), VALUES).map(list)
    return st.lists(pair, max_size=4).map(lambda ps: [x for p in ps for x in p])


@FUZZ
@given(
    st.sampled_from(sorted(MODEL_FLAGS)).flatmap(
        lambda c: st.tuples(st.just(c), _flags(MODEL_FLAGS[c]))
    ),
    st.booleans(),
)
def test_model_flags(cmd_args: tuple[str, list[str]], as_json: bool) -> None:
    cmd, args = cmd_args
    r = Cli().run("model", cmd, *args, *(["--json"] if as_json else []))
    _check(r)
    if as_json and r.stdout.strip():
        json.loads(r.stdout, parse_constant=_no_nan)


def _no_nan(x: str) -> float:
    raise AssertionError(f"--json printed {x}")


@settings(FUZZ, max_examples=max(10, EXAMPLES // 2))
@given(_flags(SIM_FLAGS))
def test_simulate_flags(args: list[str]) -> None:
    # a small load, so that a valid draw finishes quickly
    base = [
        "--concurrency",
        "2",
        "--num-requests",
        "100",
        "--no-breakeven-sim",
        "--model",
        "llama-3.1-8b",
    ]
    _check(Cli().run("simulate", *base, *args, "--json"))


@settings(FUZZ, max_examples=max(8, EXAMPLES // 4))
@given(_flags(PLAN_FLAGS))
def test_plan_flags(args: list[str]) -> None:
    base = ["--class", "chat:1:0.7", "--concurrency", "4", "--model", "llama-3.1-8b"]
    _check(Cli().run("plan", *base, *args, "--json"))


# ---------------------------------------------------------------- datasets and server replies
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 2**40) | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)
FIELDS = st.fixed_dictionaries(
    {},
    optional={
        "prompt": JSON,
        "messages": JSON | st.just([{"role": "user", "content": "hi"}]),
        "max_tokens": JSON | st.integers(-3, 40),
        "class": JSON,
    },
)
LINES = st.lists(st.one_of(FIELDS.map(json.dumps), st.text(max_size=20)), min_size=1, max_size=6)


@contextmanager
def _fast_twin() -> Iterator[str]:
    cfg = TwinConfig(
        deployment=DeploymentConfig(model="llama-3.1-8b", weight_dtype="bf16"), k=2, time_scale=0.0
    )
    with twin(cfg) as (url, _):
        yield url


def _records_valid(out: Path) -> None:
    f = out / "requests.jsonl"
    if f.exists():
        for line in f.read_text().splitlines():
            json.loads(line)


def test_dataset_lines() -> None:
    with _fast_twin() as url:

        @FUZZ
        @given(LINES, st.sampled_from(["completions", "chat"]))
        def run(lines: list[str], endpoint: str) -> None:
            with tempfile.TemporaryDirectory() as tmp:
                data = Path(tmp) / "d.jsonl"
                data.write_text("\n".join(lines) + "\n")
                out = Path(tmp) / "o"
                r = Cli().run(
                    "bench",
                    "--url",
                    url,
                    "--endpoint",
                    endpoint,
                    "--dataset",
                    str(data),
                    "-n",
                    "3",
                    "--out",
                    str(out),
                    "--json",
                )
                _check(r)
                _records_valid(out)

        run()


CHOICE = st.fixed_dictionaries(
    {},
    optional={
        "text": JSON,
        "delta": JSON | st.fixed_dictionaries({"content": JSON}),
        "finish_reason": JSON,
    },
)
CHUNK = st.fixed_dictionaries(
    {},
    optional={
        "choices": JSON | st.lists(CHOICE | JSON, max_size=2),
        "usage": JSON
        | st.fixed_dictionaries({}, optional={"completion_tokens": JSON, "prompt_tokens": JSON}),
        "error": JSON,
    },
)
PAYLOAD = st.one_of(
    CHUNK.map(lambda d: json.dumps(d).encode()), st.binary(max_size=30), st.just(b"[DONE]")
)


def _replaying_server(holder: dict[str, Any]) -> web.Application:
    async def completions(request: web.Request) -> web.StreamResponse:
        await request.read()
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for p in holder["payloads"]:
            await resp.write(b"data: " + p + holder["sep"])
        if holder["done"]:
            await resp.write(b"data: [DONE]\n\n")
        return resp

    async def models(request: web.Request) -> web.Response:
        return web.json_response(holder["models"])

    app = web.Application()
    app.router.add_post("/v1/completions", completions)
    app.router.add_get("/v1/models", models)
    return app


def test_server_replies() -> None:
    holder: dict[str, Any] = {}
    with serve(_replaying_server(holder)) as url:

        @FUZZ
        @given(
            st.lists(PAYLOAD, max_size=5),
            st.sampled_from([b"\n\n", b"\r\n\r\n", b"\n", b"\r\r"]),
            st.booleans(),
            JSON,
        )
        def run(payloads: list[bytes], sep: bytes, done: bool, models: Any) -> None:
            holder.update(payloads=payloads, sep=sep, done=done, models=models)
            with tempfile.TemporaryDirectory() as tmp:
                out = Path(tmp) / "o"
                r = Cli().run(
                    "bench",
                    "--url",
                    url,
                    "-n",
                    "2",
                    "--no-metrics",
                    "--timeout",
                    "2",
                    "--dataset",
                    "synthetic:in=2,out=2",
                    "--out",
                    str(out),
                    "--json",
                )
                _check(r)
                _records_valid(out)

        run()
