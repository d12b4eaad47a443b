"""How unsure the step-time model's constants are: a range for each, with its source.

The constants of :mod:`alphagate.sim.cost` that are not datasheet figures — how close the weight
GEMMs come to the HBM bandwidth and to the dense peak (the GPU's ``bw_efficiency`` and
``compute_efficiency``: together they place the ridge where a verify pass turns compute-bound),
the factors on the rest of the target's and the drafter's modelled GPU time, and the host costs
per step, per running sequence, per speculative step and per draft forward — differ from one
engine build and launch to the next (async scheduling on or off, CUDA graphs, the sampler, the
kernels chosen) by more than the model's other errors. Each gets a range here; a prediction is
computed over the ranges (:mod:`alphagate.sim.uncertainty`) and printed as an interval.

Uncalibrated, the ranges are the priors below (:func:`prior_ranges`), placed around the
deployment's own values, so a value given on the command line moves its range with it. A
calibration profile replaces them with its fitted values ± two standard errors
(:func:`calibrated_ranges`), and holds the GPU efficiencies: the fitted time scale absorbs them
over the batches it was measured at (a plan says where it extrapolates). A range is a range, not a distribution: the interval it gives is
every outcome the constants in their ranges allow, not a confidence interval.
"""

from __future__ import annotations

import math
from typing import Final, Literal

from pydantic import Field, model_validator

from alphagate.core.errors import ConfigError
from alphagate.core.records import Frozen
from alphagate.specs.calibration import (
    COEFFICIENT_FIELDS,
    CalibrationProfile,
    coefficient_values,
)
from alphagate.specs.deployment import HOST_DRAFTERS, DeploymentConfig, DraftModelDrafter
from alphagate.specs.gpus import resolve_gpu

__all__ = [
    "CALIBRATED_SPREAD",
    "EFFICIENCIES",
    "EXPECTED_RESIDUAL",
    "PRIOR_RANGES",
    "RESIDUAL_BAND",
    "ConstantRange",
    "CostRanges",
    "PriorRange",
    "calibrated_ranges",
    "cost_ranges",
    "prior_ranges",
]


class PriorRange(Frozen):
    """A coefficient's prior: ``value × [low, high]`` plus ``add``, and where the range is from."""

    low: float = Field(ge=0)
    high: float = Field(ge=0)
    add_high_s: float = Field(
        default=0.0, ge=0, description="added to the high end (seconds): a cost whose default is 0"
    )
    source: str


#: The GPU efficiencies that vary (fields of the GPU spec, overridable on the deployment).
EFFICIENCIES: Final = ("bw_efficiency", "compute_efficiency")

