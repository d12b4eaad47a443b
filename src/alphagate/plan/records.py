"""The typed records of a rollout plan: the request, and every section of the :class:`Plan`.

A plan is computed for the *policy it ships*: a K per concurrency — the engine's batch-size
schedule for K when it has one (vLLM ``num_speculative_tokens_per_batch_size``), else one fixed
K with speculation off above a concurrency. The verdict, the per-class calls and the gate are all
evaluated for that policy; the fixed-K figures are shown beside them when they differ.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from alphagate.core.records import Frozen, Interval, Results
from alphagate.core.secrets import redact, strip_credentials
from alphagate.plan.reasons import PlanReasons, Settle
from alphagate.specs.calibration import CalibrationProfile
from alphagate.specs.deployment import ArmCaps, DeploymentConfig, DeploymentSummary
from alphagate.specs.tree import TreeShape
from alphagate.specs.uncertainty import ConstantRange
from alphagate.specs.workload import WorkloadConfig

__all__ = [
    "AlphaSource",
    "ClassRow",
    "Gate",
    "LoadRow",
    "MeasuredTree",
    "Memory",
    "P99Check",
    "Plan",
    "PlanRequest",
    "Playbook",
    "Stage",
    "TreeLevel",
    "TreePlan",
    "Uncertainty",
    "Verdict",
]

Verdict = Literal["go", "go for some classes only", "measure first", "no-go"]
AlphaSource = Literal["given", "prior", "measured"]
_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?$")


def _without_secret_query(url: str) -> str:
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    from alphagate.core.secrets import SECRET_QUERY_KEYS

    parts = urlsplit(url)
    kept = [(k, val) for k, val in parse_qsl(parts.query, keep_blank_values=True)
            if k.lower().replace("-", "_") not in SECRET_QUERY_KEYS]  # fmt: skip
    return urlunsplit(parts._replace(query=urlencode(kept)))


def parse_engine_version(text: str) -> tuple[int, int]:
    """``0.11``, ``v0.32.1`` → (major, minor); anything else (``0.11rc1``, ``banana``) → ValueError."""
    m = _VERSION.match(text.strip())
    if not m:
        raise ValueError(
            f"engine version {text!r} is not MAJOR.MINOR[.PATCH] (for example 0.11 or 0.32.1)"
        )
    return int(m.group(1)), int(m.group(2))


def _check_suffix(req: PlanRequest) -> None:
    """Suffix decoding drafts as much as its trees match: its acceptance is each class's
    measured draft-length profile (no prior or typed α says how long its drafts are)."""
    if req.engine == "sglang":
        # SGLang 0.5.23's ServerArgs has no SUFFIX algorithm and refuses --speculative-suffix-*
        # (its suffix workers are in pull requests sgl-project/sglang#13553 and #27582, unmerged)
        raise ValueError(
            "--method suffix --engine sglang: SGLang's released server (0.5.23) has no suffix "
            "decoding (--speculative-algorithm SUFFIX is not one of its choices); plan it for "
            "vLLM (--engine vllm), whose suffix decoding this plan models"
        )
    bare = [c.name for c in req.workload.classes if c.draft_steps is None]
    if bare:
        raise ValueError(
            f"--method suffix: class {', '.join(bare)} has no measured draft lengths; give "
            "--alpha-from the result of `alphagate measure offline --drafter suffix` on its log"
        )
    cap = min(len(c.draft_steps or ()) - 1 for c in req.workload.classes)
    if req.k is not None and req.k > cap:
        raise ValueError(f"--k {req.k}: the suffix profiles were measured with drafts ≤ {cap}")


class MeasuredTree(Frozen):
    """One class's acceptance under one SGLang draft shape, measured offline: a draft tree
    (``measure offline --tree``), or the chain of K drafts (top-k 1, K + 1 draft tokens)."""

    class_name: str | None = Field(description="the class; None: all the traffic measured")
    shape: TreeShape
    mean_acceptance_length: float = Field(
        ge=1.0, description="τ: tokens per verify pass, the bonus included"
    )
    histogram: list[float] | None = Field(
        default=None, description="verify passes that accepted j drafts, j = 0 … depth"
    )
    source: str = Field(description="the file it was read from")


class PlanRequest(Frozen):
    """What a plan is computed for: one deployment, its traffic, and the load it must carry."""

    deployment: DeploymentConfig = Field(
        default_factory=DeploymentConfig, description="model, GPU, dtypes, drafter, engine limits"
    )
    workload: WorkloadConfig = Field(
        description="lengths and classes; a class without α gets a documented prior"
    )
    concurrency: int = Field(ge=1, le=65_536, description="the concurrency the fleet runs at")
    peak_concurrency: int | None = Field(
        default=None, ge=1, le=65_536, description="the highest concurrency it must survive"
    )
    slo_p99_itl_ms: float | None = Field(
        default=None, gt=0, allow_inf_nan=False, description="P99 ITL-per-token SLO (ms)"
    )
    engine: Literal["vllm", "sglang"] = "vllm"
    engine_version: str | None = Field(
        default=None, description="MAJOR.MINOR[.PATCH]; None = a current build"
    )
    k: int | None = Field(
        default=None, ge=1, le=16, description="fixed K to evaluate; None = the best K"
    )
    k_max: int = Field(default=8, ge=1, le=16, description="largest K considered")
    seed: int = Field(default=0, ge=0)
    url: str = Field(
        default="http://127.0.0.1:8000",
        description="the baseline server (speculation off) the commands benchmark",
    )
    candidate_url: str | None = Field(
        default=None,
        description="the staging replica with speculation on; None: the baseline's host, next port",
    )
    served_model: str | None = Field(default=None, description="model name the server serves")
    repeats: int = Field(
        default=5, ge=2, le=20, description="alternated A/B runs per level in the printed bench"
    )
    bench_requests: int | None = Field(
        default=None,
        ge=1,
        le=10_000_000,
        description="requests per level and run in the printed bench commands; None: enough for "
        "the gate's error-rate rule over the runs, and 4 per user at the peak",
    )
    p99_budget: float | None = Field(
        default=None,
        ge=1.0,
        le=10.0,
        allow_inf_nan=False,
        description="how many times the baseline's P99 ITL per token the candidate may have at "
        "the target (1.1: 10% worse); None: not worse",
    )
    plan_file: str = Field(
        default="plan.json", description="the plan JSON the printed gate commands read"
    )
    out_stem: str = Field(
        default="plan", description="the --out name the printed re-plan commands derive from"
    )
    calibration: CalibrationProfile | None = Field(
        default=None,
        description="the profile whose coefficients the deployment carries (alphagate calibrate)",
    )
    calibration_file: str | None = Field(
        default=None, description="the profile's file, for the printed re-plan commands"
    )
    ranges: bool = Field(
        default=True,
        description="compute every prediction's range over the step-time constants' ranges "
        "(False: the point predictions alone; the verdict then reads the points)",
    )
    alpha_files: tuple[str, ...] = Field(
        default=(),
        description="the measurements the classes' α came from (--alpha-from), for the re-plan "
        "a calibration prints where a typed α cannot carry them (suffix draft lengths, SGLang "
        "draft shapes)",
    )
    alpha_overall: bool = Field(default=False, description="--alpha-overall was given")
    trees: tuple[MeasuredTree, ...] = Field(
        default=(),
        description="SGLang draft shapes measured offline (--engine sglang --alpha-from a "
        "measure offline result with --tree): the shape is chosen per concurrency from them",
    )

    @field_validator("url", "candidate_url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        """A server URL the printed commands can use: http(s), a host, no spaces. Credentials
        (``user:password@``, ``?api_key=``) are dropped: the plan is a file people share, and the
        printed commands take the key from ``ALPHAGATE_API_KEY``."""
        if v is None:
            return v
        from urllib.parse import urlsplit

        shown = redact(v)
        try:
            bare = _without_secret_query(strip_credentials(v)[0])
            parts = urlsplit(bare)
        except ValueError as exc:
            raise ValueError(f"{shown!r} is not a URL ({redact(str(exc))})") from None
        if (
            parts.scheme not in ("http", "https")
            or not parts.hostname
            or any(c.isspace() for c in v)
        ):
            raise ValueError(
                f"{shown!r} is not an http(s) URL with a host, e.g. http://10.0.0.5:8000"
            )
        return bare

    @field_validator("engine_version")
    @classmethod
    def _version(cls, v: str | None) -> str | None:
        if v is not None:
            parse_engine_version(v)
        return v

    @model_validator(mode="after")
    def _peak(self) -> PlanRequest:
        if self.peak_concurrency is not None and self.peak_concurrency < self.concurrency:
            raise ValueError(
                f"peak concurrency {self.peak_concurrency} is below the target {self.concurrency}"
            )
        if self.deployment.method == "suffix":
            _check_suffix(self)
        return self

    @property
    def peak(self) -> int:
        return self.peak_concurrency or self.concurrency

    @property
    def per_request_counts(self) -> bool:
        """Whether the engine returns per-request spec-decode counts (vLLM ≥ 0.32:
        ``--per-request-spec-decode-metrics``)."""
        if self.engine != "vllm":
            return False
        return self.engine_version is None or parse_engine_version(self.engine_version) >= (0, 32)

    @property
    def staging_url(self) -> str:
        """The candidate (speculative) server: given, or the baseline's host on the next port."""
        if self.candidate_url is not None:
            return self.candidate_url
        from urllib.parse import urlsplit, urlunsplit

        parts = urlsplit(self.url)
        port = (parts.port or (443 if parts.scheme == "https" else 80)) + 1
        host = parts.hostname or "127.0.0.1"
        host = f"[{host}]" if ":" in host else host
        return urlunsplit((parts.scheme, f"{host}:{port}", parts.path, "", ""))


