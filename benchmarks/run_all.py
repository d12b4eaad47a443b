"""Run every ``benchmarks/bench_*.py`` in turn (``make bench``), or those named:
``python benchmarks/run_all.py bench_theory bench_startup``."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path


def main() -> int:
    here = Path(__file__).parent
    selected = sys.argv[1:]
    for path in sorted(here.glob("bench_*.py")):
        if selected and path.stem not in selected:
            continue
        print(f"\n=== {path.stem} ===", flush=True)
        sys.argv = [str(path)]  # each benchmark on its own defaults, not this script's arguments
        runpy.run_path(str(path), run_name="__main__")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
