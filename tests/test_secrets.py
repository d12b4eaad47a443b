"""No secret the client holds is ever written or printed: every verb that takes a URL or a key
runs against servers on 127.0.0.1 with a canary secret in every position — URL userinfo (a
password, a lone token), a URL query key, ``--api-key`` / ``$ALPHAGATE_API_KEY``, a header value,
reflected back by the server in a 401 or 400 error body — and every file written under the test's
folder, stdout, stderr and the log are searched for it (as given and in the base64 of a Basic
credential). The canary must reach the server where it belongs: the server sees the
``Authorization`` header (Basic for ``user:password@``, Bearer for a lone token or a key).

No assertion shows the text it searched: a leak is reported by where it was found, never by
printing the canary.
"""

from __future__ import annotations

import base64
import json
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from alphagate.cli import app
from alphagate.core.errors import ConfigError
from alphagate.core.secrets import (
    REDACTED,
    Secrets,
    auth_headers,
    plain_http_warning,
    redact,
    split_credentials,
)
from alphagate.specs import DeploymentConfig
from alphagate.twin.background import serve_in_thread
from alphagate.twin.config import TwinConfig
from alphagate.twin.server import create_app
from tests.conftest import Cli
from tests.servers import traffic

CANARY = "CANARY-s3cr3t-XYZ"
BASIC = "Basic " + base64.b64encode(f"user:{CANARY}".encode()).decode()
#: every spelling of the canary a leak could take
NEEDLES = (CANARY, base64.b64encode(f"user:{CANARY}".encode()).decode())
TWIN = TwinConfig(
    deployment=DeploymentConfig(model="llama-3.1-8b", weight_dtype="bf16"), k=2, time_scale=0.0
)
BENCH = ["--num-prompts", "3", "--dataset", "synthetic:in=4,out=4"]


# ---------------------------------------------------------------------------- servers
@dataclass
class Seen:
    """What a server received: each request's path, Authorization, X-Canary and query."""

    requests: list[tuple[str, str, str, str]] = field(default_factory=list)

    def auth(self, path_prefix: str) -> set[str]:
        return {a for p, a, _, _ in self.requests if p.startswith(path_prefix)}

    def header(self, path_prefix: str) -> set[str]:
        return {h for p, _, h, _ in self.requests if p.startswith(path_prefix)}

    def queries(self, path_prefix: str) -> set[str]:
        return {q for p, _, _, q in self.requests if p.startswith(path_prefix)}


def _spy(seen: Seen) -> Any:
    @web.middleware
    async def spy(request: web.Request, handler: Any) -> web.StreamResponse:
        seen.requests.append(
            (
                request.path,
                request.headers.get("Authorization", ""),
                request.headers.get("X-Canary", ""),
                request.query_string,
            )
        )
        resp: web.StreamResponse = await handler(request)
        return resp

    return spy


@contextmanager
def spy_twin(cfg: TwinConfig = TWIN) -> Iterator[tuple[str, Seen]]:
    """A twin that records what every request carried."""
    seen = Seen()
    app = create_app(cfg)
    app.middlewares.insert(0, _spy(seen))
    with serve_in_thread(app, handler_cancellation=True) as url:
        yield url, seen


def _reflecting_app(status: int = 401) -> web.Application:
    """A careless server: every request is refused with the credentials it carried echoed in
    the error message (OpenAI's error shape), and its /metrics and /api paths do the same."""

    async def refuse(request: web.Request) -> web.Response:
        said = f"invalid key {request.headers.get('Authorization', '')!r} {request.query_string}"
        if request.path.startswith("/api/"):
            body: dict[str, Any] = {"status": "error", "errorType": "bad_data", "error": said}
        else:
            body = {"error": {"message": said, "type": "AuthenticationError", "code": status}}
        return web.json_response(body, status=status)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", refuse)
    return app


