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
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
VLLM_PYTHON = Path(os.environ.get("ALPHAGATE_VLLM_PYTHON", REPO / ".venv-vllm" / "bin" / "python"))
MODEL_CACHE = (
    Path(os.environ.get("ALPHAGATE_CACHE", Path.home() / ".cache" / "alphagate")) / "tiny-models"
)
#: the tier's measured figures, for the record
REPORT = REPO / ".cache" / "real-engine" / "report.json"
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


def report(key: str, value: object) -> None:
    """Keep a measured figure under ``key`` in :data:`REPORT` (the tier runs in one process)."""
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    data = json.loads(REPORT.read_text()) if REPORT.exists() else {}
    data[key] = value
    REPORT.write_text(json.dumps(data, indent=2))


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


#: on every vLLM process's PYTHONPATH: the CPU build's fallback of Triton's ``expand_kernel``
#: drops float outputs, which breaks speculative decoding at temperature > 0 (the offline tier's
#: sampled check; see ``vllm_cpu_fix/sitecustomize.py``). Greedy decoding, what every other test
#: runs, never calls it; the servers are shared between files, so all of them carry the fix.
FIX = Path(__file__).parent / "vllm_cpu_fix"


#: a server's model runs in its engine-core process (the uniprocess executor) instead of a worker
#: process of its own: vLLM's CPU platform keeps the ``uni`` backend only where
#: ``VLLM_ENABLE_V1_MULTIPROCESSING`` is 0 (``vllm/platforms/cpu.py``; it would otherwise switch to
#: ``mp`` to bind OpenMP threads), and the OpenAI server runs its engine core in a process of its
#: own either way (``AsyncLLM`` always makes the multiprocess client). One process fewer to
#: import torch and vLLM: a tiny model's server is up in about 22 s instead of 43–51 s here.
#: One OpenMP thread too: the engine core sets torch's threads to one for serving
#: (``vllm/utils/torch_utils.py``) and binds none, and an OpenMP region that still asks for two
#: spins on a core the API server and the client need (see :func:`pinned`).
IN_PROCESS_WORKER = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "OMP_NUM_THREADS": "1"}
IN_PROCESS_ARGS = ("--distributed-executor-backend", "uni")


def _env(server: bool = False) -> dict[str, str]:
    """The environment of a process from the vLLM venv; ``server``: a server's (or a sweep's,
    which starts servers), with :data:`IN_PROCESS_WORKER`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    old = env.get("PYTHONPATH")
    env["PYTHONPATH"] = str(FIX) + (os.pathsep + old if old else "")
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
    if server:
        env.update(IN_PROCESS_WORKER)
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
    label: str = ""  # for the log file's name (default: the served name)


def _command(model: Path, port: int, server: ServerSpec) -> list[str]:
    cmd = [
        str(VLLM_PYTHON), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
        "--host", "127.0.0.1", "--port", str(port), "--served-model-name", server.name,
        "--dtype", "bfloat16", "--max-model-len", "1024", "--max-num-seqs", "8",
        "--enforce-eager", "--seed", "0", *IN_PROCESS_ARGS,
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


def _start(
    model: Path, servers: list[ServerSpec], logdir: Path, timeout_s: float | None
) -> list[VllmServer]:
    """Launch ``servers`` together and wait until each answers /health (by default ``START_S``
    for the first and ``START_MORE_S`` for each other one: the starts share the cores, and a
    loaded machine took over 300 s to start five at once). On failure every one is stopped."""
    if timeout_s is None:
        timeout_s = START_S + START_MORE_S * (len(servers) - 1)
    started: list[VllmServer] = []
    try:
        for server in servers:
            port = free_port()
            log = logdir / f"vllm-{server.label or server.name}-{port}.log"
            with log.open("wb") as fh:  # the child keeps its own descriptor
                proc = subprocess.Popen(
                    _command(model, port, server),
                    stdout=fh,
                    stderr=subprocess.STDOUT,
                    env=_env(server=True),
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
    except BaseException:
        for srv in started:
            _stop(srv)
        raise
    return started


def _quiet(server: VllmServer, quiet_s: float = 3.0, limit_s: float = 30.0) -> None:
    """Wait until ``server``'s log has not grown for ``quiet_s`` (vLLM prints its stats every
    ``VLLM_LOG_STATS_INTERVAL`` = 2 s while it has work): the last lines about the previous
    test's requests are written before the next test takes its offset."""
    size, since, end = server.log_offset(), time.monotonic(), time.monotonic() + limit_s
    while time.monotonic() - since < quiet_s and time.monotonic() < end:
        time.sleep(0.5)
        now = server.log_offset()
        if now != size:
            size, since = now, time.monotonic()


Key = tuple[str, str, str, tuple[str, ...]]


