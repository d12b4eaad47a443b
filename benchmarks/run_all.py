"""Run every ``benchmarks/bench_*.py`` in turn (``make bench``), or those named
(``python benchmarks/run_all.py bench_theory bench_startup``), and write what they printed to
``benchmarks/RESULTS.md``, stamped with the date, the commit, the machine (cores, memory, CPU
model) and its load average when each benchmark started.

Each benchmark runs in its own process and prints its figures as ratios against a reference it
runs in the same process, so that they mean the same on another machine; the stamp says where
the absolute figures beside them were taken. A named subset prints only, unless ``--out`` is
given: ``RESULTS.md`` always holds one whole run.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


def _git(*args: str) -> str:
    try:
        out = subprocess.run(
            ["git", *args], cwd=REPO, capture_output=True, text=True, check=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip()


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _memory_gib() -> str:
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return "unknown"
    return f"{pages * size / 2**30:.0f} GiB"


def _load() -> str:
    try:
        return ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


def machine() -> list[str]:
    dirty = (
        " (with uncommitted changes)"
        if _git("status", "--porcelain", "--untracked-files=no")
        else ""
    )
    return [
        f"- date: {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M UTC}",
        f"- commit: `{_git('rev-parse', '--short=12', 'HEAD')}`{dirty}",
        f"- machine: {os.cpu_count()} cores ({_cpu_model()}), {_memory_gib()} memory, "
        f"{platform.system()} {platform.release()}, Python {platform.python_version()}",
        f"- load average (1, 5, 15 min) at the start: {_load()}",
    ]


def run_one(path: Path) -> tuple[int, float, str, str]:
    """(exit code, wall seconds, load average at the start, output) of one benchmark; its
    output is echoed as it comes."""
    load = _load()
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, str(path)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        sys.stdout.write(line)
        lines.append(line)
    code = proc.wait()
    return code, time.perf_counter() - t0, load, "".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*", help="benchmarks to run (file stems); default: all")
    ap.add_argument(
        "--out", type=Path, help="where to write the results (default: all → RESULTS.md)"
    )
    args = ap.parse_args(argv)
    paths = [p for p in sorted(HERE.glob("bench_*.py")) if not args.names or p.stem in args.names]
    unknown = set(args.names) - {p.stem for p in paths}
    if unknown:
        ap.error(f"no benchmark named {', '.join(sorted(unknown))}")
    out = args.out or (None if args.names else HERE / "RESULTS.md")
    sections = []
    failed = []
    for path in paths:
        print(f"\n=== {path.stem} ===", flush=True)
        code, wall, load, text = run_one(path)
        if code:
            failed.append(path.stem)
        status = "" if code == 0 else f", **exit {code}**"
        sections += [
            f"## {path.stem}",
            "",
            f"`python benchmarks/{path.name}` — {wall:.0f} s wall, load average {load} at its "
            f"start{status}",
            "",
            "```text",
            text.rstrip(),
            "```",
            "",
        ]
    if out is not None:
        head = [
            "# Benchmark results",
            "",
            "Written by `make bench` (`python benchmarks/run_all.py`); each section is one "
            "benchmark's output. Figures are ratios against a reference run in the same process "
            "unless they name their unit; absolute figures hold for the machine below only.",
            "",
            *machine(),
            "",
        ]
        out.write_text("\n".join(head + sections), encoding="utf-8")
        print(f"\nresults written to {out}")
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
