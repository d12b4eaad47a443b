"""``measure offline`` predicted against the real vLLM CPU build's own counters.

The workflow a user runs: the baseline server (no speculation) serves the traffic and ``bench
--save-text`` records it; ``measure offline`` predicts each drafter's acceptance per class from
that log; then a speculative server serves the same prompts, class by class, and vLLM's counter
deltas are compared with the prediction. Traffic has two classes — code (what the tiny models
were trained on: the standard library's source) and English prose (a domain shift for both
drafts) — and the predicted per-class acceptance must rank them as vLLM does.

Every vLLM process runs with ``vllm_cpu_fix/`` on its PYTHONPATH (``harness.FIX``): the CPU
build's fallback of Triton's ``expand_kernel`` drops float outputs, which breaks speculative
decoding at temperature > 0 (see ``vllm_cpu_fix/sitecustomize.py``); greedy decoding does not
touch it. The servers come from the tier's pool (``harness.ServerPool``): every figure is a delta
of the server's counters over the test's own requests.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from alphagate.bench.config import BenchConfig, Level
from alphagate.bench.dataset import Prompt
from alphagate.bench.runner import BenchRunner
from alphagate.measure.estimate import estimate
from tests.conftest import Cli
from tests.real_engine.harness import ServerSpec, counts_agree, pooled, report, spec_configs

MAX_TOKENS = 48
CODE = [
    "def fibonacci(n):\n    ",
    "import os\nimport sys\n\n\ndef main():\n    ",
    "class Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(self, item):\n        ",
    "for i in range(10):\n    if i % 2 == 0:\n        ",
    "def read_lines(path):\n    with open(path) as f:\n        ",
    "    def __repr__(self):\n        return ",
    "try:\n    import json\nexcept ImportError:\n    ",
    "def _check(value):\n    if not isinstance(value, int):\n        raise ",
]
PROSE = [
    "The old lighthouse keeper climbed the stairs every evening, and",
    "Dear Margaret, thank you for the lovely letter you sent last week. I",
    "In the spring the river rose over its banks and the villagers",
    "She had never seen the sea before, so when the train finally",
    "Our quarterly results were better than expected because customers",
    "The recipe calls for two cups of flour, a pinch of salt and",
    "After the concert we walked home through the quiet streets while",
    "Most people agree that a good night's sleep matters more than",
]
K = {"ngram": 4, "draft": 3, "eagle3": 3}
SAMPLED_REPEATS = 4  # the sampled case: every prompt four times (trajectories differ)


def _dataset(path: Path, prompts: dict[str, list[str]]) -> Path:
    lines = [
        json.dumps({"prompt": p, "class": cls, "max_tokens": MAX_TOKENS})
        for cls, ps in prompts.items()
        for p in ps
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def _bench(url: str, model: str, dataset: Path, out: Path, *extra: str) -> dict[str, Any]:
    n = len(dataset.read_text().splitlines())  # each prompt once
    r = Cli().run(
        "bench", "--url", url, "--model", model, "--dataset", str(dataset), "--num-prompts",
        str(n), "--concurrency", "2", "--out", str(out), "--no-progress", *extra,
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    return json.loads((out / "summary.json").read_text())  # type: ignore[no-any-return]


def _sampled(url: str, model: str, out: Path, *, save_text: bool) -> dict[str, Any] | None:
    """Every prompt SAMPLED_REPEATS times at temperature 0.7; the records (with ``save_text``,
    a log) or vLLM's counter deltas for the run."""
    prompts = [
        Prompt(p, None, c, MAX_TOKENS) for c, ps in (("code", CODE), ("prose", PROSE)) for p in ps
    ]
    cfg = BenchConfig(
        targets=(("default", url),),
        levels=(Level(label="t07", concurrency=2, requests=len(prompts) * SAMPLED_REPEATS),),
        num_prompts=len(prompts),
        model=model,
        temperature=0.7,
        save_text=save_text,
    )

    async def go() -> Any:
        runner = BenchRunner(cfg, prompts)
        levels = await runner.run()
        return runner.records, levels

    records, levels = asyncio.run(go())
    assert all(r.ok for r in records)
    if save_text:
        out.write_text("".join(r.model_dump_json() + "\n" for r in records))
        return None
    a = levels[0].acceptance
    assert a is not None
    return {
        "drafts": a.num_drafts, "draft_tokens": a.num_draft_tokens,
        "accepted": a.num_accepted_tokens, "per_pos": a.accepted_per_pos,
    }  # fmt: skip


