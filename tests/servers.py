"""Real servers on 127.0.0.1 for tests: the twin and a deliberately faulty one, each in a thread,
and a real Prometheus server as a process.

Each runs its own asyncio loop in a background thread (``alphagate.twin.background``) so that code
under test (including the CLI, which calls ``asyncio.run``) talks to it over real sockets.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from aiohttp import web

from alphagate.twin.background import serve_in_thread, twin_in_thread
from alphagate.twin.config import TwinConfig
from alphagate.twin.engine import TwinEngine

if TYPE_CHECKING:
    from click.testing import Result

    from tests.conftest import Cli

#: what the gate says of an A/B that measured a client or twin falling behind (bench/validity.py)
DISTORTED = "the A/B measured its client or server falling behind"
#: how many times a test that needs an undistorted A/B does what the gate then says, "rerun": on a
#: loaded 2-core machine about one A/B in three is distorted (a 50 ms stall of the twin's loop, or
#: the client reading 6% of its chunks late); four tries in a row are all distorted about one time
#: in eighty
RERUNS = 3


def serve(app: web.Application) -> AbstractContextManager[str]:
    """Run ``app`` on 127.0.0.1:<free port> in a thread; yields the base URL."""
    return serve_in_thread(app)


def twin(config: TwinConfig, port: int = 0) -> AbstractContextManager[tuple[str, TwinEngine]]:
    """A twin on 127.0.0.1:``port`` (0: a free port); yields (base URL, its engine)."""
    return twin_in_thread(config, port)


def bench_ab(cli: Cli, base: TwinConfig, cand: TwinConfig, *args: str) -> Result:
    """``alphagate bench`` of a baseline twin (``base``) against a candidate twin (``cand``),
    both on 127.0.0.1 for the run, with ``args`` after the two URLs."""
    with twin(base) as (b_url, _), twin(cand) as (c_url, _):
        return cli.run("bench", "--baseline-url", b_url, "--candidate-url", c_url, *args)


def faulty_app() -> web.Application:
    """A completions endpoint whose behaviour is picked by the prompt: ok, 500, drop, stall, malformed."""

    async def completions(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        mode = str(body.get("prompt", "ok")).split()[0]
        if mode == "500":
            return web.json_response(
                {"error": {"message": "boom", "type": "InternalServerError", "code": 500}},
                status=500,
            )
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)

        def chunk(text: str, n: int) -> bytes:
            obj = {
                "choices": [{"index": 0, "text": text, "finish_reason": None}],
                "usage": {"prompt_tokens": 3, "completion_tokens": n},
            }
            return b"data: " + json.dumps(obj).encode() + b"\n\n"

        await resp.write(chunk(" a", 1))
        await resp.write(chunk(" b c", 3))
        if mode == "drop":
            request.transport.close()  # type: ignore[union-attr]
            return resp
        if mode == "stall":
            await asyncio.sleep(5)
        if mode == "malformed":
            await resp.write(b"data: {not json\n\n")
        final = {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 3}}
        await resp.write(b"data: " + json.dumps(final).encode() + b"\n\ndata: [DONE]\n\n")
        await resp.write_eof()
        return resp

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"data": [{"id": "faulty"}]})

    app = web.Application()
    app.router.add_post("/v1/completions", completions)
    app.router.add_get("/v1/models", models)
    return app


@contextmanager
def traffic(
    url: str, *, concurrency: int = 4, max_tokens: int = 32, cls: str | None = None
) -> Iterator[None]:
    """Streams of requests to ``url`` from a background thread until the block ends; ``cls``
    picks the twin's traffic class (``alphagate_class``)."""
    stop = threading.Event()

    async def user() -> None:
        import aiohttp

        async with aiohttp.ClientSession() as s:
            while not stop.is_set():
                body: dict[str, object] = {
                    "prompt": "a b c d",
                    "max_tokens": max_tokens,
                    "ignore_eos": True,
                }
                if cls is not None:
                    body["alphagate_class"] = cls
                try:
                    async with s.post(url + "/v1/completions", json=body) as r:
                        await r.read()
                except aiohttp.ClientError:
                    await asyncio.sleep(0.05)

    def run() -> None:
        async def main() -> None:
            await asyncio.gather(*(user() for _ in range(concurrency)))

        asyncio.run(main())

    t = threading.Thread(target=run, daemon=True)
    t.start()
    try:
        yield
    finally:
        stop.set()
        t.join(30)


def hangup_as_a_terminal_sends_it() -> None:
    """``preexec_fn`` of a command a test hangs up on: a test run under ``nohup`` passes its
    ignored SIGHUP on to every child, and a command that finds SIGHUP ignored keeps it so (as it
    should); the command under test must see the signal a closing terminal sends."""
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def prometheus(targets: list[str], tmp: Path, scrape_s: float = 1.0) -> Iterator[str]:
    """A real Prometheus server (Debian's ``prometheus``) on 127.0.0.1 scraping ``targets``
    (base URLs) every ``scrape_s``; yields its URL and stops it by its process id."""
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.fail("prometheus is not installed: `make system-deps` installs it (apt-get)")
    hosts = [t.split("://", 1)[1].rstrip("/") for t in targets]
    cfg = tmp / "prometheus.yml"
    cfg.write_text(
        "global:\n"
        f"  scrape_interval: {round(scrape_s * 1000)}ms\n"
        f"  evaluation_interval: {round(scrape_s * 1000)}ms\n"
        "scrape_configs:\n"
        "  - job_name: twins\n"
        f"    static_configs:\n      - targets: {json.dumps(hosts)}\n"
    )
    port = free_port()
    log = (tmp / "prometheus.log").open("wb")
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={cfg}",
            f"--storage.tsdb.path={tmp / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--log.level=warn",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(url + "/-/ready", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    "prometheus did not become ready:\n" + (tmp / "prometheus.log").read_text()
                )
            time.sleep(0.2)
        yield url
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def prometheus_query(url: str, expr: str) -> list[dict[str, object]]:
    """The result vector of an instant query."""
    q = urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(f"{url}/api/v1/query?{q}", timeout=5) as r:
        return json.loads(r.read())["data"]["result"]  # type: ignore[no-any-return]
