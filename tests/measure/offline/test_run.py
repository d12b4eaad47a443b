"""measure offline with real (tiny) models on disk, against a brute-force reference engine: the
draft → verify → accept loop run step by step with every forward recomputed from scratch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from alphagate.measure.offline.config import OfflineConfig  # noqa: E402
from alphagate.measure.offline.proposers import DrafterSpec, DraftModelProposer  # noqa: E402
from alphagate.measure.offline.replay import load_models  # noqa: E402
from alphagate.measure.offline.run import measure_offline  # noqa: E402
from alphagate.measure.results import MeasureError  # noqa: E402
from alphagate.report.reasons import offline_notes  # noqa: E402
from tests.measure.offline.fixtures import Tiny, greedy_log, reference_counts  # noqa: E402

# a random target falls into loops: some periodic, some one token repeated (which the heads of
# the fixture, leaning on the target's state, follow for several positions)
PROMPTS = [
    "def wrap(text, width=70, **kwargs):\n    ",
    "((((((((",
    "    # Hardcode the recognized whitespace characters",
    "0000000000",
]
CLASSES = ["code", "code", "prose", "code"]
N_OUT = 24


@pytest.fixture(scope="module")
def log(tiny: Tiny, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("offline-log") / "log.jsonl"
    greedy_log(tiny, path, PROMPTS, N_OUT, CLASSES)
    return path


def _cfg(tiny: Tiny, log: Path, method: str, **kw: object) -> OfflineConfig:
    path = {"ngram": None, "draft_model": tiny.draft, "eagle3": tiny.eagle3}[method]
    base: dict[str, object] = {
        "logs": (log,),
        "target": str(tiny.target),
        "drafter": method,
        "drafter_path": None if path is None else str(path),
        "k": 3,
        "prompt_lookup_min": 2,
        "prompt_lookup_max": 3,
        "resamples": 50,
    }
    return OfflineConfig(**{**base, **kw})


@pytest.mark.parametrize(
    ("method", "ref"), [("ngram", "ngram"), ("draft_model", "draft"), ("eagle3", "eagle3")]
)
def test_greedy_counts_equal_the_reference_engine(
    tiny: Tiny, log: Path, method: str, ref: str
) -> None:
    r = measure_offline(_cfg(tiny, log, method))
    want = {"drafts": 0, "draft_tokens": 0, "accepted": 0, "per_pos": [0, 0, 0]}
    for line in log.read_text().splitlines():
        prompt = json.loads(line)["response"]["prompt_token_ids"]
        got = reference_counts(tiny, ref, prompt, N_OUT, 3)
        for key in ("drafts", "draft_tokens", "accepted"):
            want[key] += got[key]
        want["per_pos"] = [a + b for a, b in zip(want["per_pos"], got["per_pos"], strict=True)]
    o = r.overall
    assert o is not None and o.num_drafts > 0
    assert (o.num_drafts, o.num_draft_tokens, o.num_accepted_tokens) == (
        want["drafts"],
        want["draft_tokens"],
        want["accepted"],
    )
    assert o.accepted_per_pos == want["per_pos"]
    assert want["per_pos"][2] > 0, "the fixture must reach the last position"
    assert r.offline is not None and r.offline.trajectory_agreement == 1.0


def test_reduced_draft_vocabulary_maps_through_d2t(tiny: Tiny, log: Path) -> None:
    r = measure_offline(_cfg(tiny, log, "eagle3", drafter_path=str(tiny.eagle3_small_vocab)))
    want = {"accepted": 0, "drafts": 0}
    for line in log.read_text().splitlines():
        prompt = json.loads(line)["response"]["prompt_token_ids"]
        got = reference_counts(tiny, "eagle3-small", prompt, N_OUT, 3)
        want["accepted"] += got["accepted"]
        want["drafts"] += got["drafts"]
    assert r.overall is not None
    assert (r.overall.num_drafts, r.overall.num_accepted_tokens) == (
        want["drafts"],
        want["accepted"],
    )


def test_every_k_from_one_pass_equals_separate_runs(tiny: Tiny, log: Path) -> None:
    wide = measure_offline(_cfg(tiny, log, "eagle3", k=2, k_max=4))
    assert wide.offline is not None
    for k in (1, 3, 4):
        one = measure_offline(_cfg(tiny, log, "eagle3", k=k))
        row = wide.offline.overall.by_k[k - 1]
        assert one.overall is not None
        assert row.num_drafts == one.overall.num_drafts
        assert row.draft_acceptance_rate == one.overall.draft_acceptance_rate


def test_classes_seed_checkpoint_and_resume(tiny: Tiny, log: Path, tmp_path: Path) -> None:
    ck = tmp_path / "ck.jsonl"
    full = measure_offline(
        _cfg(tiny, log, "draft_model", class_field="request.meta.cls", checkpoint=ck)
    )
    assert set(full.classes) == {"code", "prose"}
    assert full.offline is not None and full.offline.classes["prose"].requests == 1
    again = measure_offline(_cfg(tiny, log, "draft_model", class_field="request.meta.cls"))
    assert (
        again.overall == full.overall and again.classes == full.classes
    )  # same seed, same numbers
    # a run cut after two requests resumes from the checkpoint and ends with the same numbers
    lines = ck.read_text().splitlines()
    ck.write_text("\n".join(lines[:3]) + "\n")
    resumed = measure_offline(
        _cfg(tiny, log, "draft_model", class_field="request.meta.cls", checkpoint=ck)
    )
    assert resumed.overall == full.overall
    with pytest.raises(MeasureError, match="other settings"):
        measure_offline(_cfg(tiny, log, "draft_model", k=2, checkpoint=ck))


def test_sampling_with_greedy_drafts_walks_the_sampled_tokens(tiny: Tiny, log: Path) -> None:
    greedy = measure_offline(_cfg(tiny, log, "draft_model"))
    sampled = measure_offline(_cfg(tiny, log, "draft_model", temperature=0.7))
    prob = measure_offline(
        _cfg(tiny, log, "draft_model", temperature=0.7, draft_sampling="probabilistic")
    )
    assert sampled.overall is not None and greedy.overall is not None and prob.overall is not None
    # one-hot drafts: acceptance is decided by the logged tokens alone, whatever the temperature
    assert sampled.overall.accepted_per_pos == greedy.overall.accepted_per_pos
    assert sampled.offline is not None and sampled.offline.semantics == "sampling"
    # sampled drafts: expectations, each a probability, at most the greedy count here
    assert 0 < prob.overall.num_accepted_tokens < prob.overall.num_draft_tokens


def test_regenerate_and_truncation(tiny: Tiny, log: Path) -> None:
    r = measure_offline(_cfg(tiny, log, "ngram", regenerate=True))
    assert r.offline is not None and r.offline.regenerated and r.offline.trajectory_agreement == 1.0
    cut = measure_offline(_cfg(tiny, log, "ngram", max_model_len=24))
    assert cut.offline is not None
    too_long = [s for s in cut.offline.skipped if s.reason == "prompt longer than the context"]
    # every request either fits after cutting its output, or is left out and counted
    assert cut.offline.truncated == cut.offline.requests_used > 0
    assert cut.offline.requests_used + sum(s.count for s in too_long) == len(PROMPTS)
    assert any("cut to fit" in n for n in offline_notes(cut.offline))


def test_a_drafter_that_does_not_fit_is_refused(tiny: Tiny, tmp_path: Path) -> None:
    cfg = json.loads((tiny.eagle3 / "config.json").read_text())
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "model.safetensors").write_bytes((tiny.eagle3 / "model.safetensors").read_bytes())
    (bad / "config.json").write_text(json.dumps({**cfg, "hidden_size": 32}))
    with pytest.raises(MeasureError, match="hidden_size"):
        load_models(str(tiny.target), DrafterSpec("eagle3", str(bad)))
    (bad / "config.json").write_text(json.dumps({**cfg, "draft_vocab_size": 100}))
    with pytest.raises(MeasureError, match="d2t"):
        load_models(str(tiny.target), DrafterSpec("eagle3", str(bad)))
    with pytest.raises(MeasureError, match="nowhere/model"):
        load_models(str(tmp_path / "nowhere" / "model"), DrafterSpec("ngram"))
    draft_cfg = json.loads((tiny.draft / "config.json").read_text())
    other = tmp_path / "other-draft"
    other.mkdir()
    for f in tiny.draft.iterdir():
        if f.suffix == ".safetensors":
            (other / f.name).write_bytes(f.read_bytes())
    (other / "config.json").write_text(json.dumps({**draft_cfg, "vocab_size": 999}))
    with pytest.raises(MeasureError, match="vocab_size"):
        load_models(str(tiny.target), DrafterSpec("draft_model", str(other)))


def test_a_checkpoint_cut_mid_line_resumes_from_its_whole_lines(
    tiny: Tiny, log: Path, tmp_path: Path
) -> None:
    """A run killed mid-write leaves a last line cut: it is set aside (as bench does with
    requests.jsonl), said in the notes, and the run resumes from the whole lines — the same
    numbers, and a checkpoint whose every line is whole."""
    ck = tmp_path / "ck.jsonl"
    full = measure_offline(_cfg(tiny, log, "ngram", checkpoint=ck))
    text = ck.read_text()
    lines = text.splitlines()
    assert json.loads(lines[0])["settings"]["k"] == 3  # the head says what it was run with
    cut = "\n".join(lines[:3]) + "\n" + lines[3][:40]  # two requests whole, the third cut
    ck.write_text(cut)
    resumed = measure_offline(_cfg(tiny, log, "ngram", checkpoint=ck))
    assert resumed.overall == full.overall
    assert resumed.offline is not None
    assert any(
        "cut-off line" in n and "2 whole request lines" in n for n in offline_notes(resumed.offline)
    )
    (aside,) = tmp_path.glob("ck.jsonl.partial-*")
    assert aside.read_text() == lines[3][:40]
    assert [json.loads(x)["key"] for x in ck.read_text().splitlines()[1:]] == [
        json.loads(x)["key"] for x in lines[1:]
    ]
    # lines that are not scored requests (another --k-max's counts, a number, a stray object)
    bad = [lines[0], lines[1], "123", '{"key": 1}', lines[2].replace("[", "[9, ", 1), *lines[3:]]
    ck.write_text("\n".join(bad) + "\n")
    again = measure_offline(_cfg(tiny, log, "ngram", checkpoint=ck))
    assert again.overall == full.overall
    assert again.offline is not None
    assert any(
        "3 lines are not scored requests (lines 3, 4, 5)" in n for n in offline_notes(again.offline)
    )


@pytest.mark.parametrize(
    ("first", "needle"),
    [
        ('{"run_id": "x", "id": 0}', "not a measure offline checkpoint"),  # a bench log
        ("[1, 2]", "not a measure offline checkpoint"),
        ("\xff\xfe", "not a measure offline checkpoint"),
        ('{"fingerprint": "0000", "settings": {"k": 2}}', "k 2 there, 3 here"),
    ],
)
def test_a_checkpoint_of_another_run_is_refused_naming_it(
    tiny: Tiny, log: Path, tmp_path: Path, first: str, needle: str
) -> None:
    ck = tmp_path / "other.jsonl"
    ck.write_bytes(first.encode("latin-1") + b"\n")
    with pytest.raises(MeasureError) as e:
        measure_offline(_cfg(tiny, log, "ngram", checkpoint=ck))
    assert needle in str(e.value) and str(ck) in str(e.value)
    assert e.value.exit_code == 2
    assert ck.read_bytes() == first.encode("latin-1") + b"\n"  # left as it was


def test_a_draft_model_whose_weights_are_another_architecture_is_refused(tiny: Tiny) -> None:
    """An EAGLE-3 head given as draft_model: transformers would fill the decoder it lacks with
    random weights and go on; the missing weights are checked and the drafter refused."""
    with pytest.raises(MeasureError) as e:
        load_models(str(tiny.target), DrafterSpec("draft_model", str(tiny.eagle3)))
    msg = str(e.value)
    assert "do not fit its architecture" in msg and "missing" in msg and "fc.weight" in msg
    assert "--drafter eagle3:PATH" in msg
    models = load_models(str(tiny.target), DrafterSpec("draft_model", str(tiny.draft)))
    assert isinstance(models.proposer, DraftModelProposer)  # its own weights: it loads