def _html_app() -> web.Application:
    """Not Prometheus text, nor Prometheus API JSON: an HTML page echoing the credentials."""

    async def page(request: web.Request) -> web.Response:
        text = f"<html>{request.headers.get('Authorization', '')} {request.query_string}</html>"
        return web.Response(text=text, content_type="text/html")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", page)
    return app


def _fake_prometheus(seen: Seen) -> web.Application:
    """Prometheus's HTTP API, enough of it for ``measure prometheus`` and ``gate --prometheus``:
    1,000 drafts of K = 3 over any window, α by position 0.8, 0.75, 0.67."""

    def value(expr: str) -> list[dict[str, Any]]:
        if "resets(" in expr:
            return [{"metric": {}, "value": [0, "0"]}]
        if "count" in expr:
            return [{"metric": {"model_name": "m"}, "value": [0, "1"]}]
        if "per_pos" in expr:
            return [
                {"metric": {"position": str(i)}, "value": [0, str(v)]}
                for i, v in enumerate((800, 600, 400))
            ]
        for name, v in (("accepted_tokens", 1800), ("draft_tokens", 3000), ("drafts", 1000)):
            if f"num_{name}_total" in expr:
                return [{"metric": {}, "value": [0, str(v)]}]
        return []

    async def query(request: web.Request) -> web.Response:
        result = value(request.query.get("query", ""))
        return web.json_response(
            {"status": "success", "data": {"resultType": "vector", "result": result}}
        )

    async def targets(request: web.Request) -> web.Response:
        active = [{"scrapeInterval": "30s"}]
        return web.json_response({"status": "success", "data": {"activeTargets": active}})

    app = web.Application(middlewares=[_spy(seen)])
    app.router.add_get("/api/v1/query", query)
    app.router.add_get("/api/v1/targets", targets)
    return app


@contextmanager
def fake_prometheus() -> Iterator[tuple[str, Seen]]:
    seen = Seen()
    with serve_in_thread(_fake_prometheus(seen)) as url:
        yield url, seen


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # nothing listens there once closed


def _host(url: str) -> str:
    return url.split("//", 1)[1]


# ---------------------------------------------------------------------------- the search
def leaks(result: Any, folder: Path, caplog: pytest.LogCaptureFixture) -> list[str]:
    """Where the canary was found: the streams' names and the files' paths (never the text)."""
    where = []
    streams = {
        "stdout": result.stdout,
        "stderr": result.stderr,
        "log": caplog.text,
        "exception": repr(result.exception),
    }
    for name, text in streams.items():
        if any(n in text for n in NEEDLES):
            where.append(name)
    for f in sorted(folder.rglob("*")):
        if f.is_file():
            data = f.read_bytes()
            if any(n.encode() in data for n in NEEDLES):
                where.append(str(f.relative_to(folder)))
    return where


def expect(ok: bool, why: str) -> None:
    """Fail with ``why`` alone — no traceback, no values: they may hold the canary."""
    if not ok:
        pytest.fail(why, pytrace=False)


def no_traceback(result: Any) -> bool:
    return result.exception is None or isinstance(result.exception, SystemExit)


def check(
    result: Any, codes: tuple[int, ...], folder: Path, caplog: pytest.LogCaptureFixture, what: str
) -> None:
    """The run ended with one of ``codes``, without a traceback, and leaked nothing."""
    crashed = None if no_traceback(result) else type(result.exception).__name__
    expect(crashed is None, f"{what}: a traceback ({crashed})")
    expect(result.exit_code in codes, f"{what}: exit {result.exit_code}, not {codes}")
    where = leaks(result, folder, caplog)
    expect(not where, f"{what}: the canary is in {where}")


def run(cli: Cli, *args: str, env: dict[str, str] | None = None) -> Any:
    """``cli.run`` with environment variables set for the call."""
    return cli.runner.invoke(app, list(args), env=env)


def _written(folder: Path) -> list[str]:
    return sorted(str(f.relative_to(folder)) for f in folder.rglob("*") if f.is_file())


