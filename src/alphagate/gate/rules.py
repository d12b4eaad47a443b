"""Gate rules: thresholds on measured quantities, from flags, a rules file, or a plan.

A rule names a metric, a direction and a threshold, and optionally the traffic class or the bench
level it applies to. Acceptance metrics are judged on their 95% interval (the lower bound must
clear a minimum); A/B metrics on a bootstrap interval over requests.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import Field, ValidationError, model_validator

from alphagate.bench.ab import AB_METRICS
from alphagate.core.errors import ConfigError, validation_problem
from alphagate.core.records import Frozen

if TYPE_CHECKING:
    from alphagate.plan.records import Plan

__all__ = [
    "AB_METRICS",
    "ACCEPTANCE_METRICS",
    "DEFAULT_MAX_ERROR_RATE",
    "EvidencePolicy",
    "Metric",
    "Rule",
    "RuleSet",
    "Thresholds",
    "default_error_rules",
    "load_plan",
    "load_rules",
    "plan_rules",
    "rule_set",
    "rules_from_plan",
]

Metric = Literal[
    "draft_acceptance_rate",
    "alpha",
    "mean_acceptance_length",
    "throughput_speedup",
    "tpot_speedup",
    "itl_per_token_p99_speedup",
    "goodput_speedup",
    "error_rate",
    "itl_per_token_p99_ms",
]
#: How each metric reads in a table (the JSON keeps the metric names).
LABELS = {
    "draft_acceptance_rate": "ρ",
    "alpha": "α",
    "mean_acceptance_length": "τ",
    "throughput_speedup": "throughput speedup",
    "tpot_speedup": "TPOT speedup",
    "itl_per_token_p99_speedup": "P99 ITL/token speedup",
    "goodput_speedup": "goodput speedup",
    "error_rate": "error rate",
    "itl_per_token_p99_ms": "P99 ITL/token (ms)",
}
#: the values a threshold of each metric can take
RANGES: dict[str, tuple[float, float]] = {
    "draft_acceptance_rate": (0.0, 1.0),
    "alpha": (0.0, 1.0),
    "mean_acceptance_length": (1.0, 65.0),
    "throughput_speedup": (0.0, 1000.0),
    "tpot_speedup": (0.0, 1000.0),
    "itl_per_token_p99_speedup": (0.0, 1000.0),
    "goodput_speedup": (0.0, 1000.0),
    "error_rate": (0.0, 1.0),
    "itl_per_token_p99_ms": (0.0, 1e6),
}
ACCEPTANCE_METRICS = ("draft_acceptance_rate", "alpha", "mean_acceptance_length")


class Rule(Frozen):
    """One threshold. ``>=`` rules pass when the whole 95% interval is above the threshold."""

    metric: Metric
    op: Literal[">=", "<="] = ">="
    threshold: float = Field(allow_inf_nan=False)
    cls: str | None = Field(default=None, description="a traffic class; None = all traffic")
    concurrency: int | None = Field(default=None, ge=1, description="the bench level, c<N>")
    source: str = Field(default="flag", description="where the rule came from")
    guard: bool = Field(
        default=False,
        description="fails only on evidence clearly past the threshold, and passes otherwise "
        "(the default error-rate rule beside acceptance rules: failures that clearly exceed it "
        "fail the gate; a small run is not asked to prove its failures small)",
    )

    @model_validator(mode="after")
    def _threshold_in_range(self) -> Rule:
        lo, hi = RANGES[self.metric]
        if not lo <= self.threshold <= hi:
            raise ValueError(f"a {self.metric} threshold must lie in [{lo:g}, {hi:g}]")
        return self

    @property
    def vacuous(self) -> bool:
        """A ``≥`` rule at the bottom of its metric's range, or a ``≤`` rule at the top: it
        passes whatever is measured."""
        lo, hi = RANGES[self.metric]
        return self.threshold <= lo if self.op == ">=" else self.threshold >= hi

    def describe(self) -> str:
        """``α [chat] ≥ 0.2964``, ``TPOT speedup @c16 ≥ 1.05``."""
        scope = f" [{self.cls}]" if self.cls else ""
        at = f" @c{self.concurrency}" if self.concurrency else ""
        op = "≥" if self.op == ">=" else "≤"
        return f"{LABELS[self.metric]}{scope}{at} {op} {self.threshold:.4g}"


class RuleSet(Frozen):
    """The rules and how much evidence a decision needs."""

    rules: list[Rule] = Field(min_length=1)
    min_drafts: int = Field(default=2000, ge=1, description="acceptance needs this many drafts")
    min_requests: int = Field(default=100, ge=1, description="an A/B needs this many per side")
    allow_point_estimates: bool = Field(
        default=False,
        description="judge values without an interval (vllm bench serve summaries) as they are",
    )
    allow_single_run: bool = Field(
        default=False,
        description="judge an A/B of one run per side on its within-run interval (which cannot "
        "see the variation between runs)",
    )


#: the candidate's failures allowed when no rule says (``gate --max-error-rate``)
DEFAULT_MAX_ERROR_RATE = 0.05


def default_error_rules(rules: list[Rule], *, bench: bool = False) -> list[Rule]:
    """Failures count against every rule: an error-rate rule (≤ 5%) at each concurrency an A/B
    rule judges that has none of its own (a candidate that fails 30% of its requests must not
    pass on the speed of the rest) and, when the evidence includes bench runs (``bench``), one
    over every run beside acceptance rules (nor on the acceptance of the rest)."""
    judged = {r.concurrency for r in rules if r.metric in AB_METRICS and r.metric != "error_rate"}
    have = {r.concurrency for r in rules if r.metric == "error_rate"}
    if bench and not judged and not have and any(r.metric not in AB_METRICS for r in rules):
        return [
            Rule(
                metric="error_rate",
                op="<=",
                threshold=DEFAULT_MAX_ERROR_RATE,
                guard=True,
                source="default: failures count against acceptance measured by bench runs "
                "(fails when clearly above; --max-error-rate sets the bound, --ignore-errors "
                "drops it)",
            )
        ]
    return [
        Rule(
            metric="error_rate",
            op="<=",
            threshold=DEFAULT_MAX_ERROR_RATE,
            concurrency=c,
            source="default: failures count against every A/B rule (--max-error-rate sets the "
            "bound, --ignore-errors drops it)",
        )
        for c in sorted(judged - have, key=lambda x: (x is not None, x or 0))
    ]


def rule_set(
    rules: list[Rule],
    *,
    file: RuleSet | None = None,
    min_drafts: int | None = None,
    min_requests: int | None = None,
    count_errors: bool = True,
    bench: bool = False,
    allow_point_estimates: bool = False,
    allow_single_run: bool = False,
) -> RuleSet:
    """What a gate judges: a rules ``file``'s rules, then ``rules`` (a plan's, the flags'), and
    the default error rules (:func:`default_error_rules`) unless ``count_errors`` is False; each
    evidence minimum the stricter of the one given and the file's, :class:`RuleSet`'s default
    when neither says."""
    every = [*(file.rules if file is not None else []), *rules]
    if count_errors:
        every += default_error_rules(every, bench=bench)
    given = file.model_fields_set if file is not None else set()

    def minimum(name: str, flag: int | None) -> int:
        default: int = RuleSet.model_fields[name].default
        from_file = getattr(file, name) if file is not None and name in given else None
        values = [v for v in (flag, from_file) if v is not None]
        return max(values) if values else default

    return RuleSet(
        rules=every,
        min_drafts=minimum("min_drafts", min_drafts),
        min_requests=minimum("min_requests", min_requests),
        allow_point_estimates=allow_point_estimates,
        allow_single_run=allow_single_run,
    )


class Thresholds(Frozen):
    """The rules a gate is given one threshold at a time (``gate --min-alpha 0.6 …``): a field
    per metric and direction, named ``min_<metric>`` (≥) or ``max_<metric>`` (≤); None gives no
    rule. The bounds are those of the gate's flags, which are generated from these fields."""

    min_draft_acceptance_rate: float | None = Field(
        default=None, ge=0.0, le=1.0, description="ρ (accepted ÷ drafted) at least."
    )
    min_alpha: float | None = Field(
        default=None, ge=0.0, le=1.0, description="Conditional α at least."
    )
    min_mean_acceptance_length: float | None = Field(
        default=None, ge=1.0, le=65.0, description="τ at least."
    )
    min_throughput_speedup: float | None = Field(
        default=None,
        ge=0.0,
        le=100.0,
        description="Candidate ÷ baseline output tokens/s at least.",
    )
    min_tpot_speedup: float | None = Field(
        default=None, ge=0.0, le=100.0, description="Baseline ÷ candidate mean TPOT at least."
    )
    min_itl_per_token_p99_speedup: float | None = Field(
        default=None,
        ge=0.0,
        le=100.0,
        description="Baseline ÷ candidate P99 ITL per token at least (1 = not worse).",
    )
    min_goodput_speedup: float | None = Field(
        default=None,
        ge=0.0,
        le=100.0,
        description="Candidate ÷ baseline goodput (requests/s within the bench runs' --slo) at "
        "least.",
    )
    max_error_rate: float | None = Field(
        default=None, ge=0.0, le=1.0, description="Candidate failures ÷ requests at most."
    )
    max_itl_per_token_p99_ms: float | None = Field(
        default=None,
        ge=0.0,
        le=1e6,
        description="The candidate's P99 ITL per token (ms) at most: an SLO.",
    )

    def rules(self, *, cls: str | None = None, concurrency: int | None = None) -> list[Rule]:
        """One rule per threshold given: acceptance rules of the traffic class ``cls``, A/B
        rules of the bench level ``concurrency``. :class:`ConfigError` naming the field for a
        rule that cannot fail."""
        out = []
        for name, value in self.model_dump(exclude_none=True).items():
            bound, metric = name.split("_", 1)
            ab = metric in AB_METRICS
            rule = Rule(
                metric=metric,  # every field names a Metric
                op=">=" if bound == "min" else "<=",
                threshold=value,
                cls=None if ab else cls,
                concurrency=concurrency if ab else None,
                source="flag",
            )
            out.append(refuse_vacuous(rule, name))
        return out


