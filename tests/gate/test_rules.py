"""What a gate judges, put together in the layer that owns the rules (the CLI and the Python API
both call :func:`alphagate.gate.rules.rule_set`): a rules file's rules, then a plan's and the
flags', the default error rules, and the evidence minimums."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import alphagate as ag
from alphagate.core.errors import ConfigError
from alphagate.gate.rules import (
    DEFAULT_MAX_ERROR_RATE,
    EvidencePolicy,
    Rule,
    RuleSet,
    Thresholds,
    load_rules,
    refuse_vacuous,
    rule_set,
)
from tests.conftest import Cli

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


@pytest.mark.parametrize(
    ("metric", "op", "threshold"),
    [
        ("alpha", ">=", 0.0),
        ("tpot_speedup", ">=", 0.0),
        ("mean_acceptance_length", ">=", 1.0),
        ("error_rate", "<=", 1.0),
    ],
)
def test_a_rule_that_cannot_fail_is_refused_from_flags_and_files(
    metric: str, op: str, threshold: float, tmp_path: Path
) -> None:
    rule = Rule(metric=metric, op=op, threshold=threshold)  # type: ignore[arg-type]
    assert rule.vacuous
    with pytest.raises(ConfigError, match="passes whatever is measured") as e:
        refuse_vacuous(rule, "min_x")
    assert e.value.field == "min_x"
    f = tmp_path / "rules.json"
    f.write_text(json.dumps({"rules": [{"metric": metric, "op": op, "threshold": threshold}]}))
    with pytest.raises(ConfigError, match=r"rules\.0: .* passes whatever is measured"):
        load_rules(f)
    tighter = threshold + 0.01 if op == ">=" else threshold - 0.01
    assert not Rule(metric=metric, op=op, threshold=tighter).vacuous  # type: ignore[arg-type]


def test_the_gate_names_the_flag_of_a_rule_that_cannot_fail(tmp_path: Path) -> None:
    m = tmp_path / "m.json"
    m.write_text("{}")
    r = Cli().run("gate", "--min-tpot-speedup", "0", "--measure", str(m), "--json")
    assert r.exit_code == 2
    err = json.loads(r.stdout)["error"]
    assert err["param"] == "--min-tpot-speedup" and "passes whatever is measured" in err["message"]


def test_thresholds_give_a_rule_per_value_scoped_by_kind() -> None:
    """Acceptance rules take the class, A/B rules the level; ``max_`` fields are ≤ rules."""
    rules = Thresholds(min_alpha=0.6, min_tpot_speedup=1.1, max_error_rate=0.02).rules(
        cls="chat", concurrency=8
    )
    assert [(r.metric, r.op, r.threshold, r.cls, r.concurrency) for r in rules] == [
        ("alpha", ">=", 0.6, "chat", None),
        ("tpot_speedup", ">=", 1.1, None, 8),
        ("error_rate", "<=", 0.02, None, 8),
    ]
    assert Thresholds().rules() == []


def test_every_threshold_names_a_metric_and_refuses_a_rule_that_cannot_fail() -> None:
    for name in Thresholds.model_fields:
        bound, metric = name.split("_", 1)
        assert bound in ("min", "max") and metric in Rule.model_fields["metric"].annotation.__args__
    with pytest.raises(ConfigError) as err:
        Thresholds(min_alpha=0.0).rules()
    assert err.value.field == "min_alpha"
    with pytest.raises(ValueError):
        Thresholds(min_alpha=1.5)


def test_the_evidence_policy_merges_as_rule_set_does() -> None:
    file = RuleSet(rules=[ALPHA], min_drafts=5000)
    policy = EvidencePolicy(min_drafts=10, min_requests=300, ignore_errors=True)
    assert policy.rule_set([TPOT], file=file, bench=True) == rule_set(
        [TPOT], file=file, min_drafts=10, min_requests=300, count_errors=False, bench=True
    )
    assert EvidencePolicy().rule_set([TPOT], file=None, bench=False).rules[1].metric == (
        "error_rate"
    )
