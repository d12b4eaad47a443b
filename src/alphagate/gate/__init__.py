"""The gate: rules (from flags, a file or a plan) judged on measured evidence, as an exit code."""

from alphagate.gate.evaluate import EXIT_CODES, GateResult, RuleResult, evaluate, no_evidence
from alphagate.gate.evidence import Evidence, load_bench, load_measure, load_vllm_result
from alphagate.gate.rules import Rule, RuleSet, load_rules, rule_set, rules_from_plan

__all__ = [
    "EXIT_CODES",
    "Evidence",
    "GateResult",
    "Rule",
    "RuleResult",
    "RuleSet",
    "evaluate",
    "load_bench",
    "load_measure",
    "load_rules",
    "load_vllm_result",
    "no_evidence",
    "rule_set",
    "rules_from_plan",
]