class EvidencePolicy(Frozen):
    """How much evidence a gate asks for before it decides, and what it judges besides the
    rules: the gate's evidence flags, which are generated from these fields."""

    min_drafts: int | None = Field(
        default=None,
        ge=1,
        description="Drafts an acceptance rule needs (default 2,000, or the rules file's; the "
        "larger of the two when both are given).",
    )
    min_requests: int | None = Field(
        default=None,
        ge=1,
        description="Requests per side an A/B rule needs (default 100, or the rules file's).",
    )
    allow_point_estimates: bool = Field(
        default=False,
        description="Judge values that come without an interval (vllm bench serve summaries) "
        "as they are; by default they are not enough evidence.",
    )
    max_age: str = Field(
        default="7d",
        description="Evidence measured longer ago than this (90m, 12h, 7d) is stale: not "
        "enough evidence until measured again.",
    )
    ignore_errors: bool = Field(
        default=False,
        description="Do not judge the candidate's failed requests (by default every A/B is "
        "judged with errors ≤ 5% at its concurrency unless --max-error-rate says otherwise).",
    )
    allow_single_run: bool = Field(
        default=False,
        description="Judge an A/B of one run per side on its within-run interval; by default "
        "it is not enough evidence (bench --repeats alternates runs and measures their "
        "spread).",
    )

    def rule_set(self, rules: list[Rule], *, file: RuleSet | None, bench: bool) -> RuleSet:
        """What a gate judges under this policy (:func:`rule_set`): ``bench`` when the
        evidence includes bench runs."""
        return rule_set(
            rules,
            file=file,
            min_drafts=self.min_drafts,
            min_requests=self.min_requests,
            count_errors=not self.ignore_errors,
            bench=bench,
            allow_point_estimates=self.allow_point_estimates,
            allow_single_run=self.allow_single_run,
        )


