"""Coverage of the A/B intervals between alternated runs, on real twins over HTTP.

Two twins (Llama-3.1-8B BF16 on an H100, time scale 1: 6.3 ms decode steps; the candidate with
EAGLE-3 at K = 3, α = 0.7) serve M A/Bs of R alternated runs each. Every A/B's 95% intervals of
the throughput and TPOT ratios (``bench.ab``: Student's t on the pairs' log ratios) are checked
against the ratio over all M × R pairs (the best estimate of the true ratio here: the twins' step
times are fixed, what moves is the machine). Prints the share of A/Bs whose interval covers it,
with its binomial standard error, and the intervals' widths.

    python benchmarks/ab_coverage.py [--ab 30] [--repeats 5] [--requests 16]

Not part of ``make bench`` (it is a statistical check, minutes long): the number it prints is
the closing figure of the rollout issue's point 2. The within-run interval of one run per side is
shown beside it for contrast: on equal requests it has no width.
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
import time
import urllib.request

import numpy as np

from alphagate.bench.ab import ab_value
from alphagate.bench.config import BenchConfig, Level
from alphagate.bench.dataset import load_prompts
from alphagate.bench.run import run_bench
from alphagate.theory.intervals import ratio_interval


def _twin(port: int, k: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "alphagate", "twin", "--model", "llama-3.1-8b", "--k", str(k),
         "--alpha", "0.7", "--port", str(port), "--log-stats-interval", "0", "--time-scale", "1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip


def _wait(url: str) -> None:
    for _ in range(200):
        try:
            urllib.request.urlopen(url + "/health", timeout=1)
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not start")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ab", type=int, default=30, help="A/Bs (each R alternated runs per side)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--requests", type=int, default=16, help="requests per run")
    ap.add_argument("--port", type=int, default=18601)
    args = ap.parse_args()
    procs = [_twin(args.port, 0), _twin(args.port + 1, 3)]
    base, cand = f"http://127.0.0.1:{args.port}", f"http://127.0.0.1:{args.port + 1}"
    try:
        _wait(base)
        _wait(cand)
        prompts, _ = load_prompts("synthetic:in=32,out=32", args.requests, seed=0)
        cfg = BenchConfig(
            targets=(("baseline", base), ("candidate", cand)),
            levels=(Level(label="c4", concurrency=4),),
            num_prompts=args.requests,
            repeats=args.repeats,
            scrape_metrics=False,
        )
        results = {"throughput_speedup": [], "tpot_speedup": []}  # type: ignore[var-annotated]
        pairs = {"throughput_speedup": [], "tpot_speedup": []}  # type: ignore[var-annotated]
        single_widths = []
        t0 = time.perf_counter()
        for i in range(args.ab):
            recs: list = []  # type: ignore[type-arg]
            run_bench(cfg, prompts, run_id=f"ab{i}", sink=recs.append)
            b = [r for r in recs if r.target == "baseline"]
            c = [r for r in recs if r.target == "candidate"]
            for metric in results:
                v = ab_value(metric, b, c)
                assert v.interval is not None and v.value is not None
                results[metric].append((v.value, v.interval.low, v.interval.high))
                for r in range(args.repeats):
                    one = ab_value(
                        metric, [x for x in b if x.repeat == r], [x for x in c if x.repeat == r]
                    )
                    if one.value is not None:
                        pairs[metric].append(one.value)
            first = ab_value(
                "throughput_speedup",
                [x for x in b if x.repeat == 0],
                [x for x in c if x.repeat == 0],
            )
            if first.interval is not None:
                single_widths.append(first.interval.high - first.interval.low)
        print(f"{args.ab} A/Bs × {args.repeats} alternated runs × {args.requests} requests at c4, "
              f"{time.perf_counter() - t0:.0f} s")  # fmt: skip
        for metric, rows in results.items():
            truth, _, _ = ratio_interval(pairs[metric])
            covered = sum(lo <= truth <= hi for _, lo, hi in rows)
            share = covered / len(rows)
            se = math.sqrt(0.95 * 0.05 / len(rows))
            widths = np.asarray([hi - lo for _, lo, hi in rows])
            print(
                f"{metric}: ratio over all pairs {truth:.3f}; covered by {covered}/{len(rows)} "
                f"intervals ({share:.0%}; nominal 95% ± {se:.0%} s.e.); width median "
                f"{np.median(widths):.3f} (min {widths.min():.3f})"
            )
        print(
            "one run per side, within-run interval (requests resampled): width median "
            f"{np.median(single_widths):.4f} on equal requests"
        )
    finally:
        for p in procs:
            p.terminate()
            p.wait(10)


if __name__ == "__main__":
    main()