#: The prior range of each constant, relative to the deployment's value of it.
PRIOR_RANGES: Final[dict[str, PriorRange]] = {
    "bw_efficiency": PriorRange(
        low=0.80 / 0.85,
        high=0.90 / 0.85,
        source="real kernels stream about 80–90% of the datasheet's HBM bandwidth (the GPU "
        "presets use 85%)",
    ),
    "compute_efficiency": PriorRange(
        low=0.60 / 0.70,
        high=0.80 / 0.70,
        source="real GEMMs reach about 60–80% of the dense peak (the presets use 70%); it places "
        "the ridge where a verify pass turns compute-bound",
    ),
    "target_time_scale": PriorRange(
        low=0.95,
        high=1.10,
        source="the target's other modelled time (attention, sampler, kernel gaps) beside the "
        "GEMM efficiencies; no public figure separates them",
    ),
    "draft_time_scale": PriorRange(
        low=0.8,
        high=1.6,
        source="a drafter's small GEMMs (one decoder layer, a 32k-vocabulary LM head) run further "
        "from the roofline than the target's; no public measurement isolates them, so the range "
        "is wide on purpose",
    ),
    "step_overhead_s": PriorRange(
        low=0.35,
        high=2.3,
        source="host time per step: with async scheduling the scheduler overlaps the forward "
        "(vLLM PR #19970, #23569) and a few hundred µs stay exposed (vLLM issue #10634); "
        "without it, vLLM v0.6's profile of Llama-3-8B on one H100 spent 29% of the time "
        "scheduling (vLLM blog, 2024-09-05)",
    ),
    "per_seq_overhead_s": PriorRange(
        low=0.5,
        high=3.0,
        source="input preparation and output handling per running sequence (vLLM issue #6913 "
        "measured 3.4 ms of output processing at batch 32 in the V0 engine; V1 moved most of it "
        "to its front-end process)",
    ),
    "spec_step_overhead_s": PriorRange(
        low=1.0,
        high=1.0,
        add_high_s=0.5e-3,
        source="the rejection sampler's and the proposer's set-up per speculative step; no "
        "documented figure, up to 0.5 ms (async scheduling with speculative decoding only since "
        "vLLM PR #31998)",
    ),
    "sync_step_overhead_s": PriorRange(
        low=0.5,
        high=2.5,
        source="host time per step that async scheduling hides, paid only without it: ~2 ms of "
        "a ~7 ms Llama-3-8B H100 step in vLLM v0.6 (vLLM blog, 2024-09-05), less in the V1 "
        "engine (vLLM PR #19970 overlaps scheduling, #23569 input preparation and sampling: "
        "5–10% more)",
    ),
    "draft_forward_overhead_s": PriorRange(
        low=0.5,
        high=3.0,
        source="host time per draft forward (drafter inputs, attention metadata; n-gram: the "
        "lookup per step); no documented figure",
    ),
    "spec_seq_overhead_s": PriorRange(
        low=1.0,
        high=1.0,
        source="host time per decoding sequence per speculative step (the verify's and the "
        "rejection sampler's per-sequence work): batched tensor ops on a GPU "
        "(vllm/v1/sample/rejection_sampler.py), so the prior holds it at the deployment's value; "
        "calibrate fits it where the data call for it (vLLM's CPU build)",
    ),
    "draft_seq_overhead_s": PriorRange(
        low=1.0,
        high=1.0,
        source="host time per decoding sequence per draft forward: on a GPU the drafter's "
        "attention metadata is built with batched tensor ops (vllm/v1/spec_decode/"
        "llm_base_proposer.py), so the prior holds it at the deployment's value; vLLM's CPU build "
        "pays it per request (its attention scheduler, cpu_attn.py), and calibrate fits it",
    ),
}

#: A draft model is a model: its GEMMs run like the target's (the efficiency ranges move both).
DRAFT_MODEL_TIME_SCALE: Final = PriorRange(
    low=0.95,
    high=1.10,
    source="a draft model's other modelled time, as the target's (the GEMM efficiency ranges "
    "move its GEMMs too)",
)

#: What a calibration that determines a coefficient leaves (``determined_by: data`` means a
#: standard error ≤ 5% of the value): ± two standard errors. Used to say how narrow an interval a
#: calibration would leave before one is run.
CALIBRATED_SPREAD: Final = 0.10
#: The relative error a fitted step time keeps (its RMS residual), expected before a calibration
#: is run: the twin round trip fits to 0.3–0.8% RMS (``alphagate.calibrate.fit``), a real server
#: less well.
EXPECTED_RESIDUAL: Final = 0.01
#: The step-time error band a calibration leaves beyond its coefficients' ranges, in RMS
#: residuals: two, as the coefficients span ± two standard errors. A cell the fit never saw
#: misses by more than the fitted points do (vLLM's CPU build: 5.6% RMS on the fitted levels,
#: 16–24% on two of eight held-out ones, ``tests/real_engine/test_calibrate_vllm.py``); one
#: RMS left those outside the calibrated range.
RESIDUAL_BAND: Final = 2.0