@pytest.fixture(scope="module")
def logs(tiny: Any, logdir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The baseline server's traffic, recorded: greedy (per class) and sampled at T = 0.7."""
    d = tmp_path_factory.mktemp("offline-vllm")
    data = _dataset(d / "all.jsonl", {"code": CODE, "prose": PROSE})
    (srv,) = pooled(tiny.target, logdir, ServerSpec("tiny", label="base"))
    _bench(srv.url, "tiny", data, d / "greedy", "--save-text")
    _sampled(srv.url, "tiny", d / "sampled.jsonl", save_text=True)
    return {"greedy": d / "greedy" / "requests.jsonl", "sampled": d / "sampled.jsonl", "dir": d}


def _spec(tiny: Any, name: str) -> tuple[dict[str, object], str]:
    """The server's speculative config (the tier's shared one) and the drafter as ``measure
    offline`` names it."""
    cfg = spec_configs(tiny)[name]
    assert cfg["num_speculative_tokens"] == K[name]
    if name == "ngram":
        return cfg, f"ngram:{cfg['prompt_lookup_min']}:{cfg['prompt_lookup_max']}"
    return cfg, f"{cfg['method']}:{cfg['model']}"


def _predict(tiny: Any, log: Path, drafter: str, k: int, *extra: str) -> dict[str, Any]:
    return Cli().json(
        "measure", "offline", "--log", str(log), "--target", str(tiny.target),
        "--drafter", drafter, "--k", str(k), "--dtype", "bfloat16", *extra,
    )  # fmt: skip


def _counts(e: dict[str, Any]) -> dict[str, Any]:
    return {
        "drafts": e["num_drafts"], "draft_tokens": e["num_draft_tokens"],
        "accepted": e["num_accepted_tokens"], "per_pos": e["accepted_per_pos"],
        "rho": e["draft_acceptance_rate"],
    }  # fmt: skip


@pytest.mark.parametrize("name", ["ngram", "draft", "eagle3"])
def test_offline_prediction_agrees_with_vllm(
    tiny: Any, logdir: Path, logs: dict[str, Path], name: str
) -> None:
    spec, drafter = _spec(tiny, name)
    k = K[name]
    pred = _predict(tiny, logs["greedy"], drafter, k)
    got: dict[str, dict[str, Any]] = {}
    sampled = None
    (srv,) = pooled(tiny.target, logdir, ServerSpec("tiny", spec, label=name))
    for cls, prompts in (("code", CODE), ("prose", PROSE)):
        data = _dataset(logs["dir"] / f"{name}-{cls}.jsonl", {cls: prompts})
        a = _bench(srv.url, "tiny", data, logs["dir"] / f"{name}-{cls}")["levels"][0]["acceptance"]
        got[cls] = {
            "drafts": a["num_drafts"], "draft_tokens": a["num_draft_tokens"],
            "accepted": a["num_accepted_tokens"], "per_pos": a["accepted_per_pos"],
            "rho": a["draft_acceptance_rate"],
        }  # fmt: skip
    if name != "ngram":
        sampled = _sampled(srv.url, "tiny", logs["dir"] / "unused", save_text=False)
    table = {cls: {"predicted": _counts(pred["classes"][cls]), "vllm": got[cls]} for cls in got}
    report(f"offline/{name}", {"k": k, "classes": table, "wall_s": pred["offline"]["wall_s"]})
    for cls, row in table.items():
        p, v = row["predicted"], row["vllm"]
        assert v["drafts"] > 0, (cls, v)
        if name == "ngram":  # the proposer is replayed exactly: identical counters
            assert p == v, (cls, p, v)
            continue
        # ties in bf16 logits may flip a few tokens (harness.counts_agree says how many)
        assert counts_agree(p, v), (cls, p, v)
    # the domain shift: the prediction ranks the classes as vLLM's counters do
    rank = lambda side: table["code"][side]["rho"] > table["prose"][side]["rho"]  # noqa: E731
    assert rank("predicted") == rank("vllm"), table
    if sampled is not None:
        _check_sampled(tiny, logs["sampled"], drafter, k, name, sampled)


#: the two-sided normal quantile of a 0.1% false alarm
Z999 = 3.29


def _check_sampled(
    tiny: Any, log: Path, drafter: str, k: int, name: str, vllm: dict[str, Any]
) -> None:
    """Temperature 0.7: the prediction from one sample of trajectories against vLLM's counters
    over another. vLLM's 95% interval comes from its counts; the two estimates each carry their
    own sampling error, so the check is on their difference, at a level that one run in a
    thousand fails by chance."""
    pred = _predict(tiny, log, drafter, k, "--temperature", "0.7")["overall"]
    v = estimate(vllm["drafts"], vllm["draft_tokens"], vllm["accepted"], vllm["per_pos"], k=k)
    assert v.draft_acceptance_rate is not None and v.draft_acceptance_rate_ci is not None
    rho_p, ci_p = pred["draft_acceptance_rate"], pred["draft_acceptance_rate_ci"]
    half_v = (v.draft_acceptance_rate_ci.high - v.draft_acceptance_rate_ci.low) / 2
    half_p = (ci_p["high"] - ci_p["low"]) / 2
    inside = v.draft_acceptance_rate_ci.low <= rho_p <= v.draft_acceptance_rate_ci.high
    report(
        f"offline/{name}/temperature-0.7",
        {
            "predicted_rho": rho_p, "predicted_ci": ci_p, "vllm_rho": v.draft_acceptance_rate,
            "vllm_ci": v.draft_acceptance_rate_ci.model_dump(), "inside_vllm_interval": inside,
            "vllm_drafts": vllm["drafts"], "predicted_drafts": pred["num_drafts"],
        },
    )  # fmt: skip
    # each half-width is 1.96 standard errors; the difference's standard error is their root
    # sum of squares, and the check is at 3.29 of them (a 0.1% false alarm, not 5%)
    tol = Z999 / 1.96 * (half_v**2 + half_p**2) ** 0.5
    assert abs(rho_p - v.draft_acceptance_rate) <= tol, (pred, v)
