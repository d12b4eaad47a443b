"""Start and stop the real vLLM CPU build on 127.0.0.1 with the tiny locally built models."""

from __future__ import annotations

import json
import math
import os
import re
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
VLLM_PYTHON = Path(os.environ.get("ALPHAGATE_VLLM_PYTHON", REPO / ".venv-vllm" / "bin" / "python"))
MODEL_CACHE = (
    Path(os.environ.get("ALPHAGATE_CACHE", Path.home() / ".cache" / "alphagate")) / "tiny-models"
)
SPEC_LINE = re.compile(
    r"SpecDecoding metrics: Mean acceptance length: ([\d.]+).*?Accepted: (\d+) tokens, Drafted: (\d+) tokens"
)


def counts_agree(predicted: dict[str, Any], served: dict[str, Any]) -> bool:
    """The offline replay's counters against vLLM's, under bf16: ties in the logits may flip a
    token, and the rest of that request is then drawn again. Accepted tokens agree within 2%,
    each position's count within 3%, or either within one Poisson standard deviation (√count)
    where the count is small — a position-2 count of 65 moves by 5, and a total of 139 by 3, when
    one request's tail is redrawn.
    """
    p, v = predicted, served
    if abs(p["accepted"] - v["accepted"]) > max(0.02 * v["accepted"], math.sqrt(v["accepted"]), 2):
        return False
    return all(
        abs(a - b) <= max(0.03 * b, math.sqrt(b), 2)
        for a, b in zip(p["per_pos"], v["per_pos"], strict=True)
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class VllmServer:
    url: str
    name: str
    log: Path
    proc: subprocess.Popen[bytes]

    def log_offset(self) -> int:
        return self.log.stat().st_size

    def spec_log_totals(self, since: int) -> tuple[int, int, int]:
        """(lines, accepted, drafted) summed over SpecDecoding log lines written after ``since``."""
        with self.log.open("rb") as fh:
            fh.seek(since)
            text = fh.read().decode("utf-8", "replace")
        lines = SPEC_LINE.findall(text)
        return len(lines), sum(int(a) for _, a, _ in lines), sum(int(d) for _, _, d in lines)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    cache = REPO / ".cache" / "vllm"
    cache.mkdir(parents=True, exist_ok=True)
    env.update(
        VLLM_CPU_KVCACHE_SPACE="1",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        VLLM_NO_USAGE_STATS="1",
        VLLM_CACHE_ROOT=str(cache),
        VLLM_LOGGING_LEVEL="INFO",
        VLLM_LOG_STATS_INTERVAL="2",
    )
    iomp = VLLM_PYTHON.parent.parent / "lib" / "libiomp5.so"
    if iomp.exists():
        env["LD_PRELOAD"] = str(iomp)
    return env


@dataclass(frozen=True)
class ServerSpec:
    """One vLLM server to start: its served name, speculative config and extra flags."""

    name: str
    spec: dict[str, object] | None = None
    extra_args: tuple[str, ...] = ()


def _command(model: Path, port: int, server: ServerSpec) -> list[str]:
    cmd = [
        str(VLLM_PYTHON), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
        "--host", "127.0.0.1", "--port", str(port), "--served-model-name", server.name,
        "--dtype", "bfloat16", "--max-model-len", "1024", "--max-num-seqs", "8",
        "--enforce-eager", "--seed", "0",
    ]  # fmt: skip
    if server.spec is not None:
        cmd += ["--speculative-config", json.dumps(server.spec)]
    return cmd + list(server.extra_args)


def _healthy(server: VllmServer) -> bool:
    """True once the server answers /health; raises if it exited."""
    if server.proc.poll() is not None:
        raise RuntimeError(
            f"vLLM ({server.name}) exited with {server.proc.returncode}; see {server.log}:\n"
            f"{server.log.read_text()[-3000:]}"
        )
    try:
        with urllib.request.urlopen(server.url + "/health", timeout=2) as r:
            return bool(r.status == 200)
    except OSError:
        return False


def _stop(server: VllmServer) -> None:
    server.proc.terminate()
    try:
        server.proc.wait(30)
    except subprocess.TimeoutExpired:
        server.proc.kill()
        server.proc.wait(10)


#: seconds for one vLLM server to start on two cores, and for each more started beside it
START_S = 300.0
START_MORE_S = 150.0


@contextmanager
def vllm_servers(
    model: Path, servers: list[ServerSpec], logdir: Path, timeout_s: float | None = None
) -> Iterator[list[VllmServer]]:
    """vLLM OpenAI servers for ``model``, launched together and always stopped on exit; each
    logs to its own file in ``logdir``. (Started together they are not up sooner than one after
    another on two cores: each worker binds to the same core, ``VLLM_CPU_OMP_THREADS_BIND``.)
    They have ``timeout_s`` to answer /health, by default ``START_S`` for the first and
    ``START_MORE_S`` for each other one: the starts share the cores, and a loaded machine took
    over 300 s to start five at once."""
    if timeout_s is None:
        timeout_s = START_S + START_MORE_S * (len(servers) - 1)
    started: list[VllmServer] = []
    try:
        for server in servers:
            port = free_port()
            log = logdir / f"vllm-{server.name}-{port}.log"
            with log.open("wb") as fh:  # the child keeps its own descriptor
                proc = subprocess.Popen(
                    _command(model, port, server), stdout=fh, stderr=subprocess.STDOUT, env=_env()
                )
            started.append(VllmServer(f"http://127.0.0.1:{port}", server.name, log, proc))
        deadline = time.monotonic() + timeout_s
        waiting = list(started)
        while waiting:
            waiting = [s for s in waiting if not _healthy(s)]
            if waiting and time.monotonic() > deadline:
                names = ", ".join(f"{s.name} ({s.log})" for s in waiting)
                raise RuntimeError(f"vLLM not healthy after {timeout_s:.0f} s: {names}")
            if waiting:
                time.sleep(1.0)
        yield started
    finally:
        for srv in started:
            _stop(srv)


@contextmanager
def vllm_server(
    model: Path,
    name: str,
    spec: dict[str, object] | None,
    logdir: Path,
    timeout_s: float | None = None,
    extra_args: tuple[str, ...] = (),
) -> Iterator[VllmServer]:
    """A vLLM OpenAI server for ``model`` (optionally speculative); always stopped on exit."""
    with vllm_servers(model, [ServerSpec(name, spec, extra_args)], logdir, timeout_s) as (srv,):
        yield srv


VLLM_BENCH = (
    "import sys\n"
    "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
    "from vllm.benchmarks.serve import add_cli_args, main\n"
    "p = FlexibleArgumentParser()\n"
    "add_cli_args(p)\n"
    "main(p.parse_args(sys.argv[1:]))\n"
)


def vllm_bench_command(
    url: str,
    model: str,
    tokenizer: Path,
    dataset: Path,
    *,
    prompts: int,
    concurrency: int,
    output_len: int,
) -> list[str]:
    """``vllm bench serve`` from the vLLM venv over ``dataset`` (greedy, ``ignore_eos``), without
    the flags that save its result (``vllm bench sweep serve`` adds its own)."""
    return [
        str(VLLM_PYTHON), "-c", VLLM_BENCH, "--backend", "openai", "--base-url", url,
        "--endpoint", "/v1/completions", "--model", model, "--tokenizer", str(tokenizer),
        "--dataset-name", "custom", "--dataset-path", str(dataset), "--skip-chat-template",
        "--custom-output-len", str(output_len), "--ignore-eos", "--num-prompts", str(prompts),
        "--max-concurrency", str(concurrency), "--temperature", "0", "--seed", "0",
        "--metric-percentiles", "50,99",
    ]  # fmt: skip


def run_vllm_bench(
    url: str,
    model: str,
    tokenizer: Path,
    dataset: Path,
    out: Path,
    *,
    prompts: int,
    concurrency: int,
    output_len: int,
) -> dict[str, object]:
    """vLLM's own benchmark client (``vllm bench serve``) from the vLLM venv; returns its result JSON."""
    out.mkdir(parents=True, exist_ok=True)
    cmd = vllm_bench_command(
        url, model, tokenizer, dataset,
        prompts=prompts, concurrency=concurrency, output_len=output_len,
    )  # fmt: skip
    cmd += [
        "--save-result", "--result-dir", str(out), "--result-filename", "vllm-bench.json",
        "--percentile-metrics", "ttft,tpot,itl,e2el",
    ]  # fmt: skip
    log = out / "vllm-bench.log"
    with log.open("wb") as fh:
        proc = subprocess.run(
            cmd,
            stdout=fh,
            stderr=subprocess.STDOUT,
            env=_env(),
            timeout=900,
        )
    if proc.returncode != 0:
        raise RuntimeError(
            f"vllm bench serve failed ({proc.returncode}); see {log}:\n{log.read_text()[-3000:]}"
        )
    return json.loads((out / "vllm-bench.json").read_text())  # type: ignore[no-any-return]
