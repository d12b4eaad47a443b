"""measure offline --drafter suffix: the replay through arctic-inference's cache against a
reference engine that serves the log's requests one after another step by step (every forward
recomputed, the cache driven as vLLM's ``SuffixDecodingProposer`` drives it), hand-worked
drafts of the suffix trees, and the joint counts' arithmetic."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
arctic = pytest.importorskip("arctic_inference.suffix_decoding")

from alphagate.measure.offline.config import OfflineConfig, parse_drafter  # noqa: E402
from alphagate.measure.offline.run import measure_offline  # noqa: E402
from alphagate.measure.offline.suffix import SuffixReplay  # noqa: E402
from alphagate.measure.offline.walk import walk_greedy, walk_lengths  # noqa: E402
from alphagate.measure.results import MeasureError  # noqa: E402
from alphagate.specs.deployment import SuffixParams  # noqa: E402
from alphagate.theory.lengths import length_counters as counters  # noqa: E402
from tests.measure.offline.fixtures import Tiny, build, greedy_log  # noqa: E402

# loops the random target falls into repeat within a response; the same prompt twice and a
# prompt that quotes an earlier one repeat across requests (the responses' tree)
PROMPTS = [
    "def wrap(text, width=70, **kwargs):\n    ",
    "((((((((",
    "    # Hardcode the recognized whitespace characters",
    "def wrap(text, width=70, **kwargs):\n    ",
    "The quick brown fox",
    "((((((((",
]
N_OUT = 40
K = 8


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Tiny:
    return build(tmp_path_factory.mktemp("suffix-models"))


@pytest.fixture(scope="module")
def log(tiny: Tiny, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("suffix-log") / "log.jsonl"
    greedy_log(tiny, path, PROMPTS, N_OUT, [f"r{i}" for i in range(len(PROMPTS))])
    return path


@torch.no_grad()
def _served(tiny: Tiny, prompts: list[list[int]], p: SuffixParams, k: int) -> list[dict[str, Any]]:
    """vLLM's per-request counters, serving ``prompts`` greedily one after another."""
    from transformers import AutoModelForCausalLM

    target = AutoModelForCausalLM.from_pretrained(tiny.target).eval()
    cache = arctic.SuffixDecodingCache(
        max_tree_depth=p.max_tree_depth, max_cached_requests=p.max_cached_requests
    )
    out = []
    for i, prompt in enumerate(prompts):
        seq = list(prompt)
        sampled = [int(target(torch.tensor([seq])).logits[0, -1].argmax())]  # the prefill's token
        cache.start_request(i, prompt)
        counts = {"drafts": 0, "draft_tokens": 0, "accepted": 0, "per_pos": [0] * k}
        while True:
            cache.add_active_response(i, sampled)  # the whole step, past the output's end too
            seq += sampled
            if len(seq) - len(prompt) >= N_OUT:
                break
            d = cache.speculate(
                i, seq[-p.max_tree_depth :], max_spec_tokens=k,
                max_spec_factor=p.max_spec_factor, min_token_prob=p.min_token_prob,
            ).token_ids  # fmt: skip
            verify = target(torch.tensor([seq + d])).logits[0, len(seq) - 1 :].argmax(-1).tolist()
            a = 0
            while a < len(d) and d[a] == verify[a]:
                a += 1
            if d:
                counts["drafts"] += 1
                counts["draft_tokens"] += len(d)
                counts["accepted"] += a
                for j in range(a):
                    counts["per_pos"][j] += 1
            sampled = verify[: a + 1]
        cache.stop_request(i)
        out.append(counts)
    return out


def _cfg(tiny: Tiny, log: Path, **kw: object) -> OfflineConfig:
    base: dict[str, object] = {
        "logs": (log,),
        "target": str(tiny.target),
        "drafter": "suffix",
        "k": K,
        "class_field": "request.meta.cls",
        "resamples": 50,
    }
    return OfflineConfig(**{**base, **kw})


@pytest.mark.parametrize(
    "params",
    [SuffixParams(), SuffixParams(max_tree_depth=12, max_cached_requests=1, min_token_prob=0.3)],
)
def test_every_request_counts_as_the_reference_engine(
    tiny: Tiny, log: Path, params: SuffixParams
) -> None:
    r = measure_offline(_cfg(tiny, log, suffix=params))
    prompts = [
        json.loads(x)["response"]["prompt_token_ids"] for x in log.read_text().split("\n")[:-1]
    ]
    want = _served(tiny, prompts, params, K)
    for i, w in enumerate(want):
        e = r.classes[f"r{i}"]
        got = (e.num_drafts, e.num_draft_tokens, e.num_accepted_tokens, e.accepted_per_pos)
        assert got == (w["drafts"], w["draft_tokens"], w["accepted"], w["per_pos"]), i
    # the repeated prompts draft from the earlier responses: long drafts, nearly all accepted
    assert sum(w["accepted"] for w in want) > 0 and r.classes["r3"].num_accepted_tokens > 20
    assert r.offline is not None and r.offline.trajectory_agreement == 1.0


