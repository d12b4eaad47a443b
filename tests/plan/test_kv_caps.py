"""A plan whose speculative server holds fewer sequences than the baseline: Llama-3.3-70B FP8 on
two H100s with a Llama-3.2-1B draft model and 2,048-token prompts (2,304 tokens a sequence). The
baseline's KV room holds 88 of them, the speculative server's — beside the draft model's KV, with
each sequence's 3 drafts and 3 lookahead slots — 79. At concurrency 84 the plan runs each arm at
its own batch and says so, and so do ``simulate`` and its cost card. Where the policy switches
speculation off (a K of 0 at a batch size), the server still holds the drafter's KV and each
sequence's lookahead slots: that level is priced at the speculative server's own batch."""

from __future__ import annotations

from alphagate.core.traffic import TrafficClass
from alphagate.plan.predictions import Predictor
from alphagate.plan.records import PlanRequest
from alphagate.specs import DeploymentConfig, WorkloadConfig, drafter_for, speculative_kv_slots
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


def _request(method: str = "draft_model", draft: str | None = "llama-3.2-1b") -> PlanRequest:
    return PlanRequest(
        deployment=DeploymentConfig(tp=2, drafter=drafter_for(method, draft)),
        workload=WorkloadConfig(
            prompt_len=FixedLength(value=2048),
            classes=(TrafficClass(name="chat", share=1.0, alpha=0.8),),
        ),
        concurrency=84,
        k=3,
    )


def test_a_server_launched_with_drafts_keeps_their_lookahead_slots_at_k_0() -> None:
    """vLLM allocates ``num_lookahead_tokens`` (the launched K, for a drafter with KV) at every
    step, the steps a batch-size schedule runs with fewer drafts or none included."""
    draft, ngram = drafter_for("draft_model", "llama-3.2-1b"), drafter_for("ngram")
    assert speculative_kv_slots(draft, 3) == 6  # started at K = 3 and drafting 3
    assert speculative_kv_slots(draft, 1, launched=3) == 4
    assert speculative_kv_slots(draft, 0, launched=3) == 3
    assert speculative_kv_slots(draft, 0) == 0  # the server without speculation
    assert speculative_kv_slots(ngram, 0, launched=3) == 0  # no KV, no lookahead
    assert speculative_kv_slots(ngram, 2, launched=3) == 2


def test_speculation_off_is_priced_on_the_launched_server() -> None:
    """A level a batch-size schedule runs at K = 0: the server started at K = 3 holds the
    drafter's KV and 3 lookahead slots a sequence, and runs the drafter's first forward every
    step (vLLM's dynamic speculative decoding keeps the drafter's KV in step)."""
    req = _request()
    pred = Predictor(req)
    classes = req.workload.classes
    assert pred.sim_speedup(84, classes, 0) == 1.0  # none launched: the baseline itself
    pred.launch(3)
    # 182,579 tokens beside the drafter's KV // (2,304 + 3 lookahead slots)
    assert pred.off_cap() == 79
    run = pred.paired(84, classes, 0)
    assert int(run.spec_trace.step_n_running.max()) == 79
    assert int(run.baseline_trace.step_n_running.max()) == 84
    # at 64 both hold the batch: the drafter's forward alone is the difference
    both = pred.paired(64, classes, 0)
    assert int(both.spec_trace.step_n_running.max()) == 64
    assert bool(both.spec_trace.step_dt_s.mean() > both.baseline_trace.step_dt_s.mean())
    at_84, at_64 = pred.sim_speedup(84, classes, 0), pred.sim_speedup(64, classes, 0)
    assert at_84 == run.speedup.throughput_speedup
    assert at_84 < at_64 < 1.0  # 5 users queue at 84, besides the drafter's forward
    thr = pred.sim_intervals(84, classes, 0)[0]
    assert thr.low is not None and thr.high is not None and thr.low <= at_84 <= thr.high < 1.0


def test_a_host_drafter_switched_off_holds_what_the_baseline_holds() -> None:
    pred = Predictor(_request("ngram", None))
    pred.launch(3)
    assert pred.off_cap() == pred.b_max


OFF_AT_PEAK = ("--prompt-len", "fixed:1024", "--k", "3", "--class", "chat:1:0.4",
               "--concurrency", "16", "--peak-concurrency", "150")  # fmt: skip


def test_a_schedules_off_levels_run_on_the_server_it_launches(plans: Plans) -> None:
    """The schedule switches speculation off at the peak, where the baseline holds all 150
    sequences of 1,280 tokens (204,609 // 1,280 = 159) and the server launched with the
    schedule's largest K (its ``num_speculative_tokens``), drafting none, 182,579 // (1,280 + K)."""
    d = plans(*ARGS[: ARGS.index("--prompt-len")], *OFF_AT_PEAK).json
    launched = d["speculative_config"]["num_speculative_tokens"]
    assert launched == max(r["k"] for r in d["rows"]) >= 1
    peak = next(r for r in d["rows"] if r["concurrency"] == 150)
    assert peak["k"] == 0
    assert peak["batch"] == {"baseline": 150, "speculative": 182_579 // (1_280 + launched)}
    assert peak["throughput_speedup"] < 1.0
    assert peak["throughput_speedup_interval"]["high"] < 1.0


def test_one_fixed_k_routes_its_off_levels_to_a_pool_without_speculation(plans: Plans) -> None:
    """Before vLLM's batch-size schedules, the plan's K = 0 levels are traffic routed to servers
    without speculation: the baseline itself."""
    d = plans(*ARGS[: ARGS.index("--prompt-len")], *OFF_AT_PEAK, "--engine-version", "0.31").json
    off = [r for r in d["rows"] if r["k"] == 0]
    assert off, d["rows"]
    for r in off:
        assert r["throughput_speedup"] == 1.0
        assert r["batch"]["speculative"] == r["batch"]["baseline"]
