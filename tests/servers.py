"""Real servers on 127.0.0.1 for tests: the twin and a deliberately faulty one, each in a thread.

Each runs its own asyncio loop in a background thread so that code under test (including the CLI,
which calls ``asyncio.run``) talks to it over real sockets.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from aiohttp import web

from alphagate.twin.config import TwinConfig
from alphagate.twin.engine import TwinEngine
from alphagate.twin.server import ENGINE_KEY, create_app


@contextmanager
def serve(app: web.Application) -> Iterator[str]:
    """Run ``app`` on 127.0.0.1:<free port> in a thread; yields the base URL."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    holder: dict[str, object] = {}

    async def start() -> None:
        runner = web.AppRunner(app, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        holder["runner"] = runner
        holder["port"] = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        ready.set()

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(start())
        loop.run_forever()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    ready.wait(10)
    try:
        yield f"http://127.0.0.1:{holder['port']}"
    finally:
        runner = holder["runner"]
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)  # type: ignore[attr-defined]
        loop.call_soon_threadsafe(loop.stop)
        t.join(10)
        loop.close()


@contextmanager
def twin(config: TwinConfig) -> Iterator[tuple[str, TwinEngine]]:
    app = create_app(config)
    with serve(app) as url:
        yield url, app[ENGINE_KEY]


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