class ClassRow(Frozen):
    """One traffic class under the shipped policy."""

    name: str
    share: float = Field(description="fraction of output tokens")
    alpha: float = Field(description="conditional α used (the prior's midpoint for a prior)")
    alpha_label: str = Field(description="α as given: one value or one per position")
    alpha_by_pos: tuple[float, ...] | None = Field(
        default=None, description="the conditional α per draft position given; None: one α"
    )
    alpha_low: float = Field(description="low end of the prior (= α when given or measured)")
    alpha_high: float
    alpha_source: AlphaSource
    source: str = Field(description="the α's origin in words (file, prior range and note)")
    speedup_target: float = Field(
        description="throughput speedup of this class alone at the target"
    )
    speedup_peak: float = Field(description="the same at the peak concurrency")
    alpha_gate: float | None = Field(description="α this class must clear; None: speculation off")
    clears_gate: bool = Field(
        description="α ≥ gate α wherever the policy speculates, target to peak"
    )
    fails_at_concurrency: int | None = Field(
        description="the lowest concurrency (target..peak) where it does not clear the gate"
    )
    crossover_concurrency: float | None = Field(
        description="batch where speculation stops paying for this class at the fixed K (model)"
    )
    speedup_target_interval: Interval | None = Field(
        default=None,
        description="speedup_target over the step-time constants' ranges and the α prior's",
    )
    speedup_peak_interval: Interval | None = Field(default=None)
    crossover_concurrency_interval: Interval | None = Field(
        default=None, description="crossover over the ranges (open high end: pays at every batch)"
    )


