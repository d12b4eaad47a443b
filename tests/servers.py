"""Real servers on 127.0.0.1 for tests: the twin and a deliberately faulty one, each in a thread.

Each runs its own asyncio loop in a background thread (``alphagate.twin.background``) so that code
under test (including the CLI, which calls ``asyncio.run``) talks to it over real sockets.
"""

from __future__ import annotations

import asyncio
import json
from contextlib import AbstractContextManager

from aiohttp import web

from alphagate.twin.background import serve_in_thread, twin_in_thread
from alphagate.twin.config import TwinConfig
from alphagate.twin.engine import TwinEngine


def serve(app: web.Application) -> AbstractContextManager[str]:
    """Run ``app`` on 127.0.0.1:<free port> in a thread; yields the base URL."""
    return serve_in_thread(app)


def twin(config: TwinConfig) -> AbstractContextManager[tuple[str, TwinEngine]]:
    return twin_in_thread(config)


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
