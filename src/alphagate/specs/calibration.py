"""A calibration profile: the step-time model's coefficients fitted to one real server.

``alphagate calibrate`` writes it (schema ``alphagate.results/v1``, ``verb: "calibrate"``);
``simulate``, ``plan`` and ``twin`` read it with ``--calibration FILE``. It records the deployment
the coefficients were fitted for (their terms depend on it), every coefficient with its prior and
how much of it the data determined, the points it came from with the fit's residuals, and the
concurrency and K range it is valid for. A profile whose fit explains nothing (``usable`` false:
a large residual, or no coefficient the data moved off its prior) is written for inspection but
refused by :func:`load_profile`; one ``partial`` was fitted on the levels that completed before
the sweep was interrupted.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Final, Literal

from pydantic import Field, ValidationError

from alphagate.core.errors import ConfigError
from alphagate.core.records import Frozen, Results
from alphagate.specs.deployment import HOST_DRAFTERS, DeploymentConfig, DrafterConfig

__all__ = [
    "COEFFICIENT_FIELDS",
    "PROFILE_SETTINGS",
    "CalibrationPoint",
    "CalibrationProfile",
    "CostOverrides",
    "EngineSettings",
    "FittedCoefficient",
    "coefficient_values",
    "load_profile",
    "with_coefficients",
]

#: Each coefficient of the step-time model (:data:`alphagate.sim.cost.COEFFICIENTS`), the
#: deployment field that holds it, and the factor from the coefficient's unit to the field's.
#: ``draft_forward_overhead_s`` lives on the drafter (``forward_overhead_ms``; n-gram:
#: ``cpu_cost_ms`` per step).
COEFFICIENT_FIELDS: Final[dict[str, tuple[str, float]]] = {
    "target_time_scale": ("target_time_scale", 1.0),
    "draft_time_scale": ("draft_time_scale", 1.0),
    "step_overhead_s": ("step_overhead_ms", 1e3),
    "per_seq_overhead_s": ("per_seq_overhead_us", 1e6),
    "per_token_overhead_s": ("per_token_overhead_us", 1e6),
    "spec_step_overhead_s": ("spec_step_overhead_ms", 1e3),
    "sync_step_overhead_s": ("sync_step_overhead_ms", 1e3),
    "draft_forward_overhead_s": ("forward_overhead_ms", 1e3),
    "draft_seq_overhead_s": ("draft_seq_overhead_us", 1e6),
    "spec_seq_overhead_s": ("spec_seq_overhead_us", 1e6),
}


def coefficient_values(dep: DeploymentConfig) -> dict[str, float]:
    """The coefficients a deployment config sets, in the coefficients' units."""
    out = {}
    for name, (fld, factor) in COEFFICIENT_FIELDS.items():
        if name == "draft_forward_overhead_s":
            d = dep.drafter
            value = d.cpu_cost_ms if isinstance(d, HOST_DRAFTERS) else d.forward_overhead_ms
        else:
            value = getattr(dep, fld)
        out[name] = float(value) / factor
    return out


def with_coefficients(dep: DeploymentConfig, values: dict[str, float]) -> DeploymentConfig:
    """``dep`` with the given coefficients (in the coefficients' units) set."""
    update: dict[str, object] = {}
    for name, value in values.items():
        fld, factor = COEFFICIENT_FIELDS[name]
        if name == "draft_forward_overhead_s":
            update["drafter"] = _with_draft_overhead(dep, value * factor)
        else:
            update[fld] = value * factor
    return dep.model_copy(update=update)


def _with_draft_overhead(dep: DeploymentConfig, ms: float) -> DrafterConfig:
    """The drafter with its host time per draft forward set: an n-gram lookup's or a suffix
    tree's ``cpu_cost_ms``, else ``forward_overhead_ms``."""
    d = dep.drafter
    key = "cpu_cost_ms" if isinstance(d, HOST_DRAFTERS) else "forward_overhead_ms"
    return d.model_copy(update={key: ms})


