"""SGLang's EAGLE draft trees replayed offline (``measure offline --tree``) on the real-engine
tier's EAGLE-3 head: tree against chain acceptance, and what the trees cost the replay.

Needs torch here and the tier's tiny models (``~/.cache/alphagate/tiny-models``, built by
``alphagate.testing.tiny_models.build_tiny_models`` on first use, a few minutes). The log is the
target's own greedy output (transformers, 48 tokens) for the tier's 8 code and 8 prose prompts
(``tests/real_engine/test_offline_vllm.py``), so the greedy replay is exact. Prints, per class,
each tree's τ beside the chain of as many steps; then the replay's wall time with the trees
against the chain alone, on one torch thread, models loaded once, in this process.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
OUTPUT = 48
TREES = ("3:1:4", "3:2:6", "4:4:8", "5:4:8", "5:8:16")


def _greedy_log(tiny: object, path: Path) -> None:
    import torch
    from tests.real_engine.test_offline_vllm import CODE, PROSE
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny.tokenizer)  # type: ignore[attr-defined]
    model = AutoModelForCausalLM.from_pretrained(tiny.target).eval()  # type: ignore[attr-defined]
    lines = []
    for cls, prompts in (("code", CODE), ("prose", PROSE)):
        for p in prompts:
            ids = tok(p)["input_ids"]
            with torch.no_grad():
                out = model.generate(torch.tensor([ids]), max_new_tokens=OUTPUT, do_sample=False)
            gen = out[0, len(ids) :].tolist()
            reply = {
                "prompt_token_ids": ids,
                "choices": [{"text": tok.decode(gen), "token_ids": gen}],
            }
            lines.append(json.dumps({"request": {"prompt": p}, "response": reply, "cls": cls}))
    path.write_text("\n".join(lines) + "\n")


def main() -> None:
    if importlib.util.find_spec("torch") is None:
        print("skipped: torch is not installed (pip install 'alphagate[offline]')")
        return
    from alphagate.measure.offline.config import OfflineConfig
    from alphagate.measure.offline.run import measure_offline
    from alphagate.measure.offline.score import load
    from alphagate.testing.tiny_models import build_tiny_models

    tiny = build_tiny_models(Path.home() / ".cache" / "alphagate" / "tiny-models")
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "greedy.jsonl"
        _greedy_log(tiny, log)
        base = {
            "logs": (log,), "target": str(tiny.target), "tokenizer": str(tiny.tokenizer),
            "drafter": "eagle3", "drafter_path": str(tiny.eagle3), "k": 3, "k_max": 5,
            "class_field": "cls", "threads": 1, "resamples": 1000,
        }  # fmt: skip
        chain_cfg, tree_cfg = OfflineConfig(**base), OfflineConfig(**base, tree=TREES)
        chain_models, tree_models = load(chain_cfg), load(tree_cfg)
        t0 = time.perf_counter()
        measure_offline(chain_cfg, models=chain_models)
        chain_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        result = measure_offline(tree_cfg, models=tree_models)
        tree_s = time.perf_counter() - t0
    d = result.offline
    assert d is not None
    for name, c in [("all traffic", d.overall), *d.classes.items()]:
        print(f"{name}: tree (steps/topk/draft tokens)  τ [95%]  chain τ  ratio  SGLang rate")
        for t in c.trees:
            ci = t.mean_acceptance_length_ci
            print(
                f"  {t.shape.label():>7}  {t.mean_acceptance_length:.3f} "
                f"[{ci.low:.3f}, {ci.high:.3f}]  {t.chain_mean_acceptance_length:.3f}  "
                f"{t.mean_acceptance_length / t.chain_mean_acceptance_length:.2f}×  "  # type: ignore[operator]
                f"{t.accept_rate:.3f}"
                if ci is not None
                else f"  {t.shape.label():>7}  {t.mean_acceptance_length}"
            )
    print(
        f"replay of {d.requests_used} requests ({d.output_tokens:,} output tokens), models "
        f"loaded: chain K ≤ 5 {chain_s:.1f} s; with the {len(TREES)} trees {tree_s:.1f} s "
        f"({tree_s / chain_s:.2f}× the chain's)"
    )


if __name__ == "__main__":
    main()