def refuse_vacuous(rule: Rule, field: str) -> Rule:
    """``rule``, or :class:`ConfigError` (naming ``field``) for one that cannot fail
    (:attr:`Rule.vacuous`): a gate that passes on no evidence."""
    if rule.vacuous:
        raise ConfigError(_vacuous(rule), field)
    return rule


def load_rules(path: Path) -> RuleSet:
    """A rules file: ``{"rules": [{"metric": ..., "op": ..., "threshold": ...}], ...}`` (JSON)."""
    if not path.is_file():
        raise ConfigError(f"rules file not found (or not a file): {path}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        rs = RuleSet.model_validate(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: not a JSON rules file ({exc})") from None
    except ValidationError as exc:
        raise ConfigError(f"{path}: {validation_problem(exc)}") from None
    for i, r in enumerate(rs.rules):
        if r.vacuous:
            raise ConfigError(f"{path}: rules.{i}: {_vacuous(r)}", "rules")
    return rs.model_copy(
        update={"rules": [r.model_copy(update={"source": str(path)}) for r in rs.rules]}
    )


def _vacuous(r: Rule) -> str:
    return f"{r.describe()} passes whatever is measured: give a threshold that a bad build fails"


def rules_from_plan(path: Path) -> list[Rule]:
    """The gate of a plan (``alphagate plan --json``, or the .json written beside ``--out``)."""
    return plan_rules(load_plan(path), path)


