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
    token, and the rest of that request is then drawn again. Accepted tokens agree within 2%;
    each position's count within 3%, or within one Poisson standard deviation (√count) where the
    count is small — a position-2 count of 65 moves by 5 when one request's tail is redrawn.
    """
    p, v = predicted, served
    if abs(p["accepted"] - v["accepted"]) > max(0.02 * v["accepted"], 2):
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


@contextmanager
def vllm_server(
    model: Path,
    name: str,
    spec: dict[str, object] | None,
    logdir: Path,
    timeout_s: float = 300.0,
    extra_args: tuple[str, ...] = (),
) -> Iterator[VllmServer]:
    """A vLLM OpenAI server for ``model`` (optionally speculative); always stopped on exit."""
    port = free_port()
    cmd = [
        str(VLLM_PYTHON),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(model),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--served-model-name",
        name,
        "--dtype",
        "bfloat16",
        "--max-model-len",
        "1024",
        "--max-num-seqs",
        "8",
        "--enforce-eager",
        "--seed",
        "0",
    ]
    if spec is not None:
        cmd += ["--speculative-config", json.dumps(spec)]
    cmd += list(extra_args)
    log = logdir / f"vllm-{name}.log"
    fh = log.open("wb")
    proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=_env())
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"vLLM ({name}) exited with {proc.returncode}; see {log}:\n{log.read_text()[-3000:]}"
                )
            try:
                with urllib.request.urlopen(url + "/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"vLLM ({name}) not healthy after {timeout_s:.0f} s; see {log}")
            time.sleep(1.0)
        yield VllmServer(url, name, log, proc)
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        fh.close()


VLLM_BENCH = (
    "import sys\n"
    "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
    "from vllm.benchmarks.serve import add_cli_args, main\n"
    "p = FlexibleArgumentParser()\n"
    "add_cli_args(p)\n"
    "main(p.parse_args(sys.argv[1:]))\n"
)


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
    args = [
        "--backend",
        "openai",
        "--base-url",
        url,
        "--endpoint",
        "/v1/completions",
        "--model",
        model,
        "--tokenizer",
        str(tokenizer),
        "--dataset-name",
        "custom",
        "--dataset-path",
        str(dataset),
        "--skip-chat-template",
        "--custom-output-len",
        str(output_len),
        "--ignore-eos",
        "--num-prompts",
        str(prompts),
        "--max-concurrency",
        str(concurrency),
        "--temperature",
        "0",
        "--seed",
        "0",
        "--save-result",
        "--result-dir",
        str(out),
        "--result-filename",
        "vllm-bench.json",
        "--percentile-metrics",
        "ttft,tpot,itl,e2el",
        "--metric-percentiles",
        "50,99",
    ]
    log = out / "vllm-bench.log"
    with log.open("wb") as fh:
        proc = subprocess.run(
            [str(VLLM_PYTHON), "-c", VLLM_BENCH, *args],
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