def test_the_cache_of_responses_is_what_repeats_across_requests(tiny: Tiny, log: Path) -> None:
    """Without the responses' tree (max_cached_requests 0) a repeated prompt drafts only from
    its own prompt and response: fewer accepted tokens on the repeats, the same on the first."""
    shared = measure_offline(_cfg(tiny, log))
    alone = measure_offline(_cfg(tiny, log, suffix=SuffixParams(max_cached_requests=0)))
    acc = lambda r, c: r.classes[c].num_accepted_tokens  # noqa: E731
    assert acc(alone, "r0") == acc(shared, "r0")
    assert acc(alone, "r3") < acc(shared, "r3")


def test_a_run_starts_with_an_empty_cache(tiny: Tiny, log: Path) -> None:
    from alphagate.measure.offline.score import load

    cfg = _cfg(tiny, log)
    models = load(cfg)
    first = measure_offline(cfg, models=models)
    again = measure_offline(cfg, models=models)
    assert again.overall == first.overall and again.classes == first.classes


def test_the_joint_counts_give_vllms_counters_and_conditional_alpha(tiny: Tiny, log: Path) -> None:
    r = measure_offline(_cfg(tiny, log))
    assert r.offline is not None and r.overall is not None
    o = r.offline.overall
    assert o.acceptance_by_length is not None and o.draft_length_histogram is not None
    joint = np.zeros((K + 1, K + 1))
    for n, row in enumerate(o.acceptance_by_length):
        joint[n, : n + 1] = row
    assert o.draft_length_histogram == joint.sum(axis=1).tolist()
    steps_drafting = joint[1:].sum()
    assert r.overall.num_drafts == steps_drafting == sum(o.acceptance_length_histogram)
    assert r.overall.num_draft_tokens == (joint.sum(axis=1) * np.arange(K + 1)).sum()
    # α_2: of the steps that drafted ≥ 2 tokens and accepted the first, the share accepting both
    reached = joint[2:, 1:].sum()
    both = joint[2:, 2:].sum()
    assert r.overall.alpha_by_pos[1] == pytest.approx(both / reached)
    assert o.by_k[0].k == K and len(o.by_k) == 1


# ---------------------------------------------------------------- without a model
def test_hand_worked_draft_from_the_prompt_tree() -> None:
    """Prompt 1 2 3 4 5 1 2 3, first output token 4: the context ends in 1 2 3 4, which occurred
    once before followed by 5 1 2 3 (and once at the end, followed by nothing): the tree's child
    holds 1 of the 2 suffixes through that node, so each drafted token has probability 1/2 and
    the draft stops at max_spec_factor × match length = 4 tokens. The target goes on 5 1 2 9:
    three accepted, then the target's own 9."""
    replay = SuffixReplay(SuffixParams(), k=8, max_model_len=1000)
    seq = np.asarray([1, 2, 3, 4, 5, 1, 2, 3] + [4, 5, 1, 2, 9] + [7] * 20, dtype=np.int64)
    w = replay.walk("a", seq, 8, 6)
    assert w.starts.tolist() == [9, 13]
    assert w.drafts[0].tolist() == [5, 1, 2, 3]
    assert w.accepted.tolist()[0] == 3
    assert w.cached_end >= 14


def test_max_spec_factor_and_min_token_prob_cut_the_draft() -> None:
    seq = np.asarray([1, 2, 3, 4, 5, 6, 7, 8, 1, 2, *list(range(3, 30))], dtype=np.int64)
    # the context 1 … 8 1 2 3 ends in "1 2 3", which went on 4 5 6 7 8 1 2 3 before; of the two
    # suffixes through "2 3" or "1 2 3" (there, and the context's own end) one goes on: p = 1/2
    short = SuffixReplay(SuffixParams(max_spec_factor=0.5), k=8, max_model_len=1000)
    assert short.walk("a", seq, 10, 2).drafts[0].size == 1  # match 3 × 0.5 → 1 token
    long = SuffixReplay(SuffixParams(max_spec_factor=4.0), k=8, max_model_len=1000)
    assert long.walk("a", seq, 10, 2).drafts[0].tolist() == [4, 5, 6, 7, 8, 1, 2, 3]
    picky = SuffixReplay(SuffixParams(min_token_prob=0.6), k=8, max_model_len=1000)
    assert picky.walk("a", seq, 10, 2).drafts[0].size == 0  # p = 0.5 < 0.6