class EngineSettings(Frozen):
    """Engine settings that change the step time, given by hand (None: the deployment's own):
    :meth:`apply` sets them on a deployment. ``calibrate`` takes them as flags (generated from
    these fields)."""

    draft_tp: int | None = Field(
        default=None,
        ge=1,
        le=64,
        description="The drafter's tensor-parallel degree (vLLM draft_tensor_parallel_size: 1 "
        "or the target's; default the target's).",
    )
    cudagraph_max_tokens: int | None = Field(
        default=None,
        ge=0,
        le=1_048_576,
        description="Largest CUDA-graph capture size in tokens (default vLLM's "
        "min(2·max-num-seqs, 512); 0 = eager, as --enforce-eager).",
    )

    def apply(self, dep: DeploymentConfig) -> DeploymentConfig:
        """``dep`` with every value given set (a ``ValidationError`` for one it refuses)."""
        return DeploymentConfig.model_validate({**dep.model_dump(), **self._update(dep)})

    def _update(self, dep: DeploymentConfig) -> dict[str, object]:
        return self.model_dump(exclude_none=True)


class CostOverrides(EngineSettings):
    """The step-time model's coefficients (and the engine settings) given by hand, on top of a
    deployment — the defaults, or those a calibration profile fitted for it. ``simulate``,
    ``plan`` and ``twin`` take them as flags (generated from these fields)."""

    step_overhead_ms: float | None = Field(
        default=None,
        ge=0.0,
        le=1000.0,
        description="Host time per engine step: scheduler, input preparation (default 0.85, or "
        "the profile's).",
    )
    per_seq_overhead_us: float | None = Field(
        default=None,
        ge=0.0,
        le=1e6,
        description="Host time per running sequence per step (default 2, or the profile's).",
    )
    per_token_overhead_us: float | None = Field(
        default=None,
        ge=0.0,
        le=1e6,
        description="Host time per scheduled token per step (default 0, or the profile's).",
    )
    draft_overhead_ms: float | None = Field(
        default=None,
        ge=0.0,
        le=1000.0,
        description="Host time per draft forward (n-gram: the lookup per step; default 0.1 / "
        "0.05, or the profile's).",
    )
    spec_overhead_ms: float | None = Field(
        default=None,
        ge=0.0,
        le=1000.0,
        description="Host time per speculative step whatever K is: rejection sampler, proposer "
        "set-up (default 0, or the profile's).",
    )
    spec_seq_overhead_us: float | None = Field(
        default=None,
        ge=0.0,
        le=1e6,
        description="Host time per decoding sequence per speculative step, whatever K is: the "
        "verify's and the rejection sampler's (default 0, or the profile's).",
    )
    draft_seq_overhead_us: float | None = Field(
        default=None,
        ge=0.0,
        le=1e6,
        description="Host time per decoding sequence per draft forward: the drafter's attention "
        "metadata (default 0, or the profile's).",
    )
    target_time_scale: float | None = Field(
        default=None,
        ge=0.001,
        le=1000.0,
        description="× the target's modelled GPU time (default 1, or the profile's).",
    )
    draft_time_scale: float | None = Field(
        default=None,
        ge=0.001,
        le=1000.0,
        description="× the drafter's modelled GPU time (default 1, or the profile's).",
    )

    def _update(self, dep: DeploymentConfig) -> dict[str, object]:
        """The deployment's fields: the draft forward's host time is the drafter's (an n-gram
        lookup's ``cpu_cost_ms``), the per-step speculative time ``spec_step_overhead_ms``."""
        update = super()._update(dep)
        if "spec_overhead_ms" in update:
            update["spec_step_overhead_ms"] = update.pop("spec_overhead_ms")
        update.pop("draft_overhead_ms", None)
        if self.draft_overhead_ms is not None:
            update["drafter"] = _with_draft_overhead(dep, self.draft_overhead_ms)
        return update


