"""``measure live``'s scrape: ``/metrics`` of a twin (in its own process, its counters and
histograms filled by a short bench first) read and parsed 300 times in one event loop, as
``measure live`` watches, through alphagate's transport (``alphagate.net``: the llhttp client,
connections kept alive). The reference, in the same run: a minimal aiohttp loop, one session,
``GET`` and the same parse (:func:`~alphagate.measure.prom.parse_spec_counters`), nothing else.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _clients import twin
from alphagate.measure.live import LiveConfig, LiveWindow
from alphagate.measure.prom import parse_spec_counters
from alphagate.net.client import StreamClient

SCRAPES = 300


async def ours(url: str) -> tuple[float, float]:
    """(wall, client CPU) seconds per scrape through ``LiveWindow.scrape``."""
    client = StreamClient(connect_timeout_s=10)
    win = LiveWindow(LiveConfig(urls=(url,)), transport=client)
    await win.scrape()
    w0, c0 = time.perf_counter(), time.process_time()
    for _ in range(SCRAPES):
        await win.scrape()
    w, c = time.perf_counter() - w0, time.process_time() - c0
    await client.aclose()
    assert not win.notes, win.notes
    return w / SCRAPES, c / SCRAPES


async def minimal(url: str) -> tuple[float, float]:
    """The reference: one aiohttp session, GET and parse. Nothing else."""
    async with aiohttp.ClientSession() as session:

        async def scrape() -> None:
            async with session.get(url + "/metrics") as resp:
                assert resp.status == 200
                parse_spec_counters((await resp.read()).decode("utf-8"))

        await scrape()
        w0, c0 = time.perf_counter(), time.process_time()
        for _ in range(SCRAPES):
            await scrape()
        return (time.perf_counter() - w0) / SCRAPES, (time.process_time() - c0) / SCRAPES


def main() -> None:
    out = tempfile.mkdtemp(prefix="bench-scrape-")
    args = ("--model", "llama-3.3-70b", "--dtype", "fp8", "--k", "3", "--time-scale", "0")
    try:
        with twin(*args) as url:
            subprocess.run(
                [sys.executable, "-m", "alphagate", "bench", "--url", url, "--num-prompts", "200",
                 "--dataset", "synthetic:in=8,out=32", "--concurrency", "16", "--no-metrics",
                 "--json", "--out", out],
                capture_output=True, check=True,
            )  # fmt: skip
            ref = ours_best = (float("inf"), float("inf"))
            for _ in range(3):  # alternate, keep each one's best (the twin shares the cores)
                r, o = asyncio.run(minimal(url)), asyncio.run(ours(url))
                ref, ours_best = min(ref, r), min(ours_best, o)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    print(f"{SCRAPES} scrapes of a time-scale-0 twin's /metrics, one event loop, best of 3:")
    print(f"  minimal aiohttp loop     {ref[0] * 1e3:6.3f} ms wall  {ref[1] * 1e3:6.3f} ms CPU"
          "   (reference)")  # fmt: skip
    print(
        f"  alphagate measure live   {ours_best[0] * 1e3:6.3f} ms wall  "
        f"{ours_best[1] * 1e3:6.3f} ms CPU   speed ratio {ref[0] / ours_best[0]:.2f}× wall, "
        f"{ref[1] / ours_best[1]:.2f}× CPU  (goal ≥ 1×)"
    )


if __name__ == "__main__":
    main()
