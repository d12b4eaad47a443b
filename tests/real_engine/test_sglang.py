"""SGLang's own code on what alphagate computes, in an SGLang virtualenv on this CPU (no server):
its tree build and greedy tree verification against :mod:`alphagate.measure.offline.tree`, and
its argument parser on the ``python -m sglang.launch_server`` lines a plan prints.

Runs with the real-engine tier when ``ALPHAGATE_SGLANG_PYTHON`` names the interpreter of a
virtualenv where ``sglang`` imports (``pip install --no-deps sglang`` and the few modules
``sglang.srt.server_args`` imports; Triton for the kernels, run by its interpreter).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from alphagate.measure.offline.tree import Expansion, expand, tree_runs
from alphagate.specs.tree import TreeShape
from tests.measure.offline.test_tree import _random_dist, _walk, toy

PYTHON = os.environ.get("ALPHAGATE_SGLANG_PYTHON", "")
CHECK = Path(__file__).with_name("sglang_check.py")

pytestmark = pytest.mark.skipif(
    not PYTHON or not Path(PYTHON).exists(),
    reason="ALPHAGATE_SGLANG_PYTHON: an SGLang virtualenv's python",
)


def sglang(request: dict[str, Any]) -> dict[str, Any]:
    """Run :mod:`sglang_check` in the SGLang virtualenv on ``request``."""
    out = subprocess.run(
        [PYTHON, str(CHECK)],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _case(e: Expansion, shape: TreeShape, q: int, truth: list[int]) -> dict[str, Any]:
    """One context's candidates as SGLang's draft phase hands them to the verify pass."""
    k, within = e.topk, shape.topk + (shape.steps - 1) * shape.topk**2
    rows = within // k
    return {
        "topk": k,
        "steps": shape.steps,
        "draft_tokens": shape.draft_tokens,
        "scores": e.scores[q, :within].tolist(),
        "tokens": e.tokens[q, :within].tolist(),
        # the parent of row r of k candidates (row 0: the root's children)
        "parent_list": [-1] + [int(e.parent[q, r * k]) for r in range(1, rows)],
        "truth": truth,
    }


def test_tree_acceptance_is_sglangs() -> None:
    rng = np.random.default_rng(3)
    cases, want = [], []
    for topk, steps in ((2, 3), (3, 4), (4, 5), (1, 4)):
        dist = _random_dist(rng, vocab=8, width=topk)
        truths = [_walk(dist, rng, steps) for _ in range(6)] + [list(rng.integers(0, 8, steps))]
        root_p, root_t, kids = toy(dist, len(truths), topk)
        e = expand(root_p, root_t, kids, steps)  # type: ignore[arg-type]
        shapes = {
            TreeShape(steps=s, topk=topk, draft_tokens=n)
            for s in (steps - 1, steps)
            for n in (s + 1, 2 * s, min(3 * s, topk + (s - 1) * topk * topk + 1))
            if topk > 1 or n == s + 1
        }
        for shape in sorted(shapes, key=lambda x: x.label()):
            runs = tree_runs(e, [shape], np.asarray(truths))[0]
            for q, truth in enumerate(truths):
                cases.append(_case(e, shape, q, [int(x) for x in truth]))
                want.append(int(runs[q]))
    got = sglang({"tree": cases})["tree"]
    assert got == want
    assert max(want) >= 3  # long acceptances were exercised


def test_the_launch_lines_a_plan_prints_are_accepted_by_sglangs_parser(tmp_path: Path) -> None:
    """Both servers of an SGLang tree plan, as printed, through ``prepare_server_args``: what
    SGLang understood is the modelled deployment and the shipped shape."""
    from alphagate.plan import build_plan
    from tests.plan.test_trees import CHAIN, GOOD_TREE, WIDE, _offline, _request, _tree

    f = _offline(
        tmp_path / "o.json",
        {"code": [_tree(WIDE, GOOD_TREE)], "chat": [_tree(WIDE, GOOD_TREE)]},
        CHAIN,
    )
    req = _request(f)
    plan = build_plan(req)
    lines = [plan.serve_baseline, plan.serve_candidate]
    assert all(x[:3] == ["python", "-m", "sglang.launch_server"] for x in lines)
    got = sglang({"argv": [x[3:] for x in lines]})["argv"]
    assert all(g["ok"] for g in got), got
    base, cand = got
    dep = req.deployment
    for g in got:
        assert g["model_path"] == plan.checkpoint and g["tp_size"] == plan.deployment_detail.tp
        assert g["max_running_requests"] == dep.max_num_seqs
        assert g["chunked_prefill_size"] == dep.max_num_batched_tokens
    assert base["speculative_algorithm"] is None
    assert (
        cand["speculative_algorithm"],
        cand["speculative_num_steps"],
        cand["speculative_eagle_topk"],
        cand["speculative_num_draft_tokens"],
    ) == ("EAGLE3", WIDE.steps, WIDE.topk, WIDE.draft_tokens)
    # and a line SGLang's parser refuses is reported as such (the check can fail)
    bad = sglang({"argv": [["--model-path", "m", "--speculative-eagle-topk", "four"]]})["argv"][0]
    assert not bad["ok"] and "speculative-eagle-topk" in str(bad["error"])


def test_sglangs_parser_has_no_suffix_decoding() -> None:
    """Why ``plan --method suffix --engine sglang`` is refused: the installed SGLang's own parser
    has none of suffix decoding's settings (the suffix workers are in unmerged pull requests;
    ``SUFFIX`` is not one of ``SpeculativeAlgorithm``'s names either, only a name a plugin could
    register), while it takes the n-gram algorithm, its model-free neighbour."""
    got = sglang(
        {"argv": [
            ["--model-path", "m", "--speculative-algorithm", "SUFFIX",
             "--speculative-num-draft-tokens", "9", "--speculative-suffix-max-tree-depth", "24"],
            ["--model-path", "m", "--speculative-algorithm", "NGRAM",
             "--speculative-num-draft-tokens", "9"],
        ]}
    )["argv"]  # fmt: skip
    suffix, ngram = got
    assert not suffix["ok"] and "--speculative-suffix-max-tree-depth" in str(suffix["error"])
    assert ngram["ok"] and ngram["speculative_algorithm"] == "NGRAM", ngram