class ConstantRange(Frozen):
    """One coefficient's range (in the coefficient's units), its value, and its source."""

    coefficient: str
    value: float = Field(ge=0)
    low: float = Field(ge=0)
    high: float = Field(ge=0)
    source: str

    @model_validator(mode="after")
    def _order(self) -> ConstantRange:
        if self.coefficient not in COEFFICIENT_FIELDS and self.coefficient not in EFFICIENCIES:
            raise ValueError(f"unknown coefficient {self.coefficient!r}")
        if not self.low <= self.value <= self.high:
            raise ValueError(
                f"{self.coefficient}: value {self.value:g} outside [{self.low:g}, {self.high:g}]"
            )
        return self

    @property
    def fixed(self) -> bool:
        return self.low == self.high


class CostRanges(Frozen):
    """The ranges a prediction is computed over, and whether they are priors or calibrated."""

    origin: Literal["prior", "calibration"]
    ranges: tuple[ConstantRange, ...]
    covariance: tuple[tuple[float, ...], ...] | None = Field(
        default=None,
        description="a calibration's covariance of the coefficients named in covariance_names: "
        "a prediction then spans ± 2 of its own standard errors (the coefficients trade off), "
        "not the corners of the ± 2 SE box",
    )
    covariance_names: tuple[str, ...] = ()
    bound: CostRanges | None = Field(
        default=None,
        description="the prior ranges around the fitted values: a calibration's interval never "
        "reaches beyond what they allow (a fit the data pin loosely is no wider than the priors)",
    )
    residual: float = Field(
        default=0.0,
        ge=0,
        lt=1,
        description="relative error of a modelled step time beyond the ranges (a calibration's "
        "RMS residual × RESIDUAL_BAND); a speedup, a ratio of two step times, moves by "
        "(1 ± r) ÷ (1 ∓ r)",
    )

    def values(self) -> dict[str, float]:
        return {r.coefficient: r.value for r in self.ranges}

    def __getitem__(self, name: str) -> ConstantRange:
        return next(r for r in self.ranges if r.coefficient == name)

    def widened(self, value: float, low: float, high: float) -> tuple[float, float]:
        """An interval's ends around ``value`` widened by :attr:`residual`: a ratio of two step
        times each off by ± r moves by (1 ± r) ÷ (1 ∓ r), and that error and the ranges' are
        independent, so each end's distance from the value (as a log ratio) and the residual's
        add in quadrature — where the ranges already reach far the residual adds little, where
        they do not (a side the fit pins) it sets the width."""
        r = self.residual
        if r <= 0.0 or not (math.isfinite(value) and value > 0.0):
            return low, high
        e = math.log((1.0 + r) / (1.0 - r))
        down = math.log(value / low) if 0.0 < low < value else 0.0
        up = math.log(high / value) if math.isfinite(high) and high > value else 0.0
        new_low = value * math.exp(-math.hypot(down, e)) if low > 0.0 else low
        new_high = value * math.exp(math.hypot(up, e)) if math.isfinite(high) else high
        return min(low, new_low), max(high, new_high)

    def varying(self) -> tuple[ConstantRange, ...]:
        return tuple(r for r in self.ranges if not r.fixed)

    def held(self) -> CostRanges:
        """Every constant held at its value: point predictions."""
        return CostRanges(
            origin=self.origin,
            ranges=tuple(
                r.model_copy(update={"low": r.value, "high": r.value}) for r in self.ranges
            ),
        )

    def narrowed(self, spread: float = CALIBRATED_SPREAD) -> CostRanges:
        """The ranges a calibration would leave: value × (1 ± spread), within today's."""
        out = []
        for r in self.ranges:
            lo = max(r.low, r.value * (1.0 - spread))
            hi = min(r.high, r.value * (1.0 + spread)) if r.value > 0 else r.low
            out.append(r.model_copy(update={"low": min(lo, r.value), "high": max(hi, r.value)}))
        return CostRanges(
            origin="calibration", ranges=tuple(out), residual=RESIDUAL_BAND * EXPECTED_RESIDUAL
        )