# ---------------------------------------------------------------------------- bench
def test_bench_url_password_and_header_values(
    cli: Cli, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with spy_twin() as (url, seen):
        for fmt in ("--json", "--no-progress"):
            r = cli.run("bench", "--url", f"http://user:{CANARY}@{_host(url)}", "--header",
                        f"X-Canary: {CANARY}", *BENCH, "--out", str(tmp_path / fmt), fmt)  # fmt: skip
            check(r, (0,), tmp_path, caplog, f"bench {fmt}")
    assert "summary.json" in _written(tmp_path / "--json")
    expect(seen.auth("/v1/completions") == {BASIC}, "the server did not get Basic credentials")
    expect(seen.header("/v1/completions") == {CANARY}, "the server did not get the header")


def test_bench_lone_token_and_an_ab_with_a_metrics_key(
    cli: Cli, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with spy_twin() as (u1, s1), spy_twin() as (u2, s2):
        lone = cli.run("bench", "--url", f"http://{CANARY}@{_host(u1)}", *BENCH,
                       "--out", str(tmp_path / "lone"), "--json")  # fmt: skip
        check(lone, (0,), tmp_path, caplog, "bench, a lone token")
        expect(s1.auth("/v1/") == {f"Bearer {CANARY}"}, "a lone token is not sent as Bearer")
        ab = cli.run(
            "bench", "--baseline-url", f"http://user:{CANARY}@{_host(u1)}",
            "--candidate-url", f"http://user:{CANARY}@{_host(u2)}",
            "--metrics-url", f"{u2}/metrics?token={CANARY}", *BENCH,
            "--out", str(tmp_path / "ab"), "--json",
        )  # fmt: skip
    check(ab, (0,), tmp_path, caplog, "bench A/B")
    expect(BASIC in s1.auth("/v1/completions"), "the baseline did not get Basic credentials")
    expect(s2.auth("/v1/completions") == {BASIC}, "the candidate did not get Basic credentials")
    expect(s2.queries("/metrics") == {f"token={CANARY}"}, "the metrics key did not arrive")


def test_bench_error_bodies_that_echo_the_key_are_redacted(
    cli: Cli, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    seen = Seen()
    app = _reflecting_app(401)
    app.middlewares.insert(0, _spy(seen))
    with serve_in_thread(app) as url:
        r = cli.run("bench", "--url", url, "--api-key", CANARY, "--header", f"X-Canary: {CANARY}",
                    *BENCH, "--model", "m", "--out", str(tmp_path / "o"), "--json")  # fmt: skip
    check(r, (1,), tmp_path, caplog, "bench against a server echoing the key")  # every one failed
    records = [json.loads(x) for x in (tmp_path / "o" / "requests.jsonl").read_text().splitlines()]
    assert len(records) == 3
    assert all(REDACTED in x["error_message"] and "invalid key" in x["error_message"]
               for x in records)  # fmt: skip
    expect(seen.auth("/v1/completions") == {f"Bearer {CANARY}"}, "the key was not sent")


@pytest.mark.parametrize("form", ["ellipsis", "no colon", "control character", "no name"])
def test_bench_malformed_headers_are_refused_unseen(
    cli: Cli, form: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    header = {
        "ellipsis": f"Authorization: Bearer {CANARY}…",  # pasted: not Latin-1
        "no colon": f"Authorization Bearer {CANARY}",
        "control character": f"Authorization: Bearer {CANARY}\x07",
        "no name": f"Bearer {CANARY} x: y",  # not a header name
    }[form]
    r = cli.run("bench", "--url", "http://127.0.0.1:9", "--header", header, *BENCH,
                "--out", str(tmp_path / "o"))  # fmt: skip
    check(r, (2,), tmp_path, caplog, f"bench --header ({form})")
    assert "--header" in r.stderr


def test_bench_against_an_unreachable_url_with_credentials(
    cli: Cli, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    r = cli.run("bench", "--url", f"http://user:{CANARY}@127.0.0.1:{_closed_port()}", *BENCH,
                "--out", str(tmp_path / "o"), "--json")  # fmt: skip
    check(r, (1,), tmp_path, caplog, "bench, unreachable")


def test_bench_a_bad_metrics_url_is_not_echoed(
    cli: Cli, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    r = cli.run("bench", "--url", "http://127.0.0.1:9", "--metrics-url",
                f"ftp://user:{CANARY}@127.0.0.1:9/metrics", *BENCH, "--out", str(tmp_path / "o"))  # fmt: skip
    check(r, (2,), tmp_path, caplog, "bench --metrics-url ftp://")


def test_bench_a_query_key_in_the_url_is_not_written(
    cli: Cli, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with spy_twin() as (url, _):
        r = cli.run("bench", "--url", f"{url}?api_key={CANARY}", *BENCH,
                    "--out", str(tmp_path / "o"), "--json")  # fmt: skip
    check(r, (0, 1), tmp_path, caplog, "bench, a query key")


def test_bench_metrics_url_credentials_become_a_header_and_a_query_stays_after_the_path(
    cli: Cli, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """``--metrics-url http://user:PASSWORD@…`` authenticates its scrapes (Basic), and a key in
    the target's query string is sent after each request's path, never inside it."""
    with spy_twin() as (url, seen):
        r = cli.run("bench", "--url", f"{url}?region=eu", *BENCH,
                    "--metrics-url", f"http://user:{CANARY}@{_host(url)}/metrics",
                    "--out", str(tmp_path / "o"), "--json")  # fmt: skip
    check(r, (0, 1), tmp_path, caplog, "bench --metrics-url with credentials")
    assert seen.auth("/metrics") == {BASIC}
    assert seen.queries("/v1/completions") == {"region=eu"}
    assert r.exit_code == 0, r.output


# ---------------------------------------------------------------------------- measure live
@pytest.mark.parametrize("position", ["password", "token and query"])
def test_measure_live_sends_credentials_and_writes_none(
    cli: Cli, position: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with spy_twin() as (url, seen):
        given, auth, query = {
            "password": (f"http://user:{CANARY}@{_host(url)}", BASIC, ""),
            "token and query": (
                f"http://{CANARY}@{_host(url)}/metrics?token={CANARY}",
                f"Bearer {CANARY}",
                f"token={CANARY}",
            ),
        }[position]
        for fmt in ("--json", "table"):
            args = ["measure", "live", "--url", given, "--duration", "0.3", "--interval", "0.1",
                    "--out", str(tmp_path / f"live{fmt}.json")]  # fmt: skip
            r = cli.run(*args, *([fmt] if fmt == "--json" else []))
            # no traffic: not enough drafts yet, and the (empty) window is written
            check(r, (3,), tmp_path, caplog, f"measure live {fmt}")
    assert len(_written(tmp_path)) == 2
    expect(seen.auth("/metrics") == {auth}, "the server did not get the credentials")
    expect(seen.queries("/metrics") == {query}, "the query key did not arrive")
    assert REDACTED in json.loads((tmp_path / "live--json.json").read_text())["source"]


def test_measure_live_errors_name_no_secret(
    cli: Cli, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    closed = f"http://user:{CANARY}@127.0.0.1:{_closed_port()}/?token={CANARY}"
    with serve_in_thread(_reflecting_app(404)) as refusing, serve_in_thread(_html_app()) as html:
        cases = {
            "unreachable": closed,
            "404": f"http://user:{CANARY}@{_host(refusing)}",
            "not Prometheus text": f"http://{CANARY}@{_host(html)}/metrics?api_key={CANARY}",
        }
        for what, url in cases.items():
            r = cli.run("measure", "live", "--url", url, "--interval", "0.1",
                        "--out", str(tmp_path / "m.json"))  # fmt: skip
            check(r, (2,), tmp_path, caplog, f"measure live, {what}")
            assert REDACTED in r.stderr  # the URL is named, redacted
    assert not _written(tmp_path)


# ---------------------------------------------------------------------------- measure prometheus
def test_measure_prometheus_authenticates_and_writes_no_secret(
    cli: Cli, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with fake_prometheus() as (prom, seen):
        given = (
            f"http://user:{CANARY}@{_host(prom)}",
            f"http://{CANARY}@{_host(prom)}/?token={CANARY}",
        )
        for i, url in enumerate(given):
            for fmt in ("--json", "table"):
                args = ["measure", "prometheus", "--url", url, "--window", "60s",
                        "--out", str(tmp_path / f"p{i}{fmt}.json")]  # fmt: skip
                r = cli.run(*args, *([fmt] if fmt == "--json" else []))
                check(r, (0,), tmp_path, caplog, f"measure prometheus {i} {fmt}")
    d = json.loads((tmp_path / "p0--json.json").read_text())
    assert d["overall"]["num_drafts"] == 1000 and REDACTED in d["source"]
    expect(seen.auth("/api/v1/query") == {BASIC, f"Bearer {CANARY}"}, "no Authorization arrived")
    firsts = {q.split("&")[0] for q in seen.queries("/api/v1/query")}
    expect(f"token={CANARY}" in firsts, "the URL's query key did not arrive")


def test_measure_prometheus_errors_name_no_secret(
    cli: Cli, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with (
        serve_in_thread(_reflecting_app(400)) as refusing,
        serve_in_thread(_html_app()) as html,
        serve_in_thread(web.Application()) as empty,
    ):
        cases = {
            "unreachable": f"http://user:{CANARY}@127.0.0.1:{_closed_port()}",
            "400 echoing the key": f"http://user:{CANARY}@{_host(refusing)}/?api_key={CANARY}",
            "not Prometheus": f"http://{CANARY}@{_host(html)}",
            "404": f"http://user:{CANARY}@{_host(empty)}",
            "not http": f"ftp://user:{CANARY}@{_host(empty)}",
        }
        for what, url in cases.items():
            r = cli.run("measure", "prometheus", "--url", url, "--window", "60s",
                        "--out", str(tmp_path / "p.json"))  # fmt: skip
            check(r, (2,), tmp_path, caplog, f"measure prometheus, {what}")
    assert not _written(tmp_path)


# ---------------------------------------------------------------------------- gate
def test_gate_url_and_prometheus_write_no_secret(
    cli: Cli, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with spy_twin(TWIN.model_copy(update={"k": 3})) as (url, seen), traffic(url):
        live = cli.run("gate", "--url", f"http://user:{CANARY}@{_host(url)}", "--min-alpha",
                       "0.1", "--min-drafts", "50", "--window", "5s",
                       "--out", str(tmp_path / "g1.json"))  # fmt: skip
    check(live, (0, 3), tmp_path, caplog, "gate --url")
    expect(seen.auth("/metrics") == {BASIC}, "gate --url sent no credentials")
    with fake_prometheus() as (prom, pseen):
        q = cli.run("gate", "--prometheus", f"http://user:{CANARY}@{_host(prom)}?token={CANARY}",
                    "--min-alpha", "0.1", "--min-drafts", "10", "--window", "60s",
                    "--out", str(tmp_path / "g2.json"), "--json")  # fmt: skip
    check(q, (0,), tmp_path, caplog, "gate --prometheus")
    expect(pseen.auth("/api/v1/query") == {BASIC}, "gate --prometheus sent no credentials")
    bad = cli.run("gate", "--prometheus", f"http://user:{CANARY}@127.0.0.1:{_closed_port()}",
                  "--min-alpha", "0.1", "--window", "60s")  # fmt: skip
    check(bad, (2,), tmp_path, caplog, "gate --prometheus, unreachable")
    assert _written(tmp_path) == ["g1.json", "g2.json"]


# ---------------------------------------------------------------------------- calibrate
CALIBRATE = ["--model", "llama-3.1-8b", "--dtype", "bf16", "--concurrency", "1",
             "--requests-per-user", "1", "--prompt-tokens", "8", "--output-tokens", "4",
             "--prefill-probe-tokens", "16"]  # fmt: skip


def test_calibrate_url_credentials_reach_the_server_and_nowhere_else(
    cli: Cli, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with spy_twin(TWIN.model_copy(update={"k": 0})) as (url, seen):
        given = f"http://user:{CANARY}@{_host(url)}"
        r = cli.run("calibrate", "--url", given, *CALIBRATE, "--out", str(tmp_path / "p.json"),
                    "--bench-out", str(tmp_path / "b"))  # fmt: skip
        check(r, (0, 1), tmp_path, caplog, "calibrate")  # 1: a fit marked unusable
        j = cli.run("calibrate", "--url", given, *CALIBRATE, "--out", str(tmp_path / "q.json"),
                    "--json")  # fmt: skip
        check(j, (0, 1), tmp_path, caplog, "calibrate --json")
    assert {"p.json", "q.json", "b/server-0/summary.json"} <= set(_written(tmp_path))
    assert REDACTED in json.loads((tmp_path / "p.json").read_text())["sources"][0]
    expect(seen.auth("/v1/completions") == {BASIC}, "calibrate sent no credentials")


def test_calibrate_a_key_from_the_environment_and_a_metrics_key(
    cli: Cli, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with spy_twin(TWIN.model_copy(update={"k": 0, "api_key": CANARY})) as (url, seen):
        r = run(cli, "calibrate", "--url", url, "--metrics-url", f"{url}/metrics?token={CANARY}",
                *CALIBRATE, "--out", str(tmp_path / "p.json"), "--bench-out",
                str(tmp_path / "b"), env={"ALPHAGATE_API_KEY": CANARY})  # fmt: skip
    check(r, (0, 1), tmp_path, caplog, "calibrate with $ALPHAGATE_API_KEY")
    # the twin checks the key (401 otherwise): the sweep completed, so it arrived
    expect(seen.auth("/v1/completions") == {f"Bearer {CANARY}"}, "the key was not sent")
    expect(seen.queries("/metrics") == {f"token={CANARY}"}, "the metrics key did not arrive")
    assert "warning" not in r.stderr  # loopback: the key crosses no network


def test_calibrate_failures_say_the_status_and_message_redacted(
    cli: Cli, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with serve_in_thread(_reflecting_app(401)) as refusing:
        r = run(cli, "calibrate", "--url", f"{refusing}/?api_key={CANARY}", *CALIBRATE,
                "--out", str(tmp_path / "p.json"), env={"ALPHAGATE_API_KEY": CANARY})  # fmt: skip
    check(r, (2,), tmp_path, caplog, "calibrate against a server echoing the key")
    assert "HTTP 401" in r.stderr and "invalid key" in r.stderr and REDACTED in r.stderr
    closed = run(cli, "calibrate", "--url", f"http://user:{CANARY}@127.0.0.1:{_closed_port()}",
                 *CALIBRATE, "--out", str(tmp_path / "p.json"))  # fmt: skip
    check(closed, (2,), tmp_path, caplog, "calibrate, unreachable")
    assert "connection_refused" in closed.stderr
    assert not _written(tmp_path)


# ---------------------------------------------------------------------------- the one redaction
def test_redact_urls_queries_and_held_secrets() -> None:
    held = Secrets.of(
        urls=[f"http://u:{CANARY}@h/?api_key=k3y-4242"],
        headers={"Authorization": BASIC, "X-Canary": "tok-9999", "Accept": "*/*"},
        api_key="sk-key-1234",
    )
    text = (
        f"cannot reach http://u:{CANARY}@127.0.0.1:9/metrics?token=abcd&x=2 via "
        f"'http://{CANARY}@h/'; server said {json.dumps({'m': f'bad {BASIC} sk-key-1234'})} "
        "tok-9999 k3y-4242 and */* stays"
    )
    out = redact(text, held)
    assert not any(n in out for n in NEEDLES)
    for secret in ("abcd", "sk-key-1234", "tok-9999", "k3y-4242"):
        assert secret not in out
    assert "http://u:<redacted>@127.0.0.1:9/metrics?token=<redacted>&x=2" in out
    assert "'http://<redacted>@h/'" in out and "*/* stays" in out
    assert CANARY not in repr(held) and CANARY not in str(held)
    # a URL without secrets is unchanged; an unknown query key is kept
    assert redact("http://127.0.0.1:8000/v1?model=x") == "http://127.0.0.1:8000/v1?model=x"


def test_url_credentials_become_an_authorization_header() -> None:
    assert split_credentials(f"http://user:{CANARY}@127.0.0.1:8/v1?a=b") == (
        "http://127.0.0.1:8/v1?a=b",
        {"Authorization": BASIC},
    )
    assert split_credentials(f"https://{CANARY}@h/") == (
        "https://h/",
        {"Authorization": f"Bearer {CANARY}"},
    )
    assert split_credentials("http://u:p%40ss@h/")[1] == {
        "Authorization": "Basic " + base64.b64encode(b"u:p@ss").decode()
    }
    with pytest.raises(ConfigError) as bad:
        split_credentials(f"http://u:{CANARY}@h:notaport/")
    assert CANARY not in str(bad.value)


#: the unit tests' secret (the canary is kept for the end-to-end runs above)
S = "sk-unit-4242"
#: (header flags, API key, targets, words of the message, the config field at fault)
REFUSED = {
    "a header value outside Latin-1": ([f"X: {S}…"], None, (), "Latin-1", "header"),
    "a header without a colon": ([f"Bearer {S}"], None, (), "NAME:VALUE", "header"),
    "a key with a control character": ([], f"{S}\x07", (), "control character", "api_key"),
    "a key and URL credentials": ([], "k", (("u", f"http://u:{S}@h"),), "not both", "api_key"),
    "a header and URL credentials": (
        [f"Authorization: {S}"],
        None,
        (("u", f"http://u:{S}@h"),),
        "not both",
        "header",
    ),
    "two URLs, two credentials": (
        [],
        None,
        (("baseline", f"http://u:{S}@h"), ("candidate", "http://v:other@h")),
        "different",
        "candidate_url",
    ),
    "not http": ([], None, (("default", f"ftp://u:{S}@h"),), "http://", "url"),
    "not a URL": (
        [],
        None,
        (("baseline", f"http://u:{S}@h:port/"),),
        "not a valid",
        "baseline_url",
    ),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_auth_headers_refuse_without_showing_the_secret(case: str) -> None:
    flags, key, targets, words, field = REFUSED[case]
    with pytest.raises(ConfigError) as exc:
        auth_headers(flags, key, targets)
    assert words in str(exc.value) and S not in str(exc.value)
    assert exc.value.field == field  # the CLI names its flag from this, not from the message


def test_a_key_over_plain_http_to_another_host_is_warned_about() -> None:
    auth = {"Authorization": "Bearer x"}
    assert plain_http_warning("http://10.1.2.3:8000", auth) is not None
    assert plain_http_warning("http://10.1.2.3:8000", {}, api_key="k") is not None
    for quiet in (
        "https://10.1.2.3",
        "http://127.0.0.1:8000",
        "http://localhost:1",
        "http://[::1]:1",
    ):
        assert plain_http_warning(quiet, auth) is None
    assert plain_http_warning("http://10.1.2.3", {"Accept": "*/*"}) is None  # nothing secret