class ServerPool:
    """The servers the tier's tests share, started on first use and kept until the session ends.

    A vLLM CPU server takes 20–40 s to start on two cores, and the tests ask for the same few
    configurations again and again (the baseline, the n-gram, draft-model and EAGLE-3 servers,
    each in several files). A server is keyed by its model, served name, speculative config and
    flags. At most ``keep`` run at once: the one used longest ago is stopped to make room, also
    for a test's own servers (:func:`vllm_servers`). Counters and logs are shared, so the tests
    read deltas — a scrape before and after, the log from an offset — and a server is handed
    out only once its log is quiet. Tests that need a server of their own (fresh counters, a
    flag no other test uses) start it with :func:`vllm_server`.
    """

    def __init__(self, keep: int = 6) -> None:
        self.keep = keep
        self._running: dict[Key, VllmServer] = {}
        self._used: dict[Key, float] = {}

    @staticmethod
    def _key(model: Path, server: ServerSpec) -> Key:
        spec = json.dumps(server.spec, sort_keys=True)
        return str(model), server.name, spec, server.extra_args

    def make_room(self, n: int, spare: frozenset[Key] = frozenset()) -> None:
        """Stop the servers used longest ago (never those in ``spare``) until ``n`` more fit."""
        for key in sorted(self._running, key=lambda k: self._used[k]):
            if len(self._running) + n <= self.keep:
                break
            if key not in spare:
                _stop(self._running.pop(key))

    def get(self, model: Path, servers: list[ServerSpec], logdir: Path) -> list[VllmServer]:
        """``servers``, each running: those already up once quiet, the others started together."""
        keys = [self._key(model, s) for s in servers]
        for key in keys:  # a server that died since its last test is started again
            srv = self._running.get(key)
            if srv is not None and srv.proc.poll() is not None:
                del self._running[key]
        missing = [(k, s) for k, s in zip(keys, servers, strict=True) if k not in self._running]
        missing = list(dict(missing).items())
        self.make_room(len(missing), spare=frozenset(keys))
        for key in keys:
            if key in self._running:
                _quiet(self._running[key])
        if missing:
            started = _start(model, [s for _, s in missing], logdir, None)
            self._running.update(zip([k for k, _ in missing], started, strict=True))
        now = time.monotonic()
        for key in keys:
            self._used[key] = now
        return [self._running[k] for k in keys]

    def stop(self, model: Path, *servers: ServerSpec) -> None:
        """Stop ``servers`` now: a test's own configurations that no other test asks for."""
        for key in (self._key(model, s) for s in servers):
            if key in self._running:
                _stop(self._running.pop(key))

    def close(self) -> None:
        for srv in self._running.values():
            _stop(srv)
        self._running.clear()


def _tree(pid: int) -> list[int]:
    """``pid`` and every process below it (from ``/proc``'s parent links)."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:  # gone since listed
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            parents.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += parents.get(p, [])
    return out


def _set_affinity(pid: int, cpus: set[int]) -> None:
    """Every thread of ``pid`` on ``cpus`` (threads started later inherit their starter's)."""
    try:
        tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return
    for tid in tids:
        with suppress(OSError):  # a thread that ended since listed
            os.sched_setaffinity(tid, cpus)


@contextmanager
def pinned(servers: list[VllmServer]) -> Iterator[int]:
    """While a test measures ``servers`` one at a time: every engine-core process on a core of
    its own, the API servers and this process on the others, as vLLM's CPU guide reserves
    cores for the frontend (``VLLM_CPU_NUM_OF_RESERVED_CPU``). Unpinned, three busy processes
    (engine core, API server, client) share two cores, and which two share one changes from one
    level to the next: a round's speedup moved from the median of its cell's rounds by 6–8%
    (median absolute deviation), pinned by 2–3%. The servers run with ``OMP_NUM_THREADS=1``
    (:data:`IN_PROCESS_WORKER`): vLLM sets torch's threads to one for serving, but an OpenMP
    region that still asked for two spun on its one core (a long prompt's decode step took
    17 ms instead of 7). Everything goes back to every core on exit. Yields the engine cores
    pinned (none on a machine of one core)."""
    allowed = os.sched_getaffinity(0)
    if len(allowed) < 2:
        yield 0
        return
    engine = {max(allowed)}
    frontend = allowed - engine
    trees = [_tree(srv.proc.pid) for srv in servers]
    engines = 0
    for pids in trees:
        for pid in pids:
            try:  # vLLM titles it VLLM::EngineCore (setproctitle)
                title = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            core = b"EngineCore" in title
            engines += core
            _set_affinity(pid, engine if core else frontend)
    me = os.sched_getaffinity(0)
    os.sched_setaffinity(0, frontend)
    try:
        yield engines
    finally:
        os.sched_setaffinity(0, me)
        for pids in trees:
            for pid in pids:
                _set_affinity(pid, allowed)


def pooled(model: Path, logdir: Path, *servers: ServerSpec) -> list[VllmServer]:
    """``servers`` from the tier's pool (:class:`ServerPool`), started there where not yet up."""
    return POOL.get(model, list(servers), logdir)


def spec_configs(tiny: Any) -> dict[str, dict[str, object]]:
    """The speculative configs the tier's files share (so that they share the servers too)."""
    eagle3 = {"method": "eagle3", "model": str(tiny.eagle3), "num_speculative_tokens": 3}
    return {
        "ngram": {"method": "ngram", "num_speculative_tokens": 4,
                  "prompt_lookup_max": 4, "prompt_lookup_min": 2},
        "draft": {"method": "draft_model", "model": str(tiny.draft), "num_speculative_tokens": 3},
        "eagle3": eagle3,
        "eagle3-untrained": {**eagle3, "model": str(tiny.eagle3_untrained)},
    }  # fmt: skip


#: the tier's one pool (``conftest._stop_the_pool`` closes it at the end of the session)
POOL = ServerPool()


@contextmanager
def vllm_servers(
    model: Path, servers: list[ServerSpec], logdir: Path, timeout_s: float | None = None
) -> Iterator[list[VllmServer]]:
    """vLLM OpenAI servers of the test's own for ``model``, launched together and always stopped
    on exit; each logs to its own file in ``logdir``. (Started together they are not up much
    sooner than one after another: their imports share the two cores.) The pool's servers used
    longest ago stop to make room."""
    POOL.make_room(len(servers))
    started = _start(model, servers, logdir, timeout_s)
    try:
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