def _efficiencies(dep: DeploymentConfig) -> dict[str, float]:
    """The deployment's GPU efficiencies: its overrides, else the GPU preset's."""
    gpu = resolve_gpu(dep.gpu)
    return {name: float(getattr(dep, name) or getattr(gpu, name)) for name in EFFICIENCIES}


def _relevant(dep: DeploymentConfig) -> set[str]:
    """Coefficients that price something in this deployment (n-gram and suffix decoding have no
    drafter GPU time)."""
    names = set(COEFFICIENT_FIELDS) - {"per_token_overhead_s"}
    if isinstance(dep.drafter, HOST_DRAFTERS):
        names.discard("draft_time_scale")
    return names


def prior_ranges(dep: DeploymentConfig) -> CostRanges:
    """The prior ranges around the deployment's coefficients. ``per_token_overhead_s`` stays at
    its value: vLLM V1 detokenizes and streams in its front-end process, off the engine's
    critical path."""
    values = {**_efficiencies(dep), **coefficient_values(dep)}
    relevant = _relevant(dep) | set(EFFICIENCIES)
    out = []
    for name, value in values.items():
        prior = PRIOR_RANGES.get(name)
        if name == "draft_time_scale" and isinstance(dep.drafter, DraftModelDrafter):
            prior = DRAFT_MODEL_TIME_SCALE
        if prior is None or name not in relevant:
            out.append(
                ConstantRange(
                    coefficient=name,
                    value=value,
                    low=value,
                    high=value,
                    source="held at its value",
                )
            )
            continue
        out.append(
            ConstantRange(
                coefficient=name,
                value=value,
                low=value * prior.low,
                high=min(1.0, value * prior.high)
                if name in EFFICIENCIES
                else value * prior.high + prior.add_high_s,
                source=prior.source,
            )
        )
    return CostRanges(origin="prior", ranges=tuple(out))


def calibrated_ranges(profile: CalibrationProfile, dep: DeploymentConfig) -> CostRanges:
    """A calibration's fitted values ± two standard errors (not below 0), and step times ± two
    RMS residuals (:data:`RESIDUAL_BAND`). A coefficient the profile does not hold keeps its
    prior range."""
    prior = {r.coefficient: r for r in prior_ranges(dep).ranges}
    fitted = {c.name: c for c in profile.coefficients}
    out = [
        ConstantRange(
            coefficient=name,
            value=value,
            low=value,
            high=value,
            source="held: the calibrated time scale absorbs it over the batches measured",
        )
        for name, value in _efficiencies(dep).items()
    ]
    for name, value in coefficient_values(dep).items():
        c = fitted.get(name)
        if c is None:
            out.append(prior[name])
            continue
        if abs(c.value - value) > 1e-9 * max(1.0, abs(value)):
            raise ConfigError(
                f"the deployment's {name} is {value:g}, the calibration's {c.value:g}: apply the "
                "profile to the deployment before asking for its ranges"
            )
        half = 2.0 * c.standard_error
        out.append(
            ConstantRange(
                coefficient=name,
                value=value,
                low=max(0.0, value - half),
                high=value + half,
                source=f"calibrated: {c.value:.4g} ± 2 × {c.standard_error:.2g} "
                f"(determined by {c.determined_by})",
            )
        )
    cov = profile.covariance
    return CostRanges(
        origin="calibration",
        ranges=tuple(out),
        covariance=None if cov is None else tuple(tuple(row) for row in cov),
        covariance_names=tuple(c.name for c in profile.coefficients),
        bound=prior_ranges(dep),
        residual=min(0.5, RESIDUAL_BAND * profile.rms_residual_pct / 100),
    )


def cost_ranges(dep: DeploymentConfig, profile: CalibrationProfile | None) -> CostRanges:
    """The ranges for a deployment: a profile's when one was applied, else the priors."""
    return prior_ranges(dep) if profile is None else calibrated_ranges(profile, dep)