class FittedCoefficient(Frozen):
    """One coefficient: fitted value, prior, and how far the data (not the prior) set it."""

    name: str
    value: float = Field(description="fitted (seconds, or a factor for *_scale)")
    prior: float = Field(description="the uncalibrated default it was pulled towards")
    standard_error: float = Field(description="from the fit's residuals and the prior")
    data_share: float = Field(
        ge=0.0, le=1.0, description="1 − posterior ÷ prior variance: 1 = set by the data alone"
    )
    determined_by: Literal["data", "data, loosely", "prior"] = Field(
        description="data: standard error ≤ 5% of the value; data, loosely: the data moved it but "
        "do not pin it (two terms grew alike over the measured range); prior: the data hardly "
        "moved it"
    )


class CalibrationPoint(Frozen):
    """One measured level and what the fitted model says about it."""

    label: str
    source: str = Field(description="file or URL the point was read from")
    metric: Literal["decode_step", "ttft"] = Field(
        description="the mean engine step the decoding sequences saw (their decode time over "
        "their steps), or mean TTFT at concurrency 1 (the prefill step)"
    )
    concurrency: int
    k: int
    requests: int
    prompt_tokens: float
    output_tokens: float
    alpha_by_pos: list[float] | None = Field(description="conditional α per position (K > 0)")
    mean_batch: float = Field(description="decoding sequences per step in the simulated level")
    observed_ms: float
    fitted_ms: float
    residual_pct: float
    weight: float = Field(description="1 ÷ the row's relative variance (samples, simulated spread)")


#: The deployment settings a calibration profile fixes, by the name of the flag that sets them,
#: and where the profile's deployment holds each.
PROFILE_SETTINGS: Final[dict[str, Callable[[DeploymentConfig], object]]] = {
    "model": lambda d: d.model,
    "gpu": lambda d: d.gpu,
    "tp": lambda d: d.tp,
    "dtype": lambda d: d.weight_dtype,
    "kv_dtype": lambda d: d.kv_dtype,
    "method": lambda d: d.drafter.method,
    "draft": lambda d: d.drafter.checkpoint,
    "max_num_seqs": lambda d: d.max_num_seqs,
    "max_num_batched_tokens": lambda d: d.max_num_batched_tokens,
}


