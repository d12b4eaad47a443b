"""Shared by the client benchmarks: a twin in its own process, a command's CPU over its whole
process tree, run on a pseudo-terminal (so that a live display draws as it does for a user), and
vLLM's own benchmark client from the real-engine tier's virtualenv."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import pty
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
VLLM_PYTHON = Path(os.environ.get("ALPHAGATE_VLLM_PYTHON", REPO / ".venv-vllm" / "bin" / "python"))
TINY_MODELS = Path.home() / ".cache" / "alphagate" / "tiny-models"
VLLM_LOCK = "/tmp/alphagate-vllm.lock"

#: vLLM's client as the real-engine tier runs it; prints the CPU of its main() (after imports)
VLLM_BENCH = """\
import json, resource, sys, time
from vllm.utils.argparse_utils import FlexibleArgumentParser
from vllm.benchmarks.serve import add_cli_args, main
p = FlexibleArgumentParser()
add_cli_args(p)
args = p.parse_args(sys.argv[1:])
r0 = resource.getrusage(resource.RUSAGE_SELF)
main(args)
r1 = resource.getrusage(resource.RUSAGE_SELF)
cpu = (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)
print("ALPHAGATE_CPU " + json.dumps({"main_cpu_s": cpu}), flush=True)
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def twin(*args: str) -> Iterator[str]:
    """``alphagate twin ARGS`` on a free port in its own process; yields its URL."""
    port = free_port()
    cmd = [sys.executable, "-m", "alphagate", "twin", "--port", str(port), *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(400):
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            time.sleep(0.05)
        else:
            raise RuntimeError("the twin did not start")
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait()


def twin_counter(url: str, name: str) -> float:
    """The sum of a counter on the twin's /metrics."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        text = r.read().decode()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name + "{") or line.startswith(name + " ")
    )


def twin_chunks(url: str) -> float:
    """Content chunks the twin has streamed: one per request (its first token) and one per
    decode step, which with K > 0 is one draft — the same count whichever client reads them."""
    return twin_counter(url, "vllm:request_success_total") + twin_counter(
        url, "vllm:spec_decode_num_drafts_total"
    )


_SUBREAPER = 36  # prctl(PR_SET_CHILD_SUBREAPER)


def _become_subreaper() -> bool:
    """Orphaned descendants (a multiprocessing forkserver and its workers) are reparented to this
    process, so their CPU time can be collected when they exit (Linux)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


SUBREAPER = _become_subreaper()


@dataclass(frozen=True)
class TreeRun:
    cpu_s: float  # user + system of the command and every descendant
    wall_s: float
    returncode: int
    output: str


def run_tree(argv: list[str], *, tty: bool = True, timeout_s: float = 1800.0) -> TreeRun:
    """Run ``argv`` to completion (on a pseudo-terminal when ``tty``) and return the CPU of its
    whole process tree. Every other child of this process must be running meanwhile."""
    before = os.times()
    t0 = time.perf_counter()
    out: list[bytes] = []
    if tty:
        master, slave = pty.openpty()
        env = {**os.environ, "COLUMNS": "100", "LINES": "40", "TERM": "xterm-256color"}
        proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env)
        os.close(slave)

        def drain() -> None:
            with contextlib.suppress(OSError):
                while chunk := os.read(master, 65536):
                    out.append(chunk)

        reader = threading.Thread(target=drain, daemon=True)
        reader.start()
        rc = proc.wait(timeout_s)
        reader.join(5)
        os.close(master)
    else:
        done = subprocess.run(argv, capture_output=True, timeout=timeout_s, check=False)
        rc = done.returncode
        out = [done.stdout, done.stderr]
    wall = time.perf_counter() - t0
    if SUBREAPER:  # the descendants that outlived the command
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                if not _orphans_left():
                    break
                time.sleep(0.02)
    after = os.times()
    cpu = (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )
    return TreeRun(cpu, wall, rc, b"".join(out).decode(errors="replace"))


def _orphans_left() -> bool:
    """Whether a reparented descendant (not a twin started by :func:`twin`) is still running."""
    me = str(os.getpid())
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if fields[1] == me and "twin" not in (stat.parent / "cmdline").read_text():
                return True
    return False


def tiny_tokenizer() -> Path | None:
    """The real-engine tier's tokenizer (vLLM's client needs one to make its prompts)."""
    found = sorted(TINY_MODELS.glob("*/tokenizer/tokenizer.json"))
    return found[0].parent if found else None


def vllm_client_argv(
    url: str, tokenizer: Path, requests: int, concurrency: int, in_len: int, out_len: int
) -> list[str]:
    return [
        "flock",
        VLLM_LOCK,
        str(VLLM_PYTHON),
        "-c",
        VLLM_BENCH,
        "--backend",
        "openai",
        "--base-url",
        url,
        "--endpoint",
        "/v1/completions",
        "--model",
        "alphagate-twin",
        "--tokenizer",
        str(tokenizer),
        "--dataset-name",
        "random",
        "--random-input-len",
        str(in_len),
        "--random-output-len",
        str(out_len),
        "--ignore-eos",
        "--num-prompts",
        str(requests),
        "--max-concurrency",
        str(concurrency),
        "--temperature",
        "0",
        "--seed",
        "0",
    ]


def vllm_main_cpu(output: str) -> float | None:
    m = re.search(r"ALPHAGATE_CPU (\{.*\})", output)
    return None if m is None else float(json.loads(m.group(1))["main_cpu_s"])


def read_records(path: Path) -> list[dict[str, Any]]:
    with path.open("rb") as fh:
        return [json.loads(line) for line in fh]