class LoadRow(Frozen):
    """Predicted figures at one concurrency (paired simulation: same requests on and off)."""

    concurrency: int
    k: int = Field(description="K the shipped policy runs at this concurrency (0 = off)")
    throughput_speedup: float = Field(description="on ÷ off output tokens/s with that K")
    itl_p50_off_ms: float
    itl_p99_off_ms: float
    itl_p50_on_ms: float
    itl_p99_on_ms: float
    tpot_speedup: float | None = Field(description="off ÷ on mean TPOT")
    alpha_breakeven: float | None = Field(
        description="α where K pays off at this concurrency (model); None: no α pays"
    )
    fixed_k: int = Field(description="the fixed K evaluated beside the policy")
    fixed_k_speedup: float = Field(description="throughput speedup with the fixed K")
    best_k_sim: int = Field(description="the simulator's best K in 1..k_max here")
    best_k_sim_speedup: float = Field(description="its throughput speedup (may be below 1)")
    throughput_speedup_interval: Interval | None = Field(
        default=None,
        description="throughput_speedup over the step-time constants' ranges (the paired "
        "simulation rerun at the corners) and the α priors' ranges",
    )
    tpot_speedup_interval: Interval | None = Field(default=None)
    fixed_k_speedup_interval: Interval | None = Field(
        default=None,
        description="fixed_k_speedup over the step-time constants' ranges (the simulated value "
        "times the closed form's ends over its value)",
    )
    itl_p99_ratio_interval: Interval | None = Field(
        default=None, description="on ÷ off P99 ITL per token over the ranges"
    )
    alpha_breakeven_interval: Interval | None = Field(
        default=None, description="break-even α over the ranges (open high end: no α pays)"
    )
    best_k_range: tuple[int, int] | None = Field(
        default=None, description="the model's best K at the two ends of the ranges"
    )
    batch: ArmCaps | None = Field(
        default=None,
        description="running sequences of each server here (the speculative one at this "
        "level's K; at K = 0 the server a batch-size schedule launched, with its drafts off, or "
        "the baseline where the level is routed to it): the concurrency, or the most its KV "
        "room holds (None: a plan written before)",
    )


