"""The client's inner loop: alphagate's BenchRunner vs a minimal aiohttp streaming loop.

Twin at time-scale 0 (a separate process), 1,000 concurrent streams: chunks ingested per client
CPU-second for alphagate's runner (SSE parsing, validation, records, usage bookkeeping) and for a
minimal aiohttp loop that only counts ``data:`` lines — the reference, in the same run. This
measures the runner without the CLI around it; ``bench_client_cli.py`` runs the command end to end
against vLLM's client, and ``bench_client_streams.py`` measures client-added latency and 10,000
streams.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from alphagate.bench.config import BenchConfig, Level
from alphagate.bench.dataset import Prompt
from alphagate.bench.runner import BenchRunner


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_twin(time_scale: float, max_num_seqs: int) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    cmd = [
        sys.executable,
        "-m",
        "alphagate",
        "twin",
        "--model",
        "llama-3.3-70b",
        "--dtype",
        "fp8",
        "--k",
        "3",
        "--time-scale",
        str(time_scale),
        "--port",
        str(port),
        "--max-num-seqs",
        str(max_num_seqs),
        "--emit-send-time",
        "--output-len",
        "fixed:64",
    ]
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "COLUMNS": "200"},
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc, url
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("twin did not start")


async def ours(url: str, streams: int, requests: int, out_tokens: int) -> tuple[int, float]:
    """alphagate's runner; returns chunks and client CPU seconds."""
    cfg = BenchConfig(
        targets=(("default", url),),
        levels=(Level(label="c", concurrency=streams),),
        num_prompts=requests,
        scrape_metrics=False,
        model="alphagate-twin",
    )
    prompts = [Prompt("a b c d", None, None, out_tokens, True)] * requests
    r = BenchRunner(cfg, prompts)
    cpu0 = time.process_time()
    await r.run()
    cpu = time.process_time() - cpu0
    chunks = sum(len(x.chunk_times_s) for x in r.records)
    failed = sum(1 for x in r.records if not x.ok)
    assert failed == 0, f"{failed} requests failed"
    return chunks, cpu


async def minimal(url: str, streams: int, requests: int, out_tokens: int) -> tuple[int, float]:
    """The reference: POST, iterate lines, count data: lines. Nothing else."""
    body = {
        "model": "alphagate-twin",
        "prompt": "a b c d",
        "max_tokens": out_tokens,
        "ignore_eos": True,
        "stream": True,
    }
    chunks = 0
    queue = list(range(requests))

    async def worker(session: aiohttp.ClientSession) -> None:
        nonlocal chunks
        while queue:
            queue.pop()
            async with session.post(url + "/v1/completions", json=body) as resp:
                async for line in resp.content:
                    if line.startswith(b"data: {"):
                        chunks += 1

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        cpu0 = time.process_time()
        await asyncio.gather(*(worker(session) for _ in range(streams)))
        return chunks, time.process_time() - cpu0


def main() -> None:
    streams, requests, out = 1000, 3000, 64
    proc, url = start_twin(0.0, 2048)
    m_rate = o_rate = 0.0
    try:
        for _ in range(3):  # alternate, keep each client's best (the twin shares the 2 cores)
            m_chunks, m_cpu = asyncio.run(minimal(url, streams, requests, out))
            o_chunks, o_cpu = asyncio.run(ours(url, streams, requests, out))
            m_rate, o_rate = max(m_rate, m_chunks / m_cpu), max(o_rate, o_chunks / o_cpu)
    finally:
        proc.terminate()
        proc.wait()
    print(
        f"time-scale 0, {streams} streams, {requests} requests × {out} tokens (twin in its own process):"
    )
    print(f"  minimal aiohttp loop   {m_rate:9,.0f} chunks / client CPU-s   (reference)")
    print(
        f"  alphagate bench runner {o_rate:9,.0f} chunks / client CPU-s   ratio {o_rate / m_rate:.2f}×  (goal ≥ 0.8×)"
    )


if __name__ == "__main__":
    main()
