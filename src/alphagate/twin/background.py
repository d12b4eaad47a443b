"""Run an aiohttp application on 127.0.0.1 in a background thread (tests), or the twin in a
process of its own (the demo: a wall-clock A/B needs the server off the client's interpreter,
whose lock a thread would share)."""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing.connection import Connection

from aiohttp import web

from alphagate.twin.config import TwinConfig
from alphagate.twin.engine import TwinEngine
from alphagate.twin.server import ENGINE_KEY, LISTEN_BACKLOG, create_app

__all__ = ["serve_in_thread", "twin_in_process", "twin_in_thread"]

#: Seconds in-flight requests get to finish when a server thread stops.
SHUTDOWN_TIMEOUT_S = 5.0


@contextmanager
def serve_in_thread(
    app: web.Application,
    host: str = "127.0.0.1",
    *,
    port: int = 0,
    handler_cancellation: bool = False,
    keepalive_timeout: float = 75.0,
) -> Iterator[str]:
    """Serve ``app`` on ``port`` (0: a free one) of the loopback from its own event loop; yields
    the base URL."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    state: dict[str, object] = {}

    async def start() -> None:
        runner = web.AppRunner(
            app,
            handle_signals=False,
            access_log=None,
            handler_cancellation=handler_cancellation,
            keepalive_timeout=keepalive_timeout,
            # requests still in flight when the block ends (a client that keeps streaming) get
            # this long to finish, then are cancelled: stopping never waits on a client
            shutdown_timeout=SHUTDOWN_TIMEOUT_S,
        )
        await runner.setup()
        site = web.TCPSite(runner, host, port, backlog=LISTEN_BACKLOG)
        await site.start()
        state["runner"] = runner
        state["port"] = runner.addresses[0][1]
        ready.set()

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(start())
        loop.run_forever()

    thread = threading.Thread(target=run, daemon=True, name="alphagate-server")
    thread.start()
    if not ready.wait(30):
        raise RuntimeError("the server thread did not start")
    try:
        yield f"http://{host}:{state['port']}"
    finally:
        runner = state["runner"]
        assert isinstance(runner, web.AppRunner)
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(SHUTDOWN_TIMEOUT_S + 60)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
        loop.close()


@contextmanager
def twin_in_thread(config: TwinConfig, port: int = 0) -> Iterator[tuple[str, TwinEngine]]:
    """A twin server in a background thread: (base URL, its engine)."""
    app = create_app(config)
    with serve_in_thread(
        app, port=port, handler_cancellation=True, keepalive_timeout=config.request_timeout_s
    ) as url:
        yield url, app[ENGINE_KEY]


def _serve_child(config: TwinConfig, port: int, conn: Connection) -> None:
    from alphagate.twin.server import serve

    try:
        serve(config, "127.0.0.1", port, conn.send)
    except OSError as exc:
        conn.send(f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}")


@contextmanager
def twin_in_process(config: TwinConfig, port: int = 0, timeout_s: float = 60.0) -> Iterator[str]:
    """A twin served by its own process on 127.0.0.1:``port`` (0: a free one); yields the base
    URL and stops the process (SIGTERM, then SIGKILL) when the block ends."""
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_serve_child, args=(config, port, child), daemon=True)
    proc.start()
    child.close()
    try:
        if not parent.poll(timeout_s):
            raise RuntimeError(f"the twin process did not start within {timeout_s:g} s")
        got = parent.recv()
        if isinstance(got, str):
            raise RuntimeError(got)
        yield f"http://127.0.0.1:{got}"
    finally:
        proc.terminate()
        proc.join(SHUTDOWN_TIMEOUT_S + 10)
        if proc.is_alive():
            proc.kill()
            proc.join(10)
        parent.close()
