"""What a gate judges, put together in the layer that owns the rules (the CLI and the Python API
both call :func:`alphagate.gate.rules.rule_set`): a rules file's rules, then a plan's and the
flags', the default error rules, and the evidence minimums."""

from __future__ import annotations

import alphagate as ag
from alphagate.gate.rules import DEFAULT_MAX_ERROR_RATE, Rule, RuleSet, rule_set

TPOT = Rule(metric="tpot_speedup", op=">=", threshold=1.1, concurrency=8, source="flag")
ALPHA = Rule(metric="alpha", op=">=", threshold=0.5, source="plan")


def test_the_rules_in_order_with_an_error_rule_at_each_ab_concurrency() -> None:
    file = RuleSet(rules=[ALPHA])
    rs = rule_set([TPOT], file=file)
    assert rs.rules[:2] == [ALPHA, TPOT]
    (err,) = rs.rules[2:]
    assert (err.metric, err.concurrency, err.threshold) == ("error_rate", 8, DEFAULT_MAX_ERROR_RATE)
    assert rule_set([TPOT], count_errors=False).rules == [TPOT]


def test_bench_evidence_guards_acceptance_rules_with_an_error_rate() -> None:
    (err,) = rule_set([ALPHA], bench=True).rules[1:]
    assert err.metric == "error_rate" and err.guard and err.concurrency is None
    assert rule_set([ALPHA]).rules == [ALPHA]  # acceptance from /metrics: no requests to count


def test_minimums_are_the_stricter_of_the_flag_and_the_file_else_the_defaults() -> None:
    defaults = RuleSet(rules=[ALPHA])
    assert (rule_set([ALPHA]).min_drafts, rule_set([ALPHA]).min_requests) == (
        defaults.min_drafts,
        defaults.min_requests,
    )
    # a file that does not set a minimum does not impose the default over a looser flag
    assert rule_set([], file=RuleSet(rules=[ALPHA]), min_drafts=10).min_drafts == 10
    strict = RuleSet(rules=[ALPHA], min_drafts=5000, min_requests=50)
    rs = rule_set([], file=strict, min_drafts=10, min_requests=300)
    assert (rs.min_drafts, rs.min_requests) == (5000, 300)


def test_the_python_api_has_it() -> None:
    assert ag.rule_set is rule_set
