"""Client-added latency and many streams: ``alphagate bench`` end to end (live display on a
terminal) against a twin in its own process.

1. Twin at time-scale 1 (Llama-3.3-70B FP8 on H100 timing, K = 3, ``--emit-send-time``): the
   client-added latency of every content chunk, the twin's wall-clock send time → the client's
   receipt (``--probe-send-time`` records it), P50 / P99 at 16, 100 and 1,000 streams, with 1 and
   with N worker processes. The reference, in the same run: a minimal aiohttp loop in this process
   that only parses each chunk's send time. Goal: P99 ≤ 1 ms at 1,000 streams with workers.
2. 10,000 concurrent streams (a closed loop of 10,000 users, one request each): records written,
   failures, and the most streams the client held open at once (from the records' own send and end
   times).

``python benchmarks/bench_client_streams.py [--workers N] [--skip-10k]``. On a 2-core machine the
twin, the coordinator and the workers share the cores: the figures say what held there.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _clients import read_records, run_tree, twin

OUT_LEN = 48


async def reference(url: str, streams: int, requests: int) -> list[float]:
    """The minimal client: POST, split lines, read ``alphagate_sent_s``; delays in seconds."""
    body = {
        "model": "alphagate-twin",
        "prompt": "a b c d",
        "max_tokens": OUT_LEN,
        "ignore_eos": True,
        "stream": True,
    }
    delays: list[float] = []
    queue = list(range(requests))

    async def user(session: aiohttp.ClientSession) -> None:
        while queue:
            queue.pop()
            async with session.post(url + "/v1/completions", json=body) as resp:
                async for line in resp.content:
                    if line.startswith(b"data: {"):
                        now = time.time()
                        delays.append(now - json.loads(line[6:])["alphagate_sent_s"])

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        await asyncio.gather(*(user(session) for _ in range(streams)))
    return delays


def ours(
    url: str, streams: int, requests: int, workers: int, out: Path, *probe: str
) -> list[dict[str, Any]]:
    argv = [sys.executable, "-m", "alphagate", "bench", "--url", url, "-c", str(streams)]
    argv += ["-n", str(requests), "--dataset", f"synthetic:in=16,out={OUT_LEN}", "--no-metrics"]
    argv += ["--workers", str(workers), "--out", str(out), "--timeout", "300", *probe]
    run = run_tree(argv)
    if run.returncode != 0:
        raise RuntimeError(f"alphagate bench exited {run.returncode}:\n{run.output[-3000:]}")
    return read_records(out / "requests.jsonl")


def _ms(delays: list[float]) -> tuple[float, float]:
    a = np.asarray(delays) * 1e3
    return float(np.percentile(a, 50)), float(np.percentile(a, 99))


def latency(workers: list[int], tmp: Path) -> None:
    args = ["--model", "llama-3.3-70b", "--dtype", "fp8", "--k", "3", "--alpha", "0.7"]
    args += ["--time-scale", "1", "--max-num-seqs", "2048", "--emit-send-time"]
    args += ["--prompt-len", "fixed:16", "--output-len", f"fixed:{OUT_LEN}"]
    args += ["--log-stats-interval", "0"]
    print(
        "time-scale 1 (Llama-3.3-70B FP8 on H100 timing): client-added latency, twin send → "
        "client receipt, P50 / P99 in ms"
    )
    with twin(*args) as url:
        for streams in (16, 100, 1000):
            ref = _ms(asyncio.run(reference(url, streams, 2 * streams)))
            line = f"  {streams:5,d} streams: minimal aiohttp loop {ref[0]:6.3f} / {ref[1]:6.3f} (reference)"
            for w in workers:
                recs = ours(
                    url, streams, 2 * streams, w, tmp / f"l{streams}-{w}", "--probe-send-time"
                )
                lost = 2 * streams - sum(1 for r in recs if r["error_type"] is None)
                d = [x for r in recs for x in r.get("delivery_s") or []]
                p50, p99 = _ms(d)
                line += (
                    f"\n{'':17}alphagate --workers {w}: {p50:6.3f} / {p99:6.3f}  "
                    f"(P99 ×{p99 / ref[1]:.2f} of the reference; {len(d):,} chunks, {lost} lost)"
                )
            print(line + ("   goal: P99 ≤ 1 ms with workers" if streams == 1000 else ""))


def peak_in_flight(recs: list[dict[str, Any]]) -> int:
    """The most requests open at one instant, from each record's send and end."""
    ev = [(r["send_s"], 1) for r in recs] + [
        (r["send_s"] + (r["e2e_s"] or r["chunk_times_s"][-1] if r["chunk_times_s"] else 0.0), -1)
        for r in recs
    ]
    level = peak = 0
    for _, step in sorted(ev, key=lambda e: (e[0], e[1])):
        level += step
        peak = max(peak, level)
    return peak


def ten_thousand(workers: list[int], tmp: Path) -> None:
    n = 10_000
    args = ["--model", "llama-3.1-8b", "--dtype", "bf16", "--k", "3", "--alpha", "0.7"]
    args += ["--time-scale", "1", "--max-num-seqs", str(n), "--max-num-batched-tokens", "200000"]
    args += ["--prompt-len", "fixed:16", "--output-len", "fixed:16", "--log-stats-interval", "0"]
    print(
        f"{n:,} concurrent streams (closed loop of {n:,} users, 16 tokens each), twin at time-scale 1:"
    )
    with twin(*args) as url:
        for w in workers:
            t0 = time.perf_counter()
            recs = ours(url, n, n, w, tmp / f"s{w}")
            wall = time.perf_counter() - t0
            ok = sum(1 for r in recs if r["error_type"] is None)
            kinds: dict[str, int] = {}
            for r in recs:
                if r["error_type"] is not None:
                    kinds[r["error_type"]] = kinds.get(r["error_type"], 0) + 1
            print(
                f"  --workers {w}: {len(recs):,} records ({ok:,} completed, failures {kinds or 0}), "
                f"{n - len(recs)} lost, peak {peak_in_flight(recs):,} streams open at once, "
                f"{wall:.1f} s wall"
            )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--skip-10k", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        latency([1, args.workers], Path(tmp))
        if not args.skip_10k:
            ten_thousand([1, args.workers], Path(tmp))


if __name__ == "__main__":
    main()