def test_a_response_stays_cached_for_the_next_request_until_evicted() -> None:
    resp = [11, 12, 13, 14, 15, 16, 17, 18, 19]
    seq = np.asarray([1, 2] + resp + [0] * 10, dtype=np.int64)
    again = np.asarray([3, 4, 11, 12] + resp[2:] + [0] * 10, dtype=np.int64)
    # one cached response: the second request's own slot evicts the first's when it starts
    for cached, drafted in ((2, True), (1, False), (0, False)):
        r = SuffixReplay(SuffixParams(max_cached_requests=cached), k=4, max_model_len=1000)
        r.walk("first", seq, 2, len(resp))
        w = r.walk("second", again, 3, 6)  # its context ends 11 12: the first response follows
        assert (w.drafts[0].size > 0) == drafted, cached
        if drafted:
            assert w.drafts[0].tolist() == [13, 14]  # cut at factor 1 × match 2


def test_joint_counts_and_the_walk_agree_with_the_k_walk() -> None:
    rng = np.random.default_rng(0)
    nc = np.asarray([30, 0, 17, 40])
    q = int(nc.sum())
    k = 5
    length = rng.integers(0, k + 1, q)
    run = np.minimum(rng.integers(0, k + 1, q), length)
    joint = walk_lengths(run, length, nc, k)
    ref = walk_greedy(run, length, nc, k)
    c = counters(joint)
    assert np.array_equal(c.drafts, ref.drafts[:, k - 1])
    assert np.array_equal(c.draft_tokens, ref.draft_tokens[:, k - 1])
    assert np.array_equal(c.accepted, ref.accepted[:, k - 1])
    assert np.array_equal(c.accepted_per_pos, ref.accepted_per_pos[:, k - 1, :])
    assert np.array_equal(c.histogram, ref.histogram[:, k - 1, :])
    assert joint[1].sum() == 0  # the request without contexts takes no step


def test_conditional_alpha_divides_by_the_drafts_that_reach_a_position() -> None:
    # two steps: one drafted 1 token and accepted it, one drafted 3 and accepted 2
    joint = np.zeros((4, 4))
    joint[1, 1] = joint[3, 2] = 1
    c = counters(joint)
    assert c.accepted_per_pos.tolist() == [2, 1, 0]
    assert c.reached_per_pos.tolist() == [2, 1, 1]  # only the 3-token draft has positions 2, 3
    # vLLM's c_2 ÷ c_1 would say α_2 = 1/2; the draft that reached position 2 accepted it
    assert (c.accepted_per_pos / c.reached_per_pos).tolist() == [1.0, 1.0, 0.0]


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ("suffix:depth=3", "max_tree_depth"),
        ("suffix:max_tree_depth=0", "max_tree_depth"),
        ("suffix:min_token_prob=2", "min_token_prob"),
        ("suffix:max_cached_requests", "KEY=VALUE"),
    ],
)
def test_bad_suffix_specs_are_refused_naming_the_key(spec: str, match: str) -> None:
    with pytest.raises(MeasureError, match=match):
        parse_drafter(spec)


def test_what_a_suffix_replay_cannot_do_is_refused(tmp_path: Path) -> None:
    base = {"logs": (tmp_path / "x",), "target": "t", **parse_drafter("suffix:max_tree_depth=16")}
    assert OfflineConfig(**base).k == 16  # vLLM's default cap: the tree depth
    for bad, what in (
        ({"k_max": 20}, "--k-max"),
        ({"temperature": 0.7}, "greedy"),
        ({"sample": 3}, "--sample"),
        ({"ray": "local"}, "--ray"),
        ({"checkpoint": tmp_path / "c"}, "--checkpoint"),
    ):
        with pytest.raises(ValueError, match=what):
            OfflineConfig(**base, **bad)


def test_without_arctic_inference_the_replay_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from importlib import metadata

    import alphagate.measure.offline.suffix as sfx

    def missing(name: str) -> str:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(sfx.metadata, "version", missing)
    with pytest.raises(MeasureError, match=r"arctic-inference==0\.1\.1") as e:
        SuffixReplay(SuffixParams(), k=4, max_model_len=100)
    assert e.value.exit_code == 2 and "pip install" in str(e.value)
