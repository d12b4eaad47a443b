"""``measure offline`` against serving the same requests through vLLM with speculation, on this
machine, in the same run: how much sooner offline α is known.

Needs the real-engine tier's setup (``make test-vllm`` once: ``.venv-vllm`` and the tiny models
in ``~/.cache/alphagate/tiny-models``) and torch here; otherwise it says so and skips. It takes
the vLLM lock (``/tmp/alphagate-vllm.lock``) while servers run.

1. A baseline vLLM server (no speculation) serves 32 prompts × 128 tokens, greedy; the replies,
   with token ids, are the log (``bench --save-text``).
2. A vLLM server with the EAGLE-3 head (K = 3) serves the same requests at concurrency 8 after
   a warm-up over the same prompts (the CPU build creates kernels on first sight of a shape):
   the timed reference.
3. The same requests one at a time (concurrency 1): a second reference.
4. ``measure offline`` scores the log with the same head and K on one torch thread (on two
   shared cores torch's default two threads spin-wait and run several times slower): timed with
   the models already loaded (as in a long run), and with their loading; then again, warm, on
   one and on two threads (the greedy numbers are the same).
"""

from __future__ import annotations

import asyncio
import fcntl
import importlib.util
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
PROMPTS, OUTPUT, K = 32, 128, 3


def _serve(
    url: str, model: str, prompts: list[str], tokens: int, save_to: Path | None, conc: int = 8
) -> float:
    from alphagate.bench.config import BenchConfig, Level
    from alphagate.bench.dataset import Prompt
    from alphagate.bench.runner import BenchRunner

    ps = [Prompt(p, None, None, tokens, True) for p in prompts]
    cfg = BenchConfig(
        targets=(("default", url),),
        levels=(Level(label="c", concurrency=conc),),
        num_prompts=len(ps),
        model=model,
        save_text=save_to is not None,
        scrape_metrics=False,
    )

    async def go() -> float:
        runner = BenchRunner(cfg, ps)
        t0 = time.perf_counter()
        await runner.run()
        wall = time.perf_counter() - t0
        assert all(r.ok for r in runner.records)
        if save_to is not None:
            save_to.write_text("".join(r.model_dump_json() + "\n" for r in runner.records))
        return wall

    return asyncio.run(go())


def main() -> None:
    from tests.real_engine.harness import MODEL_CACHE, VLLM_PYTHON, vllm_server

    if importlib.util.find_spec("torch") is None or not VLLM_PYTHON.exists():
        print("skipped: needs torch here and the vLLM tier's venv (run `make test-vllm` once)")
        return
    from alphagate.testing.tiny_models import TinyModelSettings, cache_key

    root = MODEL_CACHE / cache_key(TinyModelSettings())
    if not (root / "DONE.json").exists():
        print(f"skipped: the tiny models are not built ({root}); run `make test-vllm` once")
        return
    import textwrap

    src = Path(textwrap.__file__).read_text(encoding="utf-8")
    prompts = [src[i * 400 : (i + 1) * 400] for i in range(PROMPTS)]
    work = Path(tempfile.mkdtemp())
    log = work / "requests.jsonl"
    spec = {"method": "eagle3", "model": str(root / "eagle3"), "num_speculative_tokens": K}
    with open("/tmp/alphagate-vllm.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with vllm_server(root / "target", "base", None, work) as srv:
            _serve(srv.url, "base", prompts, OUTPUT, log)
        with vllm_server(root / "target", "spec", spec, work) as srv:
            _serve(srv.url, "spec", prompts, 4, None)  # warm-up: every prompt's shapes
            served = _serve(srv.url, "spec", prompts, OUTPUT, None)
            one_by_one = _serve(srv.url, "spec", prompts, OUTPUT, None, conc=1)
    from alphagate.measure.offline.config import OfflineConfig
    from alphagate.measure.offline.proposers import DrafterSpec
    from alphagate.measure.offline.replay import load_models
    from alphagate.measure.offline.run import measure_offline

    t0 = time.perf_counter()
    spec_ = DrafterSpec("eagle3", str(root / "eagle3"))
    models = load_models(str(root / "target"), spec_, threads=1)  # see the docstring
    loaded = time.perf_counter() - t0
    cfg = OfflineConfig(
        logs=(log,),
        target=str(root / "target"),
        drafter="eagle3",
        drafter_path=str(root / "eagle3"),
        k=K,
    )
    t0 = time.perf_counter()
    r = measure_offline(cfg, models=models)
    offline = time.perf_counter() - t0
    assert r.overall is not None
    print(f"{PROMPTS} requests × {OUTPUT} tokens, EAGLE-3 head, K = {K}, greedy")
    print(f"vLLM serving with speculation, concurrency 8: {served:6.2f} s (reference)")
    print(f"vLLM serving with speculation, concurrency 1: {one_by_one:6.2f} s (reference)")
    print(f"measure offline, models loaded:                {offline:6.2f} s")
    print(f"measure offline, with loading the models:      {offline + loaded:6.2f} s")
    for name, ref in (("concurrency 8", served), ("concurrency 1", one_by_one)):
        print(
            f"ratio serving ({name}) / offline: {ref / offline:.1f}× "
            f"({ref / (offline + loaded):.1f}× with loading)"
        )
    print(
        f"offline ρ = {r.overall.draft_acceptance_rate:.3f}, τ = {r.overall.mean_acceptance_length:.3f}"
    )
    # The work each side does, in target token-positions: the server prefills each prompt and
    # then verifies K drafts + 1 per engine step (the predicted steps equal vLLM's num_drafts,
    # see the agreement table in the README); the replay runs each request once, plus K − 1
    # positions past its output. Both are compute-bound on a CPU, so the wall-time ratio cannot
    # exceed the work ratio by more than the two sides' efficiency per position; on a GPU a
    # decode step costs about as much as a prefill of many positions, and the ratio is large.
    d = r.offline
    assert d is not None
    steps = d.overall.by_k[K - 1].num_drafts
    serve_work = d.prompt_tokens + steps * (K + 1)
    replay_work = d.prompt_tokens + d.output_tokens + d.requests_used * (K - 1)
    print(
        f"target positions computed: serving {serve_work:,.0f} (prompts {d.prompt_tokens:,} + "
        f"{steps:,.0f} steps × {K + 1}), replay {replay_work:,} — serving does "
        f"{serve_work / replay_work:.2f}× the replay's target work"
    )
    # the same call again, warm, on one and on two torch threads (vLLM's server used both cores)
    import torch

    for threads in (1, 2):
        torch.set_num_threads(threads)
        t0 = time.perf_counter()
        again = measure_offline(cfg, models=models)
        warm = time.perf_counter() - t0
        assert again.overall == r.overall
        print(
            f"measure offline again, warm, {threads} thread{'s' if threads > 1 else ''}: "
            f"{warm:6.2f} s — serving / offline: {served / warm:.1f}× (concurrency 8), "
            f"{one_by_one / warm:.1f}× (concurrency 1)"
        )


if __name__ == "__main__":
    main()
