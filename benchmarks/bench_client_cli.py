"""The load generator as users run it: ``alphagate bench`` end to end, with its live display on a
terminal, against vLLM's own client (``vllm.benchmarks.serve`` from ``.venv-vllm``, the
reference) on the same twin in the same run.

The twin (time-scale 0, K = 3, α = 0.7, 64 output tokens) runs in its own process; the two
clients alternate, 2,000 and then 20,000 requests × 64 tokens at concurrency 256. The figure is
content chunks ingested per client CPU-second: chunks counted on the twin's side (one per request
plus one per draft, so both clients are counted the same way), CPU over the client's whole
process tree. Ours is charged everything — interpreter start-up, imports, the display, writing
requests.jsonl and the summary; vLLM's is charged only its ``main()`` after its imports (its
whole process, imports included, is printed beside it). Goal: ≥ 1.5× the reference at both sizes.

``python benchmarks/bench_client_cli.py [REQUESTS ...] [--runs R] [--workers N]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _clients import (
    VLLM_PYTHON,
    run_tree,
    tiny_tokenizer,
    twin,
    twin_chunks,
    vllm_client_argv,
    vllm_main_cpu,
)

CONCURRENCY, IN_LEN, OUT_LEN = 256, 16, 64


def ours(url: str, requests: int, workers: int, out: Path) -> tuple[float, float, float]:
    """(chunks, CPU s, wall s) of one ``alphagate bench`` run."""
    before = twin_chunks(url)
    argv = [
        sys.executable,
        "-m",
        "alphagate",
        "bench",
        "--url",
        url,
        "-n",
        str(requests),
        "-c",
        str(CONCURRENCY),
        "--dataset",
        f"synthetic:in={IN_LEN},out={OUT_LEN}",
        "--no-metrics",
        "--workers",
        str(workers),
        "--out",
        str(out),
    ]
    run = run_tree(argv)
    if run.returncode != 0:
        raise RuntimeError(f"alphagate bench exited {run.returncode}:\n{run.output[-3000:]}")
    return twin_chunks(url) - before, run.cpu_s, run.wall_s


def vllm(url: str, requests: int, tokenizer: Path) -> tuple[float, float, float, float]:
    """(chunks, main() CPU s, whole-process CPU s, wall s) of one run of vLLM's client."""
    before = twin_chunks(url)
    argv = vllm_client_argv(url, tokenizer, requests, CONCURRENCY, IN_LEN, OUT_LEN)
    run = run_tree(argv, tty=False)
    main_cpu = vllm_main_cpu(run.output)
    if run.returncode != 0 or main_cpu is None:
        raise RuntimeError(f"vLLM's client exited {run.returncode}:\n{run.output[-3000:]}")
    return twin_chunks(url) - before, main_cpu, run.cpu_s, run.wall_s


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("requests", nargs="*", type=int, default=[2000, 20000])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--workers", type=int, default=1)
    args = ap.parse_args()
    tokenizer = tiny_tokenizer()
    if not VLLM_PYTHON.exists() or tokenizer is None:
        print("skipped: needs .venv-vllm and the tiny tokenizer (make test-vllm installs both)")
        return
    twin_args = ["--k", "3", "--alpha", "0.7", "--time-scale", "0", "--max-num-seqs", "512"]
    twin_args += ["--output-len", f"fixed:{OUT_LEN}", "--log-stats-interval", "0"]
    print(
        f"time-scale 0 twin, concurrency {CONCURRENCY}, {OUT_LEN} tokens per request; chunks per "
        f"client CPU-second, median of {args.runs} alternated runs (min–max)"
    )
    with twin(*twin_args) as url, tempfile.TemporaryDirectory() as tmp:
        for n in args.requests:
            ref, ref_all, mine = [], [], []
            walls: dict[str, list[float]] = {"ours": [], "vllm": []}
            for r in range(args.runs):
                c, cpu, whole, wall = vllm(url, n, tokenizer)
                ref.append(c / cpu)
                ref_all.append(c / whole)
                walls["vllm"].append(wall)
                c, cpu, wall = ours(url, n, args.workers, Path(tmp) / f"o{n}-{r}")
                mine.append(c / cpu)
                walls["ours"].append(wall)
            m_ref, m_mine = statistics.median(ref), statistics.median(mine)
            print(f"{n:,} requests:")
            print(
                f"  vLLM client, main() only   {m_ref:9,.0f}  ({min(ref):,.0f}–{max(ref):,.0f})"
                f"   wall {statistics.median(walls['vllm']):5.1f} s   (reference)"
            )
            print(f"  vLLM client, whole process {statistics.median(ref_all):9,.0f}")
            print(
                f"  alphagate bench --workers {args.workers} {m_mine:9,.0f}  "
                f"({min(mine):,.0f}–{max(mine):,.0f})   wall "
                f"{statistics.median(walls['ours']):5.1f} s   ratio {m_mine / m_ref:.2f}× "
                f"(min–max {min(mine) / max(ref):.2f}–{max(mine) / min(ref):.2f}×; goal ≥ 1.5×)"
            )


if __name__ == "__main__":
    main()
