"""Property-based fuzzing of what a user or a server can produce. The only invariant: the exit code
is one the verb documents (0, 1, 2, 3 or 130), no traceback is printed, and every line of
requests.jsonl is valid JSON; the twin answers any body with 200, 400, 401, 404 or 408, never a
500; a ``measure offline`` checkpoint is resumed or refused (exit 2), never a crash.

Bounded example counts keep it inside ``make test``; raise ``ALPHAGATE_FUZZ_EXAMPLES`` to go
further. Examples per test at the default (40): model flags 40, simulate 20, plan 10, dataset
lines 40, server replies 40, measure logs 40, offline checkpoints 40, report inputs 20, twin
bodies 40 (each posted to completions and to chat: 80 requests).
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import warnings
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


def _check(result: Any, codes: set[int] = EXIT_CODES) -> None:
    assert result.exit_code in codes, (result.exit_code, result.output)
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


# ---------------------------------------------------------------- measure logs
def _spec_line(
    when: str, pid: str, tau: str, acc: int, dr: int, rates: list[str], rate: str
) -> str:
    return (
        f"(APIServer pid={pid}) INFO {when} [metrics.py:120] SpecDecoding metrics: Mean "
        f"acceptance length: {tau}, Accepted throughput: 1.00 tokens/s, Drafted throughput: 1.00 "
        f"tokens/s, Accepted: {acc} tokens, Drafted: {dr} tokens, Per-position acceptance rate: "
        f"{', '.join(rates)}, Avg Draft acceptance rate: {rate}%"
    )


WHEN = st.sampled_from(
    [
        "11-30 13:37:02",
        "11-30 13:37:04",
        "12-31 23:59:59",
        "02-29 00:00:00",
        "13-45 99:99:99",
        "00-00 00:00:00",
        "1.-30 13:37:02",
        "11-30 13:37:0",
    ]
) | st.from_regex(r"\d\d-\d\d \d\d:\d\d:\d\d", fullmatch=True)
NUMBER = st.sampled_from(["0", "1", "0.5", "1.50", "nan", "1.2.3", "9" * 30, "-1", ""])
SPEC_LINE = st.builds(
    _spec_line,
    WHEN,
    st.sampled_from(["1", "2", "12772"]),
    NUMBER | st.floats(0, 9).map(lambda x: f"{x:.2f}"),
    st.integers(0, 10**12),
    st.integers(0, 10**12),
    st.lists(NUMBER | st.floats(0, 1).map(lambda x: f"{x:.3f}"), max_size=5),
    NUMBER,
)
LOG_LINE = st.one_of(
    SPEC_LINE,
    SPEC_LINE.flatmap(lambda x: st.integers(0, len(x)).map(lambda i: x[:i])),  # cut
    st.just("(APIServer pid=1) INFO 11-30 13:37:12 [api_utils.py:347] started"),
    st.builds(
        lambda n, ct: json.dumps(
            {"text": "x", "meta_info": {"completion_tokens": n, "spec_verify_ct": ct}}
        ),
        JSON,
        JSON,
    ),
    st.builds(
        lambda x: f"[2025-11-30 13:37:02] Decode batch. #running-req: 1, accept len: {x}", NUMBER
    ),
    st.text(max_size=40),
)


@FUZZ
@given(
    st.lists(LOG_LINE, max_size=8),
    st.sampled_from([[], ["--since", "11-30 13:37:03"], ["--last", "1s"], ["--k", "3"]]),
    st.booleans(),
)
def test_measure_logs_lines(lines: list[str], flags: list[str], twice: bool) -> None:
    """Random log lines (whole, cut, with times that are no date, repeated; SGLang's; noise):
    measure logs measures (0), refuses (2) or has not seen enough (3)."""
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "v.log"
        log.write_text("\n".join(lines) + "\n", encoding="utf-8", errors="surrogatepass")
        files = [str(log), str(log)] if twice else [str(log)]
        r = Cli().run("measure", "logs", *files, *flags, "--json")
        _check(r, {0, 2, 3})
        if r.exit_code == 0:
            d = json.loads(r.stdout, parse_constant=_no_nan)
            assert d["verb"] == "measure logs" and d["overall"] is not None


# ---------------------------------------------------------------- measure offline checkpoints
def test_offline_checkpoints(tiny: Any, tmp_path: Path) -> None:
    """A checkpoint of any content — the head of this run, another's, none; whole lines, lines
    cut anywhere, lines mutated, random JSON, random bytes — is resumed (the same numbers as a
    run without it where it held only this run's whole lines) or refused with exit 2."""
    import pytest

    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from alphagate.measure.offline.config import OfflineConfig
    from alphagate.measure.offline.run import measure_offline
    from alphagate.measure.offline.score import load
    from alphagate.measure.results import MeasureError
    from tests.measure.offline.fixtures import greedy_log

    log = tmp_path / "log.jsonl"
    greedy_log(tiny, log, ["def f(x):\n    ", "((((((((", "Dear reader,"], 12, ["a", "b", "a"])
    base = OfflineConfig(
        logs=(log,), target=str(tiny.target), drafter="ngram", k=3, k_max=4, resamples=20
    )
    models = load(base)
    ck0 = tmp_path / "ck0.jsonl"
    full = measure_offline(base.model_copy(update={"checkpoint": ck0}), models=models)
    whole = ck0.read_bytes().split(b"\n")[:-1]
    other = base.model_copy(update={"k": 2}).fingerprint()
    heads = [whole[0], json.dumps({"fingerprint": other}).encode(), b"[]", b"", b"\xff"]

    def mutate(line: bytes, data: st.DataObject) -> bytes:
        kind = data.draw(st.sampled_from(["cut", "value", "same"]))
        if kind == "cut":
            return line[: data.draw(st.integers(0, len(line)))]
        if kind == "value":
            obj = json.loads(line)
            key = data.draw(st.sampled_from(sorted(obj)))
            obj[key] = data.draw(JSON)
            return json.dumps(obj).encode()
        return line

    @FUZZ
    @given(
        st.sampled_from(heads),
        st.lists(
            st.one_of(
                st.sampled_from(whole[1:]).map(lambda x: ("line", x)),
                st.just(("mutate", b"")),
                JSON.map(lambda x: ("raw", json.dumps(x).encode())),
                st.binary(max_size=20).map(lambda x: ("raw", x)),
            ),
            max_size=6,
        ),
        st.booleans(),
        st.data(),
    )
    def run(head: bytes, body: list[tuple[str, bytes]], newline: bool, data: st.DataObject) -> None:
        parts = [head]
        for kind, x in body:
            parts.append(
                mutate(data.draw(st.sampled_from(whole[1:])), data) if kind == "mutate" else x
            )
        with tempfile.TemporaryDirectory() as tmp:
            ck = Path(tmp) / "ck.jsonl"
            content = b"\n".join(parts) + (b"\n" if newline else b"")
            ck.write_bytes(content)
            cfg = base.model_copy(update={"checkpoint": ck})
            try:
                result = measure_offline(cfg, models=models)
            except MeasureError as exc:
                assert exc.exit_code == 2 and str(ck) in str(exc)
                assert ck.read_bytes() == content  # a refused checkpoint is left as it was
                return
            assert result.overall is not None
            after = ck.read_bytes()
            assert after.endswith(b"\n") and after.split(b"\n")[0] in (whole[0], b"")
            if all(kind == "line" for kind, _ in body) and head == whole[0]:
                assert result.overall == full.overall

    run()


# ---------------------------------------------------------------- report inputs
def _results_files(root: Path) -> dict[str, Path]:
    """A closed form, a table and a bench summary with its requests.jsonl."""
    cli = Cli()
    files = {}
    for name, args in (
        ("speedup", ["model", "speedup", "--alpha", "0.7", "--k", "3"]),
        ("table", ["model", "table", "--alphas", "0.5,0.7", "--ks", "1,3"]),
    ):
        r = cli.run(*args, "--json")
        assert r.exit_code == 0, r.output
        files[name] = root / f"{name}.json"
        files[name].write_text(r.stdout)
    with _fast_twin() as url:
        r = cli.run(
            "bench", "--url", url, "-n", "4", "--dataset", "synthetic:in=4,out=4",
            "--out", str(root / "bench"), "--json",
        )  # fmt: skip
    assert r.exit_code == 0, r.output
    files["bench"] = root / "bench" / "summary.json"
    return files


def _mutated(data: Any, draw: Any) -> Any:
    """``data`` with one value somewhere replaced by random JSON."""
    if isinstance(data, dict) and data and draw(st.booleans()):
        key = draw(st.sampled_from(sorted(data)))
        return {**data, key: _mutated(data[key], draw)}
    if isinstance(data, list) and data and draw(st.booleans()):
        i = draw(st.integers(0, len(data) - 1))
        return [*data[:i], _mutated(data[i], draw), *data[i + 1 :]]
    return draw(JSON)


def test_report_inputs(tmp_path: Path) -> None:
    """Results files cut anywhere, with a value replaced anywhere, or random text — and a bench
    summary's requests.jsonl likewise: report renders (0) or refuses naming the file (2)."""
    files = _results_files(tmp_path)
    texts = {k: p.read_text() for k, p in files.items()}
    records = (files["bench"].parent / "requests.jsonl").read_text()

    @settings(FUZZ, max_examples=max(10, EXAMPLES // 2))
    @given(
        st.sampled_from(sorted(files)),
        st.sampled_from(["cut", "value", "text", "records", "same"]),
        st.booleans(),
        st.data(),
    )
    def run(name: str, how: str, partial: bool, data: st.DataObject) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            text, recs = texts[name], records
            if how == "cut":
                text = text[: data.draw(st.integers(0, len(text)))]
            elif how == "value":
                text = json.dumps(_mutated(json.loads(text), data.draw))
            elif how == "text":
                text = data.draw(st.text(max_size=60))
            elif how == "records":
                recs = recs[: data.draw(st.integers(0, len(recs)))] + data.draw(
                    st.text(max_size=20)
                )
            path = folder / f"{name}.json"
            path.write_text(text, encoding="utf-8", errors="surrogatepass")
            (folder / "requests.jsonl").write_text(recs, encoding="utf-8", errors="surrogatepass")
            args = [str(path), "--out", str(folder / "r.html"), "--json"]
            with warnings.catch_warnings():
                # ITLs that are all 0 (chunks of one network read) must not reach a log axis
                warnings.filterwarnings("error", "Data has no positive values", UserWarning)
                r = Cli().run("report", *args, *(["--partial"] if partial else []))
            _check(r, {0, 2})

    run()


# ---------------------------------------------------------------- the twin's request bodies
BODY_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "prompt": st.text(max_size=20) | st.lists(st.integers(-(2**70), 2**70), max_size=4) | JSON,
    "messages": st.lists(
        st.fixed_dictionaries({"role": st.just("user") | JSON}, optional={"content": JSON}),
        max_size=3,
    )
    | JSON,
    "model": st.sampled_from(["alphagate-twin", "alphagate-twin:code", "other", ""]) | JSON,
    "max_tokens": st.integers(-3, 300) | JSON,
    "max_completion_tokens": st.integers(-3, 300) | JSON,
    "stream": st.booleans() | JSON,
    "stream_options": st.fixed_dictionaries(
        {}, optional={"include_usage": st.booleans(), "continuous_usage_stats": JSON}
    )
    | JSON,
    "temperature": st.floats(allow_nan=True) | JSON,
    "seed": st.integers(-(2**70), 2**70) | JSON,
    "ignore_eos": st.booleans() | JSON,
    "n": st.integers(-1, 3) | JSON,
    "alphagate_class": st.text(max_size=6) | JSON,
}
#: a valid request with up to three fields replaced or added (each typed, or any JSON)
BODY = st.builds(
    lambda base, extra: {**base, **dict(extra)},
    st.sampled_from(
        [
            {"prompt": "a b c", "max_tokens": 4},
            {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4},
            {"prompt": "a", "messages": [{"role": "user", "content": "hi"}]},
            {},
        ]
    ),
    st.lists(
        st.sampled_from(sorted(BODY_FIELDS)).flatmap(
            lambda k: st.tuples(st.just(k), BODY_FIELDS[k])
        ),
        max_size=3,
    ),
)
RAW_BODY = st.one_of(
    BODY.map(lambda b: json.dumps(b).encode()),
    BODY.map(lambda b: json.dumps(b).encode()),
    BODY.map(lambda b: json.dumps(b).encode()),
    JSON.map(lambda b: json.dumps(b).encode()),
    st.binary(max_size=40),
    st.integers(1, 3000).map(lambda n: b"[" * n + b"]" * n),
    st.integers(1, 3000).map(lambda n: b'{"prompt": "x", "a": ' + b"{" * n),
)
TWIN_ANSWERS = {200, 400, 401, 404, 408}


def test_twin_request_bodies() -> None:
    """Any body, posted to completions and chat: 200, 400, 401, 404 or 408 — never a 500."""
    import aiohttp

    cfg = TwinConfig(
        deployment=DeploymentConfig(model="llama-3.1-8b", weight_dtype="bf16"),
        k=2,
        time_scale=0.0,
        max_model_len=256,
    )
    seen: set[int] = set()
    with twin(cfg) as (url, _):

        @FUZZ
        @given(RAW_BODY, st.booleans())
        def run(raw: bytes, json_type: bool) -> None:
            async def go() -> list[int]:
                headers = {"Content-Type": "application/json"} if json_type else {}
                out = []
                async with aiohttp.ClientSession() as s:
                    for path in ("/v1/completions", "/v1/chat/completions"):
                        async with s.post(url + path, data=raw, headers=headers) as r:
                            await r.read()
                            out.append(r.status)
                return out

            for status in asyncio.run(go()):
                assert status in TWIN_ANSWERS, (status, raw[:200])
                seen.add(status)

        run()
    assert {200, 400} <= seen  # valid bodies are served, not only refused
