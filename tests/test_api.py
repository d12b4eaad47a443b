"""The Python API answers as the commands print: ``ag.build_plan`` words its verdict and what
would change it exactly as ``alphagate plan --json`` does for the same request."""

from __future__ import annotations

import alphagate as ag
from tests.plans import MIX, Plans


def test_build_plan_is_worded_as_the_plan_command_prints_it(plans: Plans) -> None:
    classes = (
        ag.TrafficClass(name="chat", share=0.7, alpha=0.7),
        ag.TrafficClass(name="code", share=0.3, alpha=0.4),
    )
    assert MIX == ("--class", "chat:0.7:0.7", "--class", "code:0.3:0.4")
    plan = ag.build_plan(
        ag.PlanRequest(workload=ag.WorkloadConfig(classes=classes), concurrency=64)
    )
    # the payload `plan --json` prints (shared with the plan tests that read the same request)
    printed = plans(*MIX, "--concurrency", "64").json
    assert plan.reason and plan.reason == printed["reason"]
    assert plan.change_verdict == printed["change_verdict"]
    assert plan.verdict == printed["verdict"]
