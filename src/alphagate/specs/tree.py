"""An EAGLE draft tree's shape, as SGLang takes it: ``--speculative-num-steps`` (the depth),
``--speculative-eagle-topk`` (children kept per node, and nodes kept per depth) and
``--speculative-num-draft-tokens`` (positions one verify pass checks, the root included).

SGLang's draft phase (``python/sglang/srt/speculative/eagle_worker_v2.py``, ``draft_forward``;
``spec_utils.py``, ``select_top_k_tokens``) keeps, at each of its steps, the top-k children of
each of the top-k nodes of the step before — ``topk + (steps − 1)·topk²`` candidates in all —
and ``eagle_utils.py`` (``organize_draft_results``) verifies the ``num_draft_tokens − 1`` of them
with the highest cumulative draft probability. Its rules for the three flags
(``python/sglang/srt/arg_groups/speculative_hook.py``): with top-k 1 the draft tokens are the
steps + 1 of a chain (another value is adjusted to it), and a tree cannot verify more nodes
than its draft phase produced (``torch.topk`` over the candidates would fail).
"""

from __future__ import annotations

from pydantic import Field, model_validator

from alphagate.core.records import Frozen

__all__ = ["TreeShape", "chain_shape", "parse_tree_shape"]


class TreeShape(Frozen):
    """``(num_steps, eagle_topk, num_draft_tokens)``: one SGLang EAGLE tree."""

    steps: int = Field(ge=1, le=32, description="--speculative-num-steps: the tree's depth")
    topk: int = Field(ge=1, le=16, description="--speculative-eagle-topk")
    draft_tokens: int = Field(
        ge=2, le=1024, description="--speculative-num-draft-tokens: verified positions, root too"
    )

    @model_validator(mode="after")
    def _sglang_rules(self) -> TreeShape:
        if self.topk == 1 and self.draft_tokens != self.steps + 1:
            raise ValueError(
                f"top-k 1 is a chain: SGLang sets num_draft_tokens to num_steps + 1 = "
                f"{self.steps + 1}, not {self.draft_tokens}"
            )
        if self.draft_tokens - 1 > self.candidates:
            raise ValueError(
                f"{self.draft_tokens - 1} draft nodes to verify, but {self.steps} steps of "
                f"top-{self.topk} propose only {self.candidates}"
            )
        return self

    @property
    def candidates(self) -> int:
        """Nodes the draft phase proposes: top-k at the first step, top-k² at each later one."""
        return self.topk + (self.steps - 1) * self.topk * self.topk

    @property
    def draft_nodes(self) -> int:
        """Draft nodes one verify pass checks (the root is the last verified token)."""
        return self.draft_tokens - 1

    @property
    def depth(self) -> int:
        """The most drafts one step can accept: the steps, and no more than the nodes."""
        return min(self.steps, self.draft_nodes)

    @property
    def is_chain(self) -> bool:
        return self.topk == 1

    def label(self) -> str:
        """``steps/topk/draft_tokens``, the order SGLang's flags are usually quoted in."""
        return f"{self.steps}/{self.topk}/{self.draft_tokens}"


def chain_shape(k: int) -> TreeShape:
    """K drafts in a chain, as SGLang runs it (top-k 1, K + 1 draft tokens)."""
    return TreeShape(steps=k, topk=1, draft_tokens=k + 1)


def parse_tree_shape(text: str) -> TreeShape:
    """``STEPS:TOPK:DRAFT_TOKENS`` → a shape; ``ValueError`` naming what is wrong."""
    parts = text.split(":")
    if len(parts) != 3 or not all(p.strip().isdigit() for p in parts):
        raise ValueError(
            f"{text!r}: expected STEPS:TOPK:DRAFT_TOKENS (SGLang's --speculative-num-steps, "
            "--speculative-eagle-topk, --speculative-num-draft-tokens), e.g. 5:4:8"
        )
    steps, topk, tokens = (int(p) for p in parts)
    return TreeShape(steps=steps, topk=topk, draft_tokens=tokens)