class Uncertainty(Frozen):
    """What the plan's intervals are computed over, and what would narrow them."""

    origin: Literal["prior", "calibration"] = Field(
        description="prior: documented ranges; calibration: a profile's fitted values ± 2 SE"
    )
    ranges: list[ConstantRange]
    alpha_priors: list[str] = Field(description="the classes whose α is a prior range")
    decision_concurrency: int = Field(description="where the verdict's interval is read")
    decision_interval: Interval = Field(
        description="throughput speedup of what is shipped at that concurrency, over the ranges"
    )
    peak_interval: Interval = Field(description="the same at the peak concurrency")
    peak_speedup: float = Field(description="the shipped pool's simulated speedup at the peak")
    straddles: bool = Field(description="the interval at the target holds 1× inside it")
    settle_at: int | None = Field(
        default=None,
        description="the concurrency whose interval holds 1× (the target's, else the peak's)",
    )
    settle_by: Literal["measure alpha", "calibrate", "ab"] | None = Field(
        default=None,
        description="the cheapest measurement that would settle it there (ab: the plan is "
        "calibrated already, and only the A/B settles it)",
    )
    settle_commands: list[str] = Field(default_factory=list)
    settled_interval: Interval | None = Field(
        default=None,
        description="the interval that measurement is expected to leave there (a calibration: "
        "each constant within ± 10%, what a coefficient the data determine is left with)",
    )

    @property
    def settle(self) -> Settle:
        """What would settle the range, as the verdict's reason records it."""
        return Settle(by=self.settle_by, at=self.settle_at, settled_interval=self.settled_interval)


class Memory(Frozen):
    """What the drafter costs in memory."""

    draft_name: str
    draft_params: int
    draft_weight_bytes: float
    draft_kv_bytes_per_token: float
    target_kv_bytes_per_token: float
    kv_tokens_without_draft: int
    kv_tokens_with_draft: int
    kv_tokens_lost: int
    sequences_lost: float = Field(description="KV tokens lost ÷ mean sequence tokens")
    mean_sequence_tokens: float
    largest_batch: ArmCaps | None = Field(
        default=None,
        description="the most sequences each server holds (the speculative one at the fixed K): "
        "max_num_seqs, or what its KV room fits (None: a plan written before)",
    )


class Stage(Frozen):
    """One rollout stage: what to do, the commands, and when it is done."""

    number: int
    title: str
    goal: str
    commands: list[str] = Field(description="shell commands, one per line, run in order")
    exit_criteria: list[str]
    notes: list[str] = Field(default_factory=list)
    config: str | None = Field(
        default=None, description="a file to install (YAML: the Prometheus alert rules)"
    )


