"""``measure offline --tree`` with real (tiny) models on disk: SGLang's draft tree of an EAGLE-3
head, replayed greedy. A tree of top-k 1 is the chain (every counter equal); the head's children
of a tree node are its own step on that node's token; the trees resume from a checkpoint; and
bad combinations are refused naming ``--tree``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from alphagate.measure.offline.config import OfflineConfig  # noqa: E402
from alphagate.measure.offline.proposers import DrafterSpec  # noqa: E402
from alphagate.measure.offline.replay import load_models  # noqa: E402
from alphagate.measure.offline.run import measure_offline  # noqa: E402
from tests.conftest import Cli  # noqa: E402
from tests.measure.offline.fixtures import Tiny, build, greedy_log  # noqa: E402

PROMPTS = ["def wrap(text, width=70, **kwargs):\n    ", "((((((((", "0000000000"]
TREES = ("3:1:4", "4:1:5", "3:2:6", "4:3:10")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Tiny:
    return build(tmp_path_factory.mktemp("tree-models"))


@pytest.fixture(scope="module")
def log(tiny: Tiny, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tree-log") / "log.jsonl"
    greedy_log(tiny, path, PROMPTS, 20, ["code", "code", "digits"])
    return path


def _cfg(tiny: Tiny, log: Path, **kw: object) -> OfflineConfig:
    base: dict[str, object] = {
        "logs": (log,),
        "target": str(tiny.target),
        "drafter": "eagle3",
        "drafter_path": str(tiny.eagle3),
        "k": 3,
        "tree": TREES,
        "resamples": 20,
        "class_field": "request.meta.cls",
    }
    return OfflineConfig(**{**base, **kw})


def test_a_top_k_one_tree_is_the_chain(tiny: Tiny, log: Path) -> None:
    r = measure_offline(_cfg(tiny, log))
    d = r.offline
    assert d is not None and d.k_max == 4  # the deepest tree's steps
    for c in (d.overall, *d.classes.values()):
        three, four, wide, deep = c.trees
        assert three.verify_passes == c.by_k[2].num_drafts
        assert three.mean_acceptance_length == pytest.approx(c.by_k[2].mean_acceptance_length)
        assert three.acceptance_length_histogram == c.acceptance_length_histogram  # K = 3
        assert four.verify_passes == c.by_k[3].num_drafts
        assert four.mean_acceptance_length == pytest.approx(c.by_k[3].mean_acceptance_length)
        # SGLang's accept rate of a chain is vLLM's ρ at its K
        assert three.accept_rate == pytest.approx(c.by_k[2].draft_acceptance_rate)
        for tree in (wide, deep):  # passes that accepted j drafts sum to the accepted drafts
            h = tree.acceptance_length_histogram
            assert sum(h) == tree.verify_passes and len(h) == tree.shape.depth + 1
            accepted = sum(j * n for j, n in enumerate(h))
            assert tree.mean_acceptance_length == pytest.approx(1 + accepted / sum(h))
            assert tree.accept_rate == pytest.approx(accepted / sum(h) / tree.shape.draft_nodes)


def test_a_tree_nodes_children_are_the_heads_step_on_its_token(tiny: Tiny, log: Path) -> None:
    """Depth-2 candidates: the head's own step from the root's output, fed each depth-1 node's
    token — what its chain computes when the trajectory's token there is that node's."""
    from alphagate.measure.offline.replay import encode
    from alphagate.measure.offline.requests import read_logs

    m = load_models(str(tiny.target), DrafterSpec("eagle3", str(tiny.eagle3)))
    head = m.proposer.head  # type: ignore[attr-defined]
    enc = encode(read_logs([log]).requests[0], m.tokenizer, m.max_model_len, 3)
    assert enc is not None
    seq = np.concatenate([enc.prompt, enc.output])
    _, aux, _ = m.target.hidden(seq, aux_ids=head.aux_ids)
    contexts = np.arange(enc.prompt.size + 1, seq.size - 2, dtype=np.int64)
    exp = head.tree_drafts(aux, seq, contexts, 2, 2)
    for r in range(2):  # the two depth-1 nodes
        want = [
            _chain_children(head, aux, seq, t, int(exp.tokens[i, r]))
            for i, t in enumerate(contexts)
        ]
        assert exp.tokens[:, 2 + 2 * r : 4 + 2 * r].tolist() == want


def _chain_children(head: object, aux: object, seq: np.ndarray, t: int, token: int) -> list[int]:
    """The top-2 of the head's second chain step at context ``t`` when the trajectory's token
    there is ``token``."""
    forced = seq.copy()
    forced[t] = token
    got: list[int] = []

    def take(j: int, rows: np.ndarray, normed: torch.Tensor) -> np.ndarray:
        if j == 1:
            probs = torch.softmax(head.draft_logits(normed), -1)  # type: ignore[attr-defined]
            got.extend(torch.topk(probs, 2).indices[0].tolist())
        return np.ones(rows.size, dtype=bool)

    head.drafts(aux, forced, np.asarray([t]), 2, take)  # type: ignore[attr-defined]
    return got


def test_trees_resume_from_a_checkpoint(tiny: Tiny, log: Path, tmp_path: Path) -> None:
    ck = tmp_path / "ck.jsonl"
    full = measure_offline(_cfg(tiny, log, checkpoint=ck))
    lines = ck.read_text().splitlines()
    ck.write_text("\n".join(lines[:2]) + "\n")  # the head and one request
    resumed = measure_offline(_cfg(tiny, log, checkpoint=ck))
    assert resumed.offline is not None and full.offline is not None
    assert resumed.offline.overall.trees == full.offline.overall.trees


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--drafter", "ngram"], "EAGLE-3 head"),
        (["--drafter", "eagle3:X", "--temperature", "0.5"], "greedy"),
        (["--drafter", "eagle3:X", "--tree", "3:1:5"], "num_steps + 1 = 4"),
        (["--drafter", "eagle3:X", "--tree", "3x2"], "STEPS:TOPK:DRAFT_TOKENS"),
    ],
)
def test_bad_trees_are_refused_naming_the_flag(
    cli: Cli, log: Path, extra: list[str], message: str
) -> None:
    args = ["measure", "offline", "--log", str(log), "--target", "T", "--no-progress"]
    if "--tree" not in extra:
        extra = [*extra, "--tree", "3:2:6"]
    r = cli.run(*args, *extra)
    assert r.exit_code == 2, r.output
    assert "--tree" in r.output and message in r.output
