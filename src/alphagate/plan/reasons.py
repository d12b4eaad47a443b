"""Why a plan says what it says, as typed records: the builder returns these, with the figures
each needs, and :mod:`alphagate.report.reasons` words them (stats count, logging formats — as
vLLM's ``SpecDecodingStats`` and ``SpecDecodingLogging`` split it).

Every record carries a ``kind`` that names it in the plan JSON (``"reasons"``), so a program can
read why without parsing a sentence:

- :data:`VerdictReason` — why the verdict (one);
- :data:`VerdictChange` — what would turn a NO-GO or MEASURE FIRST (a list);
- :data:`Qualifier` — what a verdict rests on that is not measured, or that the user allowed;
- :data:`TailAction` — what the P99 watch at the target changed to keep the tail, or why it could
  not.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from alphagate.core.records import Frozen, Interval

__all__ = [
    "AlphaNeeded",
    "GainWithinError",
    "KLowered",
    "MeasurePrior",
    "NoAlphaPays",
    "NoClassClearsGate",
    "NoKPays",
    "OnPriors",
    "P99Budget",
    "PaysUpTo",
    "PeakRun",
    "PlanReasons",
    "PriorLowEnd",
    "Qualifier",
    "RangeHoldsOne",
    "RoutedClass",
    "RoutedForTail",
    "Settle",
    "Shipped",
    "ShippedForSome",
    "TailAction",
    "TailKept",
    "TailPastBudget",
    "TailPredicted",
    "TailUnfixable",
    "TailWithinBudget",
    "VerdictChange",
    "VerdictReason",
]


# ---------------------------------------------------------------- what the tail watch did
class KLowered(Frozen):
    """K lowered at the target and above, to the largest paying K whose tail fits."""

    kind: Literal["k_lowered"] = "k_lowered"
    from_k: int
    to_k: int
    concurrency: int


class RoutedForTail(Frozen):
    """The lowest-α classes served without speculation, so that the rest's tail fits."""

    kind: Literal["routed_for_tail"] = "routed_for_tail"
    classes: list[str]


class TailUnfixable(Frozen):
    """No K in 1..``k`` and no routing keeps the tail within the budget."""

    kind: Literal["tail_unfixable"] = "tail_unfixable"
    k: int


TailAction = Annotated[KLowered | RoutedForTail | TailUnfixable, Field(discriminator="kind")]


# ---------------------------------------------------------------- why the verdict
class TailPastBudget(Frozen):
    """NO-GO: speculation gains throughput, but its P99 ITL per token passes the budget at every
    K and with any class routed away."""

    kind: Literal["tail_past_budget"] = "tail_past_budget"
    concurrency: int
    k: int
    throughput_speedup: float
    off_ms: float
    on_ms: float
    ratio: float
    budget: float
    slo_ms: float | None


class NoKPays(Frozen):
    """NO-GO: no K in 1..``k_max`` gains ``min_gain`` at the target."""

    kind: Literal["no_k_pays"] = "no_k_pays"
    concurrency: int
    k_max: int
    min_gain: float
    best_k: int
    best_speedup: float
    best_interval: Interval | None = Field(
        description="the best K's range, where it holds 1×; None: clear of 1×"
    )
    pays_up_to: int | None = Field(description="the highest level where the policy speculates")


class GainWithinError(Frozen):
    """NO-GO: the blend gains less than ``min_gain``, within the model's error."""

    kind: Literal["gain_within_error"] = "gain_within_error"
    concurrency: int
    k: int
    throughput_speedup: float
    min_gain: float
    pays_up_to: int | None


class NoClassClearsGate(Frozen):
    """NO-GO: no class clears the gate α at the target; ``class_name`` gains the least."""

    kind: Literal["no_class_clears_gate"] = "no_class_clears_gate"
    concurrency: int
    k: int
    gate_alpha: float | None
    alpha_breakeven: float | None
    margin: float
    class_name: str
    alpha_label: str
    speedup: float
    pays_up_to: int | None


class Settle(Frozen):
    """What would settle a range that holds 1× (a copy of the plan's
    :class:`~alphagate.plan.records.Uncertainty` fields it reads)."""

    by: Literal["measure alpha", "calibrate", "ab"] | None
    at: int | None
    settled_interval: Interval | None


class RangeHoldsOne(Frozen):
    """MEASURE FIRST: the predicted speedup's range at the target holds 1×."""

    kind: Literal["range_holds_one"] = "range_holds_one"
    concurrency: int
    k: int
    speedup: float
    interval: Interval
    alpha_priors: list[str]
    settle: Settle


class PriorLowEnd(Frozen):
    """MEASURE FIRST: at the prior α it gains, at the low end of the priors it does not."""

    kind: Literal["prior_low_end"] = "prior_low_end"
    concurrency: int
    k: int
    throughput_speedup: float
    low_end_speedup: float


