"""CLI start-up: ``alphagate model speedup --alpha 0.7 --k 5 --json``, end to end, as users run it.

A closed-form answer should be instant (goal: < 0.5 s wall). Reports the median of 7 runs of the
command and, as the reference in the same run, the median of ``python -c pass`` (the interpreter's
own start-up) and of ``python -c "import typer, numpy, pydantic"`` (the libraries the CLI needs).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

RUNS = 7


def _median_wall(argv: list[str]) -> float:
    times = []
    for _ in range(RUNS):
        t0 = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    py = sys.executable
    bare = _median_wall([py, "-c", "pass"])
    libs = _median_wall([py, "-c", "import typer, numpy, pydantic, rich.console"])
    cmd = _median_wall(
        [py, "-m", "alphagate", "model", "speedup", "--alpha", "0.7", "--k", "5", "--json"]
    )
    print(f"python -c pass                          {bare:6.3f} s  (reference)")
    print(f"import typer, numpy, pydantic, rich     {libs:6.3f} s  ×{libs / bare:4.1f}")
    print(
        f"alphagate model speedup … --json        {cmd:6.3f} s  ×{cmd / bare:4.1f}  (goal < 0.5 s)"
    )


if __name__ == "__main__":
    main()