def load_plan(path: Path) -> Plan:
    """A plan JSON, validated (its thresholds finite and in range); raises :class:`ConfigError`
    naming the file and the field."""
    from alphagate.plan.records import Plan

    if not path.is_file():
        raise ConfigError(f"plan file not found (or not a file): {path}")
    try:
        text = path.read_text(encoding="utf-8")
        plan = Plan.model_validate_json(text)
    except ValidationError as exc:
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        if isinstance(data, dict) and data.get("verb") == "plan":
            raise ConfigError(
                f"{path}: not a plan this alphagate can use — edited, or written by another "
                f"version of alphagate ({validation_problem(exc)}): re-run alphagate plan"
            ) from None
        raise ConfigError(
            f"{path}: not an alphagate plan JSON ({validation_problem(exc)})"
        ) from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(
            f"{path}: not an alphagate plan JSON ({str(exc).splitlines()[0]})"
        ) from None
    return plan


def plan_rules(plan: Plan, path: Path) -> list[Rule]:
    """The rules of a plan's gate."""
    g = plan.gate
    if g is None:
        raise ConfigError(f"{path}: the plan is a {plan.verdict}: it has no gate to apply")
    src = f"plan {path.name} (decided at concurrency {g.concurrency}, K={g.k})"
    rules = [Rule(metric="alpha", threshold=g.alpha_min, source=src)]
    for c in plan.classes:
        if c.name not in plan.routed_away and c.alpha_gate is not None and len(plan.classes) > 1:
            rules.append(Rule(metric="alpha", threshold=c.alpha_gate, cls=c.name, source=src))
    at = plan.concurrency
    rules += [
        Rule(metric="tpot_speedup", threshold=g.min_tpot_speedup, concurrency=at, source=src),
        Rule(
            metric="itl_per_token_p99_speedup",
            threshold=g.min_itl_per_token_p99_speedup,
            concurrency=at,
            source=f"{src}; P99 budget {g.p99_budget:g}×: {g.p99_budget_source}",
        ),
        Rule(metric="error_rate", op="<=", threshold=0.01, concurrency=at, source=src),
    ]
    if g.max_itl_per_token_p99_ms is not None:
        rules.append(
            Rule(
                metric="itl_per_token_p99_ms",
                op="<=",
                threshold=g.max_itl_per_token_p99_ms,
                concurrency=at,
                source=f"{src}; the P99 ITL SLO",
            )
        )
    return rules