class CalibrationProfile(Results):
    """Coefficients of the step-time model fitted to one server's measurements."""

    verb: Literal["calibrate"] = "calibrate"
    deployment: DeploymentConfig = Field(
        description="the deployment the terms were computed for, with the fitted coefficients set"
    )
    deployment_description: str
    functional_form: str
    coefficients: list[FittedCoefficient]
    request_overhead_s: float | None = Field(
        default=None,
        description="client-visible time per request outside engine steps (HTTP, tokenization), "
        "fitted from TTFT; not part of the step-time model",
    )
    frontend_request_s: float | None = Field(
        default=None,
        description="the part of request_overhead_s that the server's front-end spends on each "
        "request one after another (tokenization, input processing), so that requests sent "
        "together reach the engine one such time apart; fitted from the baseline's TTFT at "
        "concurrency above 1 (None: no such level)",
    )
    points: list[CalibrationPoint]
    rms_residual_pct: float
    covariance: list[list[float]] | None = Field(
        default=None,
        description="the fitted coefficients' covariance, in the order of coefficients (the "
        "coefficients move together: two terms that grow alike trade off, so a prediction's "
        "error is smaller than their standard errors alone suggest)",
    )
    valid_concurrency: tuple[int, int]
    valid_k: tuple[int, int]
    sources: list[str]
    time_scale: float = Field(
        default=1.0, description="wall seconds per server second the data were divided by"
    )
    usable: bool = Field(
        default=True,
        description="false: the fit explains too little of the data to price steps with "
        "(unusable_reason says why); simulate, plan and twin refuse it",
    )
    unusable_reason: str | None = None
    partial: bool = Field(
        default=False,
        description="the sweep was interrupted: fitted on the levels that completed only",
    )

    def values(self) -> dict[str, float]:
        return {c.name: c.value for c in self.coefficients}

    def apply(self, dep: DeploymentConfig) -> DeploymentConfig:
        """``dep`` with the fitted coefficients set (its other fields kept)."""
        return with_coefficients(dep, self.values())

    def check_fits(self, given: dict[str, object], where: str = "the profile") -> None:
        """Refuse (:class:`ConfigError` naming the field) a deployment setting that differs
        from the one the profile was fitted for: its coefficients scale that deployment's
        terms. ``given``: the settings asked for, by :data:`PROFILE_SETTINGS` name."""
        d = self.deployment
        for name, asked in given.items():
            fitted = PROFILE_SETTINGS[name](d)
            same = asked == fitted or (
                name == "model" and str(asked).strip().lower() == str(fitted).strip().lower()
            )
            if not same:
                flag = "--" + name.replace("_", "-")
                raise ConfigError(
                    f"{where} was fitted for {flag} {fitted}, not {asked}: its coefficients "
                    f"scale that deployment's terms; omit {flag} or calibrate for {asked}",
                    name,
                )

    def check_deployment(self, dep: DeploymentConfig) -> None:
        """:meth:`check_fits` for a whole deployment (the Python API's check: a simulation or
        plan made with this profile must be of the deployment it was fitted for)."""
        self.check_fits({name: get(dep) for name, get in PROFILE_SETTINGS.items()})

    def range_note(self, concurrency: int, k: int | None = None) -> str | None:
        """Why predictions at ``concurrency`` (and K) extrapolate the profile, or None."""
        lo, hi = self.valid_concurrency
        notes = []
        if not lo <= concurrency <= hi:
            notes.append(f"concurrency {concurrency} is outside its range {_span(lo, hi)}")
        klo, khi = self.valid_k
        if k is not None and k > 0 and not klo <= k <= khi:
            at = f"K={k} (at concurrency {concurrency})"
            notes.append(
                f"{at} is outside its K range {_span(klo, khi)}"
                if khi
                else f"{at} was not measured"
            )
        if not notes:
            return None
        return " and ".join(notes) + ", so the profile's coefficients are extrapolated there"

    def _fitted_at(self) -> str:
        klo, khi = self.valid_k
        return f"concurrency {_span(*self.valid_concurrency)}" + (
            f", K {_span(klo, khi)}" if khi else ""
        )

    def summary(self) -> str:
        """One sentence for a plan or a simulation made with this profile."""
        partial = "; partial: the sweep was interrupted" if self.partial else ""
        return (
            f"step-time coefficients calibrated on {self.deployment_description.split(';')[0]} "
            f"at {self._fitted_at()} (RMS residual {self.rms_residual_pct:.1f}%{partial})"
        )


def _span(lo: int, hi: int) -> str:
    return str(lo) if lo == hi else f"{lo}–{hi}"


def load_profile(path: str | Path) -> CalibrationProfile:
    """Read a profile written by ``alphagate calibrate``; :class:`ConfigError` names the problem,
    and refuses a profile marked unusable (saying why)."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{p}: no such file")
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{p}: not a readable JSON file ({exc})") from None
    if not isinstance(data, dict) or data.get("verb") != "calibrate":
        raise ConfigError(f"{p}: not a calibration profile (alphagate calibrate writes one)")
    try:
        profile = CalibrationProfile.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        raise ConfigError(f"{p}: field {where!r}: {first['msg']}") from None
    if not profile.usable:
        raise ConfigError(
            f"{p}: an unusable calibration ({profile.unusable_reason or 'marked unusable'}); "
            "measure again (alphagate calibrate), or run without --calibration"
        )
    return profile
