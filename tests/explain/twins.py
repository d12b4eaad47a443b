"""Twins on 127.0.0.1 in processes of their own, started from the command line as users start
them (``alphagate twin …``), an A/B against them, and ``explain`` of it: what the injected-cause
tests share."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from tests.servers import free_port


def alphagate(
    *args: str, cwd: Path | None = None, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """``alphagate ARGS`` in its own process, as a user runs it."""
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "alphagate", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


@contextmanager
def twin(args: list[str], log: Path) -> Iterator[str]:
    """``alphagate twin ARGS`` on a free port until the block ends; yields its URL."""
    port = free_port()
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "alphagate", "twin", *args, "--port", str(port),
             "--log-stats-interval", "0"],
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(url + "/health", timeout=2):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"twin {args} did not start: {log.read_text()}") from None
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def bench(out: Path, dataset: Path, args: list[str], **urls: str) -> dict[str, Any]:
    """``alphagate bench`` against ``urls`` (baseline_url, candidate_url, or url); its summary."""
    flags = [x for k, v in urls.items() for x in (f"--{k.replace('_', '-')}", v)]
    r = alphagate("bench", *flags, "--dataset", str(dataset), *args, "--out", str(out),
                  "--no-progress", "--json")  # fmt: skip
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    summary: dict[str, Any] = json.loads(r.stdout)
    return summary


def ab(tmp: Path, base: list[str], cand: list[str], dataset: Path, args: list[str]) -> Path:
    """An A/B of two twins; the path of its summary."""
    with ExitStack() as stack:
        b = stack.enter_context(twin(base, tmp / "base.log"))
        c = stack.enter_context(twin(cand, tmp / "cand.log"))
        bench(tmp / "ab", dataset, args, baseline_url=b, candidate_url=c)
    return tmp / "ab" / "summary.json"


def explain(summary: Path, *args: str) -> dict[str, Any]:
    r = alphagate("explain", str(summary), *args, "--json")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    data: dict[str, Any] = json.loads(r.stdout)
    assert data["schema"] == "alphagate.results/v1" and data["verb"] == "explain"
    return data
