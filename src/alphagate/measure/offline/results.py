"""The records ``measure offline`` adds to a :class:`~alphagate.measure.results.MeasureResult`:
acceptance for every K up to ``--k-max``, the acceptance-length histogram, what was read and
used, and how the numbers were obtained. The acceptance at the chosen K itself is the result's
ordinary ``overall`` / ``classes`` (:class:`~alphagate.measure.estimate.AcceptanceEstimate`), so
``plan --alpha-from`` and ``gate --measure`` read it per class like any measurement."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from alphagate.core.records import Frozen
from alphagate.measure.estimate import Interval
from alphagate.specs.deployment import SuffixParams
from alphagate.specs.tree import TreeShape

__all__ = [
    "AGREEMENT_WARN",
    "NOT_ITS_OWN",
    "CheckpointBadLines",
    "CheckpointCut",
    "CheckpointNote",
    "OfflineClass",
    "OfflineDetails",
    "OfflineK",
    "OfflineTree",
    "Skipped",
]

#: Greedy runs: below this share of the logged output tokens that are the target's own greedy
#: choice, the log is taken not to be the target's own output (another model, sampling, people,
#: or another chat template)…
NOT_ITS_OWN = 0.9
#: …and below this share, near-ties that flip between this run's numerics and the server's.
AGREEMENT_WARN = 0.999


class OfflineK(Frozen):
    """Acceptance at one K, with 95% bootstrap intervals over requests."""

    k: int
    num_drafts: float
    draft_acceptance_rate: float | None = Field(description="ρ = accepted ÷ drafted")
    draft_acceptance_rate_ci: Interval | None
    mean_acceptance_length: float | None = Field(description="τ = 1 + accepted ÷ drafts")
    mean_acceptance_length_ci: Interval | None
    alpha_iid: float | None = Field(description="the i.i.d. conditional α that gives this ρ")
    alpha_iid_ci: Interval | None


class OfflineTree(Frozen):
    """One SGLang draft tree (``--tree``), replayed greedy: what its verify passes accept, beside
    the chain of as many steps (top-k 1)."""

    shape: TreeShape
    verify_passes: float
    mean_acceptance_length: float | None = Field(
        description="τ = 1 + accepted ÷ verify passes (SGLang's spec_accept_length)"
    )
    mean_acceptance_length_ci: Interval | None
    accept_rate: float | None = Field(
        description="SGLang's spec_accept_rate: accepted ÷ (passes · (draft_tokens − 1))"
    )
    acceptance_length_histogram: list[float] = Field(
        description="verify passes that accepted exactly j drafts, j = 0 … the tree's depth"
    )
    chain_mean_acceptance_length: float | None = Field(
        description="τ of the chain of the same steps (K = steps, top-k 1), for comparison"
    )

    @property
    def accepted_per_pass(self) -> float | None:
        """Drafts accepted per verify pass, τ − 1."""
        tau = self.mean_acceptance_length
        return None if tau is None else tau - 1.0


class OfflineClass(Frozen):
    """One class (or all traffic): what it held, and acceptance for every K."""

    requests: int
    prompt_tokens: int
    output_tokens: int
    by_k: list[OfflineK] = Field(description="K = 1 … k_max")
    acceptance_length_histogram: list[float] = Field(
        description="at the chosen K: steps that emitted j + 1 tokens (j drafts accepted), j = 0…K"
    )
    draft_length_histogram: list[float] | None = Field(
        default=None,
        description="drafts of variable length (suffix decoding): engine steps that drafted L "
        "tokens, L = 0…K (L = 0: a step without a draft, which vLLM does not count)",
    )
    acceptance_by_length: list[list[float]] | None = Field(
        default=None,
        description="drafts of variable length: engine steps that drafted L tokens and accepted "
        "a of them, row L = 0…K, entry a = 0…L (what the simulator draws a step from)",
    )
    trees: list[OfflineTree] = Field(
        default_factory=list, description="--tree: each SGLang draft tree replayed (greedy)"
    )


class Skipped(Frozen):
    """Lines or requests left out for one reason."""

    reason: str
    count: int
    first: list[str] = Field(description="the first few, as file:line")


class CheckpointCut(Frozen):
    """The checkpoint ended in a line cut by a crash: the line was moved aside, and the run
    resumed from the whole lines before it."""

    kind: Literal["cut"] = "cut"
    path: str
    moved_to: str
    whole_lines: int = Field(description="scored requests the checkpoint held whole")


class CheckpointBadLines(Frozen):
    """Checkpoint lines that are not scored requests: those requests were scored again."""

    kind: Literal["bad_lines"] = "bad_lines"
    path: str
    lines: list[int] = Field(description="their line numbers in the file")


CheckpointNote = Annotated[CheckpointCut | CheckpointBadLines, Field(discriminator="kind")]


class OfflineDetails(Frozen):
    """How an offline measurement was made."""

    drafter: str = Field(description="ngram(min, max), draft_model PATH or eagle3 PATH")
    target: str
    k: int
    k_max: int
    semantics: Literal["greedy", "sampling"]
    semantics_note: str = Field(
        default="", description="the semantics in words (alphagate.report.reasons)"
    )
    temperature: float
    top_p: float
    top_k: int
    draft_sampling: Literal["greedy", "probabilistic"]
    regenerated: bool = Field(
        description="the target's own continuation replaced the logged output"
    )
    seed: int
    sample: int | None = Field(description="--sample: a seeded subset of this many requests")
    requests_read: int
    requests_used: int
    prompt_tokens: int
    output_tokens: int
    skipped: list[Skipped] = Field(default_factory=list)
    truncated: int = Field(description="requests cut to fit the context")
    retokenized: int = Field(description="requests whose output ids came from re-tokenizing text")
    trajectory_agreement: float | None = Field(
        description="share of logged output tokens that are the target's own greedy choice"
    )
    bootstrap_resamples: int
    wall_s: float
    classes: dict[str, OfflineClass] = Field(default_factory=dict)
    overall: OfflineClass
    max_model_len: int | None = Field(
        default=None, description="--max-model-len: requests were cut to fit it (None: the model's)"
    )
    checkpoint: list[CheckpointNote] = Field(
        default_factory=list, description="what the resumed checkpoint did not hold whole"
    )
    suffix: SuffixParams | None = Field(
        default=None,
        description="suffix decoding: the trees' settings replayed (K is num_speculative_tokens)",
    )
    arctic_inference: str | None = Field(
        default=None, description="suffix decoding: the arctic-inference release replayed"
    )