class Gate(Frozen):
    """Acceptance thresholds, decided at the concurrency where the shipped policy is hardest."""

    concurrency: int = Field(ge=1, description="the concurrency the gate is decided at")
    k: int = Field(ge=1, description="K the policy runs there")
    alpha_breakeven: float = Field(
        ge=0,
        le=1,
        allow_inf_nan=False,
        description="break-even α at that concurrency and K, at the pessimistic end of the "
        "step-time constants' ranges",
    )
    alpha_min: float = Field(
        gt=0,
        le=1,
        allow_inf_nan=False,
        description="the gate α: alpha_breakeven (the pessimistic end), and never below the "
        "modelled break-even + the 0.05 safety margin",
    )
    draft_acceptance_rate_min: float = Field(
        gt=0, le=1, allow_inf_nan=False, description="ρ at alpha_min and K: what vLLM reports"
    )
    mean_acceptance_length_min: float = Field(
        gt=1, allow_inf_nan=False, description="τ at alpha_min and K"
    )
    quantity_gated: str
    fixed_rule_alpha: float = Field(description="the common fixed gate α ≥ 0.55, for comparison")
    fixed_rule_draft_acceptance_rate: float = Field(
        description="ρ the fixed rule implies at this K"
    )
    min_tpot_speedup: float = Field(
        gt=0,
        allow_inf_nan=False,
        description="candidate TPOT must be this many times lower (the prediction ÷ 1.1, ≤ 1.05)",
    )
    min_itl_per_token_p99_speedup: float = Field(
        gt=0,
        le=1,
        allow_inf_nan=False,
        description="baseline ÷ candidate P99 ITL per token at the target, at least: 1 ÷ the "
        "P99 budget (not worse than the baseline's beyond the run-to-run noise, by default)",
    )
    p99_budget: float = Field(
        ge=1, allow_inf_nan=False, description="candidate ÷ baseline P99 ITL per token allowed"
    )
    p99_budget_source: str = Field(description="where the budget came from")
    max_itl_per_token_p99_ms: float | None = Field(
        default=None,
        gt=0,
        allow_inf_nan=False,
        description="the candidate's P99 ITL per token at the target, at most (SLO)",
    )


class P99Check(Frozen):
    """The recipe's tail watch: the P99 ITL per token of what the plan ships, at the target."""

    concurrency: int
    k: int = Field(description="K shipped there")
    off_ms: float
    on_ms: float
    ratio: float = Field(description="on ÷ off (above 1: worse with speculation)")
    budget: float = Field(description="the ratio allowed: 1, or --p99-budget")
    slo_ms: float | None
    ok: bool
    action: str = Field(
        default="",
        description="what the plan changed to keep it, or why it could not, in words "
        "(reasons.tail is the record)",
    )


class Playbook(Frozen):
    """One cause of a worse P99, its size in this deployment, and what to do."""

    cause: str
    number: str
    mitigation: str


class TreeLevel(Frozen):
    """SGLang's best draft shape at one concurrency of the plan (closed form)."""

    concurrency: int
    shape: TreeShape | None = Field(description="None: no measured shape gains 2% there")
    speedup: float = Field(description="its throughput speedup (1 when off)")
    chain_k: int = Field(description="the best chain's K (0: none gains)")
    chain_speedup: float


class TreePlan(Frozen):
    """``plan --engine sglang``: the draft shape per concurrency, from measured acceptance, and
    the one SGLang runs (its flags set one shape for every batch size)."""

    shipped: TreeShape | None = Field(description="the best shape at the target; None: off")
    concurrency: int
    speedup: float = Field(description="the shipped shape's speedup at the target")
    chain_speedup: float = Field(description="the best chain's at the target")
    mean_acceptance_length: float | None = Field(
        description="τ of the shipped shape over the classes (what SGLang's spec_accept_length "
        "should read)"
    )
    tau_breakeven: float | None = Field(
        description="the τ at which the shipped shape breaks even at the target (None: none does)"
    )
    tau_gate: float | None = Field(
        description="the τ the gate asks of the shipped tree: the break-even plus a margin"
    )
    levels: list[TreeLevel]
    shapes: list[TreeShape] = Field(description="every shape measured for all the classes")
    source: str = Field(description="where the measured acceptance came from")
    flags: list[str] = Field(description="SGLang's --speculative-* flags of the shipped shape")

    @property
    def tau_gated(self) -> TreeShape | None:
        """The shipped shape when it is a tree that the gate judges on τ (a chain's acceptance
        is judged as any chain's), else None."""
        s = self.shipped
        return s if s is not None and not s.is_chain and self.tau_gate is not None else None


