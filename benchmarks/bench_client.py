"""Client cost and fidelity: alphagate bench vs a minimal aiohttp streaming loop, against the twin.

1. Twin at time-scale 0 (a separate process), 1,000 concurrent streams: chunks ingested per
   client CPU-second for alphagate's client (SSE parsing, records, usage bookkeeping) and for a
   minimal aiohttp loop that only counts ``data:`` lines — the reference, in the same run.
2. Twin at time-scale 1 (Llama-3.3-70B FP8 on H100 timing), 1,000 streams: client-added latency,
   the twin's wall-clock send timestamp of each chunk → the client's receipt, P50 / P99.
3. The twin holding 2,000 concurrent streams.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from alphagate.bench import runner as runner_mod
from alphagate.bench.dataset import Prompt
from alphagate.bench.runner import BenchConfig, BenchRunner, Level


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


async def ours(
    url: str, streams: int, requests: int, out_tokens: int, *, latency: bool = False
) -> tuple[int, float, list[float]]:
    """alphagate's client; returns chunks, client CPU seconds, and (``latency``) client-added latencies."""
    latencies: list[float] = []
    original = runner_mod._Stream.event

    def spy(self: runner_mod._Stream, data: str, now: float) -> tuple[str, str] | None:
        if data.startswith("{") and '"alphagate_sent_s"' in data:
            latencies.append(time.time() - json.loads(data)["alphagate_sent_s"])
        return original(self, data, now)

    if latency:  # the timestamp probe costs CPU of its own: only for the latency runs
        runner_mod._Stream.event = spy  # type: ignore[method-assign]
    try:
        cfg = BenchConfig(
            targets=(("default", url),),
            levels=(Level(label="c", concurrency=streams),),
            num_prompts=requests,
            scrape_metrics=False,
            model="alphagate-twin",
        )
        prompts = [Prompt("a b c d", None, None, out_tokens, True)] * requests
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
            r = BenchRunner(cfg, prompts, session)
            cpu0 = time.process_time()
            await r.run()
            cpu = time.process_time() - cpu0
        chunks = sum(len(x.chunk_times_s) for x in r.records)
        failed = sum(1 for x in r.records if not x.ok)
        assert failed == 0, f"{failed} requests failed"
        return chunks, cpu, latencies
    finally:
        runner_mod._Stream.event = original  # type: ignore[method-assign]


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
            o_chunks, o_cpu, _ = asyncio.run(ours(url, streams, requests, out))
            m_rate, o_rate = max(m_rate, m_chunks / m_cpu), max(o_rate, o_chunks / o_cpu)
    finally:
        proc.terminate()
        proc.wait()
    print(
        f"time-scale 0, {streams} streams, {requests} requests × {out} tokens (twin in its own process):"
    )
    print(f"  minimal aiohttp loop   {m_rate:9,.0f} chunks / client CPU-s   (reference)")
    print(
        f"  alphagate bench client {o_rate:9,.0f} chunks / client CPU-s   ratio {o_rate / m_rate:.2f}×  (goal ≥ 0.8×)"
    )

    proc, url = start_twin(1.0, 2048)
    try:
        print(
            "time-scale 1 (Llama-3.3-70B FP8 on H100 timing): client-added latency, twin send → client receipt"
        )
        for n_streams in (16, 100, streams):
            _, _, lat = asyncio.run(ours(url, n_streams, n_streams * 2, 48, latency=True))
            lat_ms = np.asarray(lat) * 1e3
            print(
                f"  {n_streams:5d} streams: P50 {np.percentile(lat_ms, 50):7.3f} ms, P99 {np.percentile(lat_ms, 99):7.3f} ms "
                f"over {lat_ms.size:,} chunks (goal at 1,000 streams: P99 ≤ 1 ms)"
            )
        t0 = time.perf_counter()
        c2, _, _ = asyncio.run(ours(url, 2000, 2000, 24))
        print(
            f"the twin held 2,000 concurrent streams: {c2:,} chunks, 0 failures, {time.perf_counter() - t0:.1f} s"
        )
    finally:
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    main()
