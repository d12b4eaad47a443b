"""Run in an SGLang virtualenv (CPU): SGLang's own code on what alphagate produced, without
starting a server. Reads one JSON object on stdin and prints one JSON answer:

- ``{"tree": [case, …]}``: each case a draft phase's candidates in SGLang's flat layout (scores,
  tokens, the parent of each row of top-k candidates) and a trajectory; SGLang picks the
  ``num_draft_tokens − 1`` best (as ``organize_draft_results`` in
  ``python/sglang/srt/speculative/eagle_utils.py`` does: ``torch.topk`` then sorted indices),
  builds the tree with its Triton kernel (``sgl_build_tree_kernel_triton``,
  ``python/sglang/kernels/ops/speculative/spec_tree.py``) and verifies it greedily
  (``verify_tree_greedy_triton``), both run by Triton's interpreter (``TRITON_INTERPRET=1``);
  the target's prediction after each node is the trajectory's next token. Answers each case's
  accepted drafts.
- ``{"argv": [[…], …]}``: each a ``python -m sglang.launch_server`` argument list (after the
  module), parsed by ``sglang.srt.server_args.prepare_server_args`` — SGLang's own argument
  parser and ``ServerArgs``. Answers what it understood, or the error.

The SGLang package is imported without its compiled kernels (``sgl_kernel`` is not installed on
a CPU-only machine): the two names ``spec_tree`` imports from it on CPU are stubbed, and the
Triton versions of the same kernels are called instead.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import types


def _trees(cases: list[dict[str, object]]) -> list[int]:
    os.environ["TRITON_INTERPRET"] = "1"
    stub = types.ModuleType("sgl_kernel")
    stub.build_tree_kernel_efficient_cpu = None  # type: ignore[attr-defined]
    stub.verify_tree_greedy_cpu = None  # type: ignore[attr-defined]
    sys.modules.setdefault("sgl_kernel", stub)
    import torch
    from sglang.kernels.ops.speculative.spec_tree import (
        TreeMaskMode,
        sgl_build_tree_kernel_triton,
        verify_tree_greedy_triton,
    )

    out = []
    for c in cases:
        topk, steps, n = int(c["topk"]), int(c["steps"]), int(c["draft_tokens"])  # type: ignore[call-overload]
        scores = torch.tensor([c["scores"]], dtype=torch.float64)
        tokens = torch.tensor([c["tokens"]], dtype=torch.long)
        parent_list = torch.tensor([c["parent_list"]], dtype=torch.long)
        truth = list(c["truth"])  # type: ignore[call-overload]
        # organize_draft_results: the n − 1 best, their indices sorted
        sel = torch.sort(torch.topk(scores, n - 1, dim=-1).indices).values
        seq_lens = torch.tensor([100], dtype=torch.long)
        mask = torch.ones(n * n, dtype=torch.bool)
        positions = torch.empty(n, dtype=torch.long)
        ret = torch.full((3, 1, n), -1, dtype=torch.long)
        sgl_build_tree_kernel_triton(
            parent_list, sel, seq_lens, mask, positions, ret[0], ret[1], ret[2],
            topk, steps, n, TreeMaskMode.QLEN_ONLY,
        )  # fmt: skip
        cand = torch.cat([torch.tensor([[-1]]), torch.gather(tokens, 1, sel)], dim=1)
        depth = positions - 100
        target = torch.tensor([[truth[int(d)] if d < len(truth) else -2 for d in depth]])
        predicts = torch.full((n,), -1, dtype=torch.int32)
        accept_index = torch.full((1, steps + 1), -1, dtype=torch.int32)
        accept_num = torch.zeros(1, dtype=torch.int32)
        verify_tree_greedy_triton(
            predicts, accept_index, accept_num, cand, ret[0], ret[1], ret[2], target
        )
        out.append(int(accept_num[0]))
    return out


def _argv(lines: list[list[str]]) -> list[dict[str, object]]:
    from sglang.srt.server_args import prepare_server_args

    answers: list[dict[str, object]] = []
    for argv in lines:
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                a = prepare_server_args(list(argv))
        except SystemExit:
            answers.append({"ok": False, "error": err.getvalue().strip().splitlines()[-1:]})
            continue
        except Exception as exc:  # SGLang's own validation, reported as it says it
            answers.append({"ok": False, "error": f"{type(exc).__name__}: {exc}"})
            continue
        answers.append(
            {
                "ok": True,
                **{
                    f: getattr(a, f)
                    for f in (
                        "model_path", "tp_size", "port", "max_running_requests",
                        "chunked_prefill_size", "kv_cache_dtype", "quantization",
                        "served_model_name", "speculative_algorithm",
                        "speculative_draft_model_path", "speculative_num_steps",
                        "speculative_eagle_topk", "speculative_num_draft_tokens",
                    )
                },
            }
        )  # fmt: skip
    return answers


def main() -> None:
    request = json.load(sys.stdin)
    answer: dict[str, object] = {}
    if "tree" in request:
        answer["tree"] = _trees(request["tree"])
    if "argv" in request:
        answer["argv"] = _argv(request["argv"])
    sys.stdout.write(json.dumps(answer, default=str) + "\n")


if __name__ == "__main__":
    main()