class Plan(Results):
    """A staged rollout plan (``alphagate plan --json`` prints it; the markdown renders it)."""

    verb: Literal["plan"] = "plan"
    verdict: Verdict
    qualifiers: list[str] = Field(
        default_factory=list,
        description="what the verdict rests on that is not measured yet, or that it allows "
        "(reasons.qualifiers are the records)",
    )
    reason: str = Field(
        default="",
        description="why, in one sentence with every figure's concurrency (reasons.verdict is the "
        "record)",
    )
    change_verdict: list[str] = Field(
        default_factory=list,
        description="what measurement or change would turn a no-go or measure-first verdict "
        "(reasons.changes are the records)",
    )
    deployment: str
    deployment_detail: DeploymentSummary
    method: str
    draft: str | None
    engine: str
    engine_version: str | None
    policy: str = Field(description="the shipped policy in words")
    fixed_k: int = Field(description="the one K evaluated without a schedule")
    concurrency: int
    peak_concurrency: int
    slo_p99_itl_ms: float | None
    classes: list[ClassRow]
    routed_away: list[str] = Field(description="classes to serve without speculation")
    rows: list[LoadRow]
    headline_speedup: float = Field(
        description="throughput speedup at the target of what is recommended (after routing)"
    )
    headline_interval: Interval | None = Field(
        default=None, description="headline_speedup over the ranges (see uncertainty)"
    )
    uncertainty: Uncertainty | None = Field(
        default=None, description="the ranges the intervals span, and what would narrow them"
    )
    fleet_speedup: float = Field(description="the same over all traffic, routed-away classes at 1×")
    blend_speedup_target: float = Field(description="all classes at the target, shipped K")
    blend_speedup_peak: float
    blend_speedup_target_closed_form: float
    naive_mean_alpha: float
    naive_alpha_speedup_target: float
    blend_crossover_concurrency: float | None
    blend_crossover_interval: Interval | None = None
    crossover_search_max: int
    memory: Memory
    speculative_config: dict[str, object]
    speculative_config_static: dict[str, object]
    dynamic_k_supported: bool
    batch_schedule: list[list[int]]
    schedule_confidence: str
    schedule_agreement: float
    disable_above_concurrency: int | None
    sglang_flags: list[str]
    serve_baseline: list[str] = Field(description="the engine command of the deployment today")
    serve_candidate: list[str] = Field(
        description="the same deployment with speculation, as shipped (empty for a no-go)"
    )
    served_model: str = Field(description="the model name clients send")
    checkpoint: str | None = Field(
        default=None,
        description="the checkpoint the engine loads (the served model's root at /v1/models)",
    )
    p99: P99Check | None = Field(description="the tail watch at the target (None: K = 0 there)")
    gate: Gate | None = Field(description="None for a no-go: nothing to gate")
    stages: list[Stage]
    risks: list[str]
    playbook: list[Playbook]
    uses_priors: bool
    calibration: list[str] = Field(
        default_factory=list,
        description="made with a calibration profile: what it was fitted on, and where the plan's "
        "concurrencies or K lie outside its range",
    )
    reasons: PlanReasons | None = Field(
        default=None,
        description="why, as records with their figures (the sentences above are these in words, "
        "alphagate.report.reasons); None in a plan written before they were recorded",
    )
    sglang_tree: TreePlan | None = Field(
        default=None,
        description="--engine sglang with measured draft shapes: the shape per concurrency",
    )
