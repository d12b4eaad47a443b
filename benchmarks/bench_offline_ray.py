"""``measure offline --ray``: throughput with 1 and 2 Ray workers on a local instance, beside the
single-process run, on the same log; the numbers must be the same in every run.

Needs torch here, the ``ray`` extra and the tiny models of the real-engine tier
(``~/.cache/alphagate/tiny-models``, built by ``alphagate.testing``; ``make test-vllm`` builds
them once); otherwise it says so and skips. The log is the target's own greedy output (64 prompts ×
128 tokens, built here with transformers), scored with the EAGLE-3 head at K = 3, one torch
thread per worker.

1. End to end, as a user runs it: ``measure offline`` alone, then with ``--ray local
   --ray-workers 1`` and ``2`` — each Ray run starts a Ray instance and loads the models in every
   actor, seconds that a long log amortises.
2. Scoring throughput, what a long log approaches: on one local instance, with the actors'
   models already loaded, the time to score the whole log with 1 and with 2 actors (best of
   three), beside the single process's with its models loaded.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
PROMPTS, OUTPUT, K = 64, 128, 3


def _log(root: Path, path: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(1)
    tok = AutoTokenizer.from_pretrained(root / "target")
    m = AutoModelForCausalLM.from_pretrained(root / "target").eval()
    src = Path(textwrap.__file__).read_text(encoding="utf-8")
    lines = []
    for i in range(PROMPTS):
        p = src[i * 300 : (i + 1) * 300]
        ids = tok(p)["input_ids"]
        with torch.no_grad():
            x = torch.tensor([ids])
            out = m.generate(x, max_new_tokens=OUTPUT, min_new_tokens=OUTPUT, do_sample=False)
        o = out[0, len(ids) :].tolist()
        resp = {"choices": [{"text": tok.decode(o), "token_ids": o}], "prompt_token_ids": ids}
        lines.append(json.dumps({"request": {"prompt": p}, "response": resp}))
    path.write_text("\n".join(lines) + "\n")


def main() -> None:
    from tests.real_engine.harness import MODEL_CACHE

    for mod in ("torch", "transformers", "ray"):
        if importlib.util.find_spec(mod) is None:
            print(f"skipped: needs {mod} (pip install 'alphagate[offline,ray]')")
            return
    from alphagate.testing.tiny_models import TinyModelSettings, cache_key

    root = MODEL_CACHE / cache_key(TinyModelSettings())
    if not (root / "DONE.json").exists():
        print(f"skipped: the tiny models are not built ({root}); run `make test-vllm` once")
        return
    from alphagate.measure.offline.config import OfflineConfig
    from alphagate.measure.offline.run import measure_offline

    log = Path(tempfile.mkdtemp()) / "log.jsonl"
    _log(root, log)
    base = {
        "logs": (log,),
        "target": str(root / "target"),
        "drafter": "eagle3",
        "drafter_path": str(root / "eagle3"),
        "k": K,
        "threads": 1,
    }

    def run(**kw: object) -> tuple[float, str]:
        t0 = time.perf_counter()
        r = measure_offline(OfflineConfig(**base, **kw))  # type: ignore[arg-type]
        wall = time.perf_counter() - t0
        p = r.payload()
        p["offline"].pop("wall_s")
        return wall, json.dumps(p, sort_keys=True)

    single, ref = run()
    walls = {"single process": single}
    for n in (1, 2):
        wall, got = run(ray="local", ray_workers=n)
        assert got == ref, f"{n} Ray workers: numbers differ from the single-process run"
        walls[f"Ray, {n} worker{'s' if n > 1 else ''}"] = wall
    steady = _steady(OfflineConfig(**base), log)  # type: ignore[arg-type]
    print(f"{PROMPTS} requests × {OUTPUT} tokens, EAGLE-3 head, K = {K}, one thread per worker")
    print("numbers identical in all three end-to-end runs: yes")
    print(f"{'':18s} {'end to end':>11s} {'scoring only':>13s} {'requests/s':>11s}")
    for name, wall in walls.items():
        sc = steady[name]
        print(f"{name:18s} {wall:10.2f}s {sc:12.2f}s {PROMPTS / sc:11.1f}")
    one, two = steady["Ray, 1 worker"], steady["Ray, 2 workers"]
    print(f"ratio 2 workers / 1 worker, scoring throughput: {one / two:.2f}×")
    e1, e2 = walls["Ray, 1 worker"], walls["Ray, 2 workers"]
    print(f"ratio 2 workers / 1 worker, end to end (with Ray's start-up): {e1 / e2:.2f}×")
    print(
        f"ratio Ray 1 worker / single process, scoring throughput: "
        f"{steady['single process'] / one:.2f}×"
    )


def _steady(cfg: object, log: Path) -> dict[str, float]:
    """Best-of-three scoring times with the models loaded: in this process, then by 1 and 2
    actors of one local Ray instance."""
    import ray

    from alphagate.measure.offline.config import OfflineConfig
    from alphagate.measure.offline.ray import Scorer, dispatch
    from alphagate.measure.offline.requests import read_logs
    from alphagate.measure.offline.score import load, score_batch

    assert isinstance(cfg, OfflineConfig)
    reqs = read_logs([log]).requests
    models = load(cfg)
    out: dict[str, float] = {}

    def best(go: object) -> float:
        assert callable(go)
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            go()
            times.append(time.perf_counter() - t0)
        return min(times)

    out["single process"] = best(
        lambda: [score_batch(models, reqs[i : i + 16], cfg) for i in range(0, len(reqs), 16)]
    )
    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        _node_ip_address="127.0.0.1",
        logging_level="warning",
        log_to_driver=False,
    )
    try:
        remote = ray.remote(num_cpus=1)(Scorer)
        for n in (1, 2):
            actors = [remote.remote(cfg) for _ in range(n)]
            ray.get([a.ready.remote() for a in actors])
            dispatch(ray, actors, reqs[:n], lambda part: None)  # warm every actor
            out[f"Ray, {n} worker{'s' if n > 1 else ''}"] = best(
                lambda actors=actors: dispatch(ray, actors, reqs, lambda part: None)
            )
            for a in actors:
                ray.kill(a)
    finally:
        ray.shutdown()
    return out


if __name__ == "__main__":
    main()
