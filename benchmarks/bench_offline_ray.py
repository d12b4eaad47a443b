"""``measure offline --ray``: throughput with 1 and 2 Ray workers on a local instance, beside the
single-process run, on the same log; the numbers must be the same in all three.

Needs torch here, the ``ray`` extra and the tiny models of the real-engine tier
(``~/.cache/alphagate/tiny-models``, built by ``alphagate.testing``; ``make test-vllm`` builds
them once); otherwise it says so and skips. The log is the target's own greedy output (64 prompts ×
128 tokens, built here with transformers), scored with the EAGLE-3 head at K = 3, one torch
thread per worker. Every time includes starting what the run starts — the models for the single
process; Ray itself and one model load per actor for the Ray runs — since that is what a user
waits for. The fixed cost of each set-up (start-up, model loads, one request per worker) is
measured by the same run on ``--sample`` of one request per worker, and the net scoring time is
the difference: the throughput a long log approaches.
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
    from alphagate.measure.offline import OfflineConfig, measure_offline

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
    rows = [("single process", single, run(sample=1)[0])]
    for n in (1, 2):
        wall, got = run(ray="local", ray_workers=n)
        assert got == ref, f"{n} Ray workers: numbers differ from the single-process run"
        rows.append(
            (
                f"Ray, {n} worker{'s' if n > 1 else ''}",
                wall,
                run(ray="local", ray_workers=n, sample=n)[0],
            )
        )
    print(f"{PROMPTS} requests × {OUTPUT} tokens, EAGLE-3 head, K = {K}, one thread per worker")
    print("numbers identical in all three runs: yes")
    print(f"{'':18s} {'wall':>8s} {'fixed':>8s} {'net':>8s} {'requests/s (net)':>18s}")
    net = {}
    for name, wall, fixed in rows:
        net[name] = max(wall - fixed, 1e-9)
        print(
            f"{name:18s} {wall:7.2f}s {fixed:7.2f}s {net[name]:7.2f}s {PROMPTS / net[name]:18.1f}"
        )
    one, two = rows[1], rows[2]
    print(
        f"ratio 2 workers / 1 worker, throughput: {one[1] / two[1]:.2f}× with start-up, "
        f"{net[one[0]] / net[two[0]]:.2f}× net"
    )
    print(
        f"ratio Ray 1 worker / single process, throughput: {single / one[1]:.2f}× with start-up, "
        f"{net['single process'] / net[one[0]]:.2f}× net"
    )


if __name__ == "__main__":
    main()
