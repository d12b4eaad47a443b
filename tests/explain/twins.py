"""Twins on 127.0.0.1 in processes of their own, started from the command line as users start
them (``alphagate twin …``), an A/B against them, and ``explain`` of it: what the injected-cause
tests share. The bench and ``explain`` run in the test's process (the CLI as invoked), which
saves an interpreter's start per call; the twins, which serve, have processes of their own."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.conftest import Cli
from tests.servers import free_port


def _started(proc: subprocess.Popen[bytes], url: str, log: Path, deadline: float) -> None:
    while True:
        try:
            with urllib.request.urlopen(url + "/health", timeout=2):
                return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"twin did not start: {log.read_text()}") from None
            time.sleep(0.05)


@contextmanager
def twins(*runs: tuple[list[str], Path]) -> Iterator[list[str]]:
    """``alphagate twin ARGS`` for each (ARGS, log) on free ports, all started at once, until
    the block ends; yields their URLs."""
    procs, urls = [], []
    try:
        for args, log in runs:
            port = free_port()
            cmd = [sys.executable, "-m", "alphagate", "twin", *args, "--port", str(port)]
            with log.open("wb") as out:
                procs.append(
                    subprocess.Popen(
                        [*cmd, "--log-stats-interval", "0"], stdout=out, stderr=subprocess.STDOUT
                    )
                )
            urls.append(f"http://127.0.0.1:{port}")
        deadline = time.monotonic() + 60
        for proc, url, (_, log) in zip(procs, urls, runs, strict=True):
            _started(proc, url, log, deadline)
        yield urls
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def bench(out: Path, dataset: Path, args: list[str], **urls: str) -> dict[str, Any]:
    """``alphagate bench`` against ``urls`` (baseline_url, candidate_url, or url); its summary."""
    flags = [x for k, v in urls.items() for x in (f"--{k.replace('_', '-')}", v)]
    return Cli().json(
        "bench", *flags, "--dataset", str(dataset), *args, "--out", str(out), "--no-progress"
    )


def explain(summary: Path, *args: str) -> dict[str, Any]:
    data = Cli().json("explain", str(summary), *args)
    assert data["verb"] == "explain"
    return data


def explain_text(summary: Path, *args: str) -> str:
    """What ``explain`` prints for people."""
    r = Cli().run("explain", str(summary), *args)
    assert r.exit_code == 0, r.output
    return str(r.output)
