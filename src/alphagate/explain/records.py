"""The typed result of ``alphagate explain``: per load level, each tail figure's change taken
apart by mechanism, the remedies ranked by their predicted effect, and the worst requests'
timelines.

A figure's change is a product of factors (:mod:`alphagate.explain.attribution`): candidate ÷
baseline = Π (each mechanism's factor) × the ideal gain (what speculation would give if every
step paid its mean yield at a decode step's price) × the residual the replays do not explain.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from alphagate.core.records import Frozen, Results
from alphagate.measure.estimate import Interval

__all__ = [
    "EFFECTS",
    "MECHANISMS",
    "METRICS",
    "ExplainResult",
    "Factor",
    "LevelExplanation",
    "Mechanism",
    "Metric",
    "MetricExplanation",
    "Remedy",
    "RemedyKind",
    "Timeline",
    "TimelineChunk",
]

Mechanism = Literal["rejection", "verify", "prefill", "capacity", "client"]
#: What each mechanism does to the tail, in one clause.
EFFECTS: dict[Mechanism, str] = {
    "rejection": "steps whose drafts were all rejected yield one token for a verify pass",
    "verify": "a speculative step (K + 1 tokens per sequence, and the drafter) costs more than "
    "a decode step",
    "prefill": "prompts share the decodes' steps, and K + 1 tokens per sequence leave them less "
    "of the token budget",
    "capacity": "the candidate holds fewer requests at once, so the rest wait",
    "client": "the client read chunks late, or the server woke late",
}
#: What each mechanism is, and the counterfactual that removes it.
MECHANISMS: dict[Mechanism, tuple[str, str]] = {
    "rejection": (
        "rejection streaks",
        "each request's tokens spread evenly over its chunks: no step yields less than its mean",
    ),
    "verify": (
        "verify-step growth",
        "every step priced as a decode step of the same batch and prefill (no drafting, no "
        "K + 1 verify tokens)",
    ),
    "prefill": (
        "prefill interference",
        "prefills apart: each prompt prefilled whole at once, at no cost to the decodes",
    ),
    "capacity": (
        "capacity",
        "the candidate holds as many requests at once as the baseline (its KV room and token "
        "budget no lower)",
    ),
    "client": (
        "client and server lateness",
        "the replays' chunk gaps as the steps gave them, without the lateness the measured "
        "gaps show around each request's own (the client reading late, the server waking late)",
    ),
}
Metric = Literal["itl_per_token_p99_ms", "itl_per_token_p99_9_ms", "ttft_p99_ms"]
METRICS: dict[Metric, str] = {
    "itl_per_token_p99_ms": "ITL/token P99",
    "itl_per_token_p99_9_ms": "ITL/token P99.9",
    "ttft_p99_ms": "TTFT P99",
}


class Factor(Frozen):
    """One mechanism's part of a figure's change: the factor it multiplies the candidate ÷
    baseline ratio by (its Shapley value over the counterfactual replays, in logs), and its share
    of what pushed the figure up."""

    mechanisms: list[Mechanism] = Field(
        description="one mechanism, or several the data cannot separate (reported together)"
    )
    label: str
    factor: float = Field(description="× on candidate ÷ baseline (> 1: it raised the figure)")
    factor_interval: Interval | None = Field(description="95%, bootstrap over requests")
    share: float | None = Field(
        description="of the rise: log factor ÷ the sum of the rising factors' logs (None: it "
        "lowered the figure)"
    )
    share_interval: Interval | None


class MetricExplanation(Frozen):
    """One tail figure at one level: measured, simulated, and taken apart."""

    metric: Metric
    label: str
    baseline_ms: float = Field(description="measured")
    candidate_ms: float = Field(description="measured")
    ratio: float = Field(description="measured candidate ÷ baseline (> 1: worse)")
    ratio_interval: Interval | None = Field(description="95%, bootstrap over requests")
    simulated_baseline_ms: float = Field(description="the simulator replaying the requests")
    simulated_candidate_ms: float
    simulated_ratio: float
    engine_ratio: float = Field(
        description="the replays' ratio without any client lateness: the change the server's "
        "steps alone make"
    )
    gain: float = Field(
        description="candidate ÷ baseline with every mechanism removed: speculation's mean "
        "yield at a decode step's price (< 1)"
    )
    residual: float = Field(
        description="the measured ratio ÷ the simulated one: what the replays do not explain"
    )
    residual_interval: Interval | None
    factors: list[Factor] = Field(description="rising factors first, largest share first")
    inseparable: list[str] = Field(
        default_factory=list, description="why factors were reported together"
    )
    why: str = Field(description="the change and what made it, in one sentence")


class TimelineChunk(Frozen):
    """One streamed chunk of a request, as the client saw it."""

    at_ms: float = Field(description="since the request was sent")
    tokens: int
    gap_ms: float | None = Field(description="since the chunk before (None: the first)")
    rejected: bool = Field(description="a speculating step that yielded one token")
    prefill_stall: bool = Field(
        description="another request's first token arrived inside the gap: a prefill chunk "
        "shared the step"
    )


class Timeline(Frozen):
    """One of the worst requests of the candidate: its chunks and what stalled them."""

    request: int
    run: int
    cls: str | None
    worst_itl_per_token_ms: float
    chunks: list[TimelineChunk]


RemedyKind = Literal[
    "k_by_batch",
    "off_above",
    "smaller_k",
    "max_batched_tokens",
    "route_class",
    "better_head",
    "kv_room",
]


class Remedy(Frozen):
    """A change, what the simulator predicts after it on the same requests, and how to apply it.

    Predictions are the simulated figures after the change × the step-time model's error before
    it (measured ÷ simulated, on the candidate's mean above its 95th percentile), so a constant
    error of the step-time model cancels; the interval also covers the error taken on the P99
    itself."""

    kind: RemedyKind
    title: str
    assumption: str | None = Field(
        default=None, description="what the prediction assumes that the data do not show"
    )
    itl_per_token_p99_ms: float
    itl_per_token_p99_interval: Interval | None
    ttft_p99_ms: float
    ttft_p99_interval: Interval | None
    throughput_ratio: float = Field(description="output tokens/s, after ÷ the baseline's")
    fixes_tail: bool = Field(
        description="the predicted P99 ITL/token and P99 TTFT are both within the budget of the "
        "baseline's measured ones"
    )
    excess: float = Field(
        description="how far the predicted P99s stay above the budget: the sum of the logs of "
        "predicted ÷ (budget × baseline) that are positive (0: fixed)"
    )
    flags: list[str] = Field(
        default_factory=list, description="the engine flags to change (vLLM's names; the twin's)"
    )
    command: str | None = Field(
        default=None, description="the serving command with the change applied"
    )
    action: str | None = Field(default=None, description="a change no engine flag makes")
    classes: dict[str, list[float]] | None = Field(
        default=None, description="a better head: the α by position per class it assumes"
    )


class LevelExplanation(Frozen):
    """One load level of the A/B, explained."""

    level: str
    concurrency: int | None
    rate: float | None
    requests: int = Field(description="candidate requests replayed")
    k: int
    k_source: str
    classes: dict[str, list[float]] = Field(description="α per position used, per class")
    alpha_source: str
    batch_cap: tuple[int, int] = Field(description="largest batch (baseline, candidate)")
    batch_cap_source: str
    metrics: list[MetricExplanation]
    remedies: list[Remedy] = Field(description="ranked: fixes the tail first, then the rest")
    worst: list[Timeline]
    notes: list[str] = Field(default_factory=list)


class ExplainResult(Results):
    """What ``alphagate explain`` writes (``--json``)."""

    verb: Literal["explain"] = "explain"
    bench: str = Field(description="the bench summary explained")
    run_id: str
    deployment: str = Field(description="the step-time model the replays ran on")
    calibration: str | None = None
    levels: list[LevelExplanation]
    bootstrap: int = Field(description="resamples of the requests behind every interval")
    notes: list[str] = Field(default_factory=list)
