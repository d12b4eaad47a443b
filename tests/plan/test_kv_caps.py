"""A plan whose speculative server holds fewer sequences than the baseline: Llama-3.3-70B FP8 on
two H100s with a Llama-3.2-1B draft model and 2,048-token prompts (2,304 tokens a sequence). The
baseline's KV room holds 88 of them, the speculative server's — beside the draft model's KV, with
each sequence's 3 drafts and 3 lookahead slots — 79. At concurrency 84 the plan runs each arm at
its own batch and says so, and so do ``simulate`` and its cost card."""

from __future__ import annotations

from alphagate.core.traffic import TrafficClass
from alphagate.plan.predictions import Predictor
from alphagate.plan.records import PlanRequest
from alphagate.specs import DeploymentConfig, WorkloadConfig, drafter_for
from alphagate.specs.workload import FixedLength
from tests.conftest import Cli
from tests.plans import Plans

ARGS = (
    "--method", "draft_model", "--draft", "llama-3.2-1b", "--tp", "2",
    "--prompt-len", "fixed:2048", "--class", "chat:1:0.8", "--concurrency", "84", "--k", "3",
)  # fmt: skip


def test_between_the_caps_the_speculative_arm_runs_at_its_own(plans: Plans) -> None:
    run = plans(*ARGS)
    d = run.json
    mem = d["memory"]
    # the rooms over 2,304 tokens a sequence, and over 2,304 + 6 slots
    assert mem["largest_batch"] == {"baseline": 88, "speculative": 79}
    assert d["crossover_search_max"] == 88
    rows = {r["concurrency"]: r for r in d["rows"]}
    assert rows[84]["batch"] == {"baseline": 84, "speculative": 79}
    assert rows[64]["batch"] == {"baseline": 64, "speculative": 64}
    line = "79 against 84 at concurrency 84"
    assert line in run.markdown and line in " ".join(run.output.split())
    assert "88 sequences without speculation, 79 with it at K=3" in run.markdown


def test_the_paired_simulation_holds_each_arm_to_its_own_batch() -> None:
    req = PlanRequest(
        deployment=DeploymentConfig(tp=2, drafter=drafter_for("draft_model", "llama-3.2-1b")),
        workload=WorkloadConfig(
            prompt_len=FixedLength(value=2048),
            classes=(TrafficClass(name="chat", share=1.0, alpha=0.8),),
        ),
        concurrency=84,
        k=3,
    )
    pred = Predictor(req)
    run = pred.paired(84, req.workload.classes, 3)
    assert int(run.baseline_trace.step_n_running.max()) == 84
    assert int(run.spec_trace.step_n_running.max()) == 79
    assert (pred.arm_batch(84, 0), pred.arm_batch(84, 3), pred.batch(84)) == (84, 79, 84.0)


def test_the_cost_card_says_each_arms_largest_batch_and_why() -> None:
    deployment = ARGS[: ARGS.index("--class")]
    args = ("simulate", "--explain-cost", *deployment, "--concurrency", "84", "--k", "1,3")
    fact = next(
        f for f in Cli().json(*args)["engine"] if f["name"].startswith("largest batch in the KV")
    )
    # K = 0: 204,609 // 2,304; K = 1: 182,579 // (2,304 + 2); K = 3: … // (2,304 + 6)
    assert fact["by_k"] == [88, 79, 79]
    assert "204,609 tokens; 182,579 beside the drafter's KV" in fact["name"]
    assert "2,304 tokens here" in fact["effect"] and "lookahead" in fact["effect"]
    text = " ".join(Cli(width=100).run(*args).output.split())
    assert "largest batch in the KV cache (204,609 tokens; 182,579 beside" in text


def test_simulate_says_where_the_speculative_server_holds_fewer() -> None:
    deployment = ARGS[: ARGS.index("--class")]
    args = ("simulate", *deployment, "--concurrency", "84", "--k", "3", "--alpha", "0.8")
    d = Cli().json(*args, "--no-breakeven-sim")
    assert d["largest_batch"] == [{"baseline": 88, "speculative": 79}]
    text = " ".join(Cli(width=100).run(*args, "--no-breakeven-sim").output.split())
    assert "Largest batch: 88 sequences without speculation, 79 at K=3 with it" in text