class PeakRun(Frozen):
    """What the policy runs at the peak concurrency (K = 0: speculation off there)."""

    concurrency: int
    k: int
    speedup: float
    interval: Interval | None


class _Gain(Frozen):
    """The throughput speedup shipped at the target, its range, and what runs at the peak
    (None: the peak is the target)."""

    concurrency: int
    k: int
    speedup: float
    interval: Interval | None
    peak: PeakRun | None


class Shipped(_Gain):
    """GO: the gain at the target."""

    kind: Literal["shipped"] = "shipped"


class RoutedClass(Frozen):
    """A class below the gate: its α, the gate and the lowest concurrency where it fails."""

    name: str
    alpha_label: str
    gate_alpha: float | None
    fails_at_concurrency: int | None


class ShippedForSome(_Gain):
    """GO FOR SOME CLASSES ONLY: the gain of the classes that clear the gate, fleet-wide, and
    the classes to route without speculation."""

    kind: Literal["shipped_for_some"] = "shipped_for_some"
    fleet_speedup: float
    routed: list[RoutedClass]


VerdictReason = Annotated[
    TailPastBudget
    | NoKPays
    | GainWithinError
    | NoClassClearsGate
    | RangeHoldsOne
    | PriorLowEnd
    | Shipped
    | ShippedForSome,
    Field(discriminator="kind"),
]


# ---------------------------------------------------------------- what would change the verdict
class P99Budget(Frozen):
    """A P99 budget of ``budget`` × the baseline's would ship K at the target."""

    kind: Literal["p99_budget"] = "p99_budget"
    budget: float
    k: int
    concurrency: int
    throughput_speedup: float


class AlphaNeeded(Frozen):
    """A measured α ≥ ``alpha`` per class (ρ ≥ ``draft_acceptance_rate`` at K) would pay."""

    kind: Literal["alpha_needed"] = "alpha_needed"
    alpha: float
    draft_acceptance_rate: float
    k: int
    concurrency: int


class NoAlphaPays(Frozen):
    """No α makes speculation pay at the target on this deployment."""

    kind: Literal["no_alpha_pays"] = "no_alpha_pays"
    concurrency: int


class PaysUpTo(Frozen):
    """At the α given, speculation pays up to ``concurrency`` with K."""

    kind: Literal["pays_up_to"] = "pays_up_to"
    concurrency: int
    k: int


class MeasurePrior(Frozen):
    """A class on a prior α: measuring it (Stage 2) replaces the range."""

    kind: Literal["measure_prior"] = "measure_prior"
    class_name: str
    alpha_low: float
    alpha_high: float


class TrainHead(Frozen):
    """A class below its gate needs α ≥ ``alpha_gate`` there: a head trained on its own traffic
    (``alphagate train-head``) may reach it, measured on requests it never saw."""

    kind: Literal["train_head"] = "train_head"
    class_name: str
    alpha: float
    alpha_gate: float
    concurrency: int
    stage: int = Field(description="the stage whose commands train, measure and re-plan")


VerdictChange = Annotated[
    P99Budget | AlphaNeeded | NoAlphaPays | PaysUpTo | MeasurePrior | TrainHead,
    Field(discriminator="kind"),
]


# ---------------------------------------------------------------- what a verdict rests on
class OnPriors(Frozen):
    """A GO on prior α for these classes: Stage 2 measures it before the gate."""

    kind: Literal["on_priors"] = "on_priors"
    classes: list[str]


class TailKept(Frozen):
    """What the plan changed to keep the P99 ITL per token."""

    kind: Literal["tail_kept"] = "tail_kept"
    action: TailAction


class _TailRatio(Frozen):
    """The predicted P99 ITL per token ÷ the baseline's at a concurrency, and the budget."""

    ratio: float
    concurrency: int
    budget: float


class TailPredicted(_TailRatio):
    """MEASURE FIRST with a tail past the budget at these α: the gate will hold it."""

    kind: Literal["tail_predicted"] = "tail_predicted"


class TailWithinBudget(_TailRatio):
    """A P99 ITL per token above the baseline's, within ``--p99-budget``."""

    kind: Literal["tail_within_budget"] = "tail_within_budget"


Qualifier = Annotated[
    OnPriors | TailKept | TailPredicted | TailWithinBudget, Field(discriminator="kind")
]


class PlanReasons(Frozen):
    """Everything a plan explains, as records (:mod:`alphagate.report.reasons` words them into
    the plan's ``reason``, ``qualifiers``, ``change_verdict`` and ``p99.action``)."""

    verdict: VerdictReason
    changes: list[VerdictChange] = Field(default_factory=list)
    qualifiers: list[Qualifier] = Field(default_factory=list)
    tail: TailAction | None = Field(
        default=None, description="what the P99 watch did (None: nothing to do, or no watch)"
    )
