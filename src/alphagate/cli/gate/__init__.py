"""``alphagate gate``: rules judged on measured evidence, as an exit code for CI/CD and canaries.

Exit codes: 0 pass; 1 fail; 2 bad input; 3 not enough evidence yet (too few drafts or requests,
or an interval that straddles a threshold) — never a pass; 130 interrupted while watching.

The threshold flags (``--min-alpha`` …) and the evidence policy (``--min-drafts`` …) are
generated from :class:`~alphagate.gate.rules.Thresholds` and
:class:`~alphagate.gate.rules.EvidencePolicy`; the merge of every rule is
:meth:`EvidencePolicy.rule_set <alphagate.gate.rules.EvidencePolicy.rule_set>`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from alphagate.cli._app import JsonOpt, app
from alphagate.cli._check import config_error, fail
from alphagate.cli._groups import takes_groups
from alphagate.cli._paths import check_no_overwrite, check_output_path
from alphagate.cli.gate._flags import EvidenceFlags, LiveFlags
from alphagate.cli.gate._watch import judge
from alphagate.gate.rules import EvidencePolicy, Thresholds

if TYPE_CHECKING:
    from alphagate.gate import Rule, RuleSet
    from alphagate.plan.records import Plan

__all__ = ["gate_cmd"]


@app.command("gate", short_help="Pass, fail, or not enough evidence: an exit code.")
@takes_groups
def gate_cmd(
    plan: Annotated[
        Path | None,
        typer.Option("--plan", help="Take the thresholds of a plan's gate (plan JSON)."),
    ] = None,
    rules: Annotated[Path | None, typer.Option("--rules", help="A JSON rules file.")] = None,
    thresholds: Thresholds = Thresholds(),
    cls: Annotated[
        str | None,
        typer.Option("--class", help="Apply the acceptance flags to this traffic class."),
    ] = None,
    concurrency: Annotated[
        int | None,
        typer.Option("--concurrency", min=1, help="The bench level the A/B flags judge."),
    ] = None,
    policy: EvidencePolicy = EvidencePolicy(),
    evidence: EvidenceFlags = EvidenceFlags(),
    live: LiveFlags = LiveFlags(),
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write the decision JSON here.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Judge rules (from flags, --rules or --plan) on evidence (measure results, bench A/B
    summaries, vllm bench serve JSON, or live metrics) and exit 0 pass, 1 fail, 3 not enough
    evidence yet (never a pass), 2 bad input."""
    from alphagate.core.errors import ConfigError
    from alphagate.measure.prometheus import parse_duration
    from alphagate.measure.results import MeasureError

    if out is not None:
        check_output_path(out, "--out", directory=False)
    check_no_overwrite([(out, "--out", False)], [*evidence.paths(), plan, rules])
    try:
        window_s, max_age_s = parse_duration(live.window), parse_duration(policy.max_age)
    except MeasureError as exc:
        fail(str(exc), "--window/--max-age")
    base, the_plan, from_plan = _rule_files(plan, rules)
    try:
        flagged = thresholds.rules(cls=cls, concurrency=concurrency)
    except ConfigError as exc:
        config_error(exc)
    if not (base or from_plan or flagged):
        fail("no rules: give --plan, --rules or a --min-…/--max-… flag", "--plan")
    rs = policy.rule_set([*from_plan, *flagged], file=base, bench=evidence.has_bench)
    source = live.source(rs, window_s)
    judge(rs, evidence.files(the_plan, max_age_s), source, live, as_json=as_json, out=out)


def _rule_files(
    plan: Path | None, rules: Path | None
) -> tuple[RuleSet | None, Plan | None, list[Rule]]:
    """The rules file's rule set, the plan, and the rules of the plan's gate."""
    from alphagate.core.errors import ConfigError
    from alphagate.gate import load_rules
    from alphagate.gate.rules import load_plan, plan_rules

    try:
        base = load_rules(rules) if rules else None
        the_plan = load_plan(plan) if plan else None
        from_plan = plan_rules(the_plan, plan) if the_plan is not None and plan else []
    except ConfigError as exc:
        config_error(exc, "--plan/--rules")
    return base, the_plan, from_plan
