"""``plan --method suffix``: a plan from a measured draft-length profile — the trees' settings that
were measured are the ones served, K is their cap, no batch-size schedule (vLLM's suffix
proposer drafts for exactly num_speculative_tokens), SGLang's SUFFIX flags, and a gate on τ."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from alphagate.gate.rules import plan_rules
from alphagate.measure.offline.lengths import summarize_lengths
from alphagate.measure.offline.results import OfflineDetails
from alphagate.measure.results import MeasureResult
from alphagate.plan.records import Plan
from alphagate.specs.deployment import SuffixParams
from alphagate.theory.lengths import rate_and_length
from tests.conftest import Cli
from tests.plans import Plans
from tests.shared import made_once, shared_root

HERE = Path(__file__).parent
K = 8
PARAMS = SuffixParams(max_tree_depth=16, max_spec_factor=1.5, min_token_prob=0.2)


def _joint(accept: float, seed: int) -> np.ndarray:
    """Steps of 4 requests: a third without a draft, the rest drafting 1…K tokens, each reached
    position accepted with probability ``accept``."""
    rng = np.random.default_rng(seed)
    out = np.zeros((4, K + 1, K + 1))
    for r in range(4):
        for _ in range(300):
            n = 0 if rng.random() < 1 / 3 else int(rng.integers(1, K + 1))
            a = 0
            while a < n and rng.random() < accept:
                a += 1
            out[r, n, a] += 1
    return out


def _result(path: Path, accept: float) -> Path:
    """A ``measure offline --drafter suffix`` result with one class, ``code``."""
    joints = _joint(accept, 0)
    toks = np.full(4, 100, dtype=np.int64)
    est, detail = summarize_lengths(
        joints, prompt_tokens=toks, output_tokens=toks, resamples=20,
        rng=np.random.default_rng(0),
    )  # fmt: skip
    details = OfflineDetails(
        drafter="suffix", target="t", k=K, k_max=K, semantics="greedy", temperature=0.0,
        top_p=1.0, top_k=0, draft_sampling="greedy", regenerated=False, seed=0, sample=None,
        requests_read=4, requests_used=4, prompt_tokens=400, output_tokens=400, truncated=0,
        retokenized=0, trajectory_agreement=1.0, bootstrap_resamples=20, wall_s=1.0,
        classes={"code": detail}, overall=detail, suffix=PARAMS, arctic_inference="0.1.1",
    )  # fmt: skip
    m = MeasureResult(
        verb="measure offline", source="log", window_s=None, overall=est,
        classes={"code": est}, sources=1, offline=details,
    )  # fmt: skip
    path.write_text(json.dumps(m.payload()))
    return path


#: the plans' request lengths: a suffix plan simulates every step of each request at its
#: measured draft lengths, so its cost grows with the output length; outputs of ~64 tokens cost
#: a quarter of the default 256 (a 4 s plan, not 11–14 s, at α 0.5) and reach the same verdicts
#: and gates the tests below check — what is tested is how the profile is read, not the lengths
PLAN = (
    "plan", "--method", "suffix", "--model", "llama-3.1-8b", "--gpu", "h100", "--class",
    "code:1.0", "-c", "4", "--output-len", "lognormal:64",
)  # fmt: skip


@pytest.fixture(scope="session")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[float, str]:
    """The two results, written once per run at a path every worker shares (so that the plans
    that read them, whose arguments name the path, are made once too)."""

    def write(d: Path) -> None:
        for a in (0.5, 0.9):
            _result(d / f"suffix-{a}.json", a)

    d = made_once(shared_root(tmp_path_factory) / "suffix-plan", write)
    return {a: str(d / f"suffix-{a}.json") for a in (0.5, 0.9)}


def _run(plans: Plans, path: str) -> dict[str, Any]:
    return plans(*PLAN[1:], "--alpha-from", path).json


def test_the_measured_settings_are_served_at_their_cap(
    plans: Plans, files: dict[float, str]
) -> None:
    d = _run(plans, files[0.9])
    assert d["speculative_config"] == {
        "method": "suffix",
        "num_speculative_tokens": K,
        "suffix_decoding_max_tree_depth": 16,
        "suffix_decoding_max_cached_requests": 10_000,
        "suffix_decoding_max_spec_factor": 1.5,
        "suffix_decoding_min_token_prob": 0.2,
    }
    assert d["dynamic_k_supported"] is False and d["batch_schedule"] == []
    assert {r["k"] for r in d["rows"] if r["k"]} == {K}
    served = [c for s in d["stages"] for c in s["commands"] if c.startswith("vllm serve")]
    assert any('"method":"suffix"' in c for c in served)


def test_better_acceptance_pays_more_and_the_gate_is_on_tau(
    plans: Plans, files: dict[float, str], tmp_path: Path
) -> None:
    good, poor = _run(plans, files[0.9]), _run(plans, files[0.5])
    assert good["headline_speedup"] > poor["headline_speedup"] > 0
    g = good["gate"]
    assert g is not None and g["k"] == K
    # the gate's ρ and τ are the gate α's at the measured draft lengths, not a chain's
    lengths = np.asarray(_joint(0.9, 0).sum(axis=(0, 2)))
    rho, tau = rate_and_length(g["alpha_min"], lengths / lengths.sum())
    assert g["draft_acceptance_rate_min"] == pytest.approx(rho, rel=1e-6)
    assert g["mean_acceptance_length_min"] == pytest.approx(tau, rel=1e-6)
    plan = Plan.model_validate(good)
    rules = plan_rules(plan, tmp_path / "plan.json")
    acceptance = [r for r in rules if r.metric in ("alpha", "mean_acceptance_length")]
    assert acceptance and all(r.metric == "mean_acceptance_length" for r in acceptance)
    assert acceptance[0].threshold == pytest.approx(tau)


def test_sglang_has_no_suffix_decoding_to_plan(plans: Plans, files: dict[float, str]) -> None:
    """SGLang's released server has no SUFFIX algorithm: the plan says so instead of printing a
    launch line its parser refuses (tests/real_engine/test_sglang.py runs that parser), and a
    vLLM suffix plan carries no SGLang flags."""
    r = Cli().run(
        "plan", "--method", "suffix", "--model", "llama-3.1-8b", "--class", "code:1.0",
        "--alpha-from", files[0.9], "-c", "4", "--engine", "sglang",
    )  # fmt: skip
    assert r.exit_code == 2 and "no suffix" in r.output and "--engine vllm" in r.output, r.output
    assert _run(plans, files[0.9])["sglang_flags"] == []


def test_a_suffix_plan_without_a_profile_is_refused() -> None:
    r = Cli().run("plan", "--method", "suffix", "--class", "code:1.0:0.7", "-c", "4")
    assert r.exit_code == 2 and "--alpha-from" in r.output and "Traceback" not in r.output


def test_the_calibrated_re_plan_keeps_the_measured_draft_lengths(
    plans: Plans, files: dict[float, str]
) -> None:
    """A suffix plan that says MEASURE FIRST prints a calibration and a re-plan; the re-plan
    reads the same measurement (a typed α cannot carry the draft lengths) and, short of the
    calibration it names, plans as printed."""
    d = _run(plans, files[0.5])
    assert d["verdict"] == "measure first" and d["uncertainty"]["settle_by"] == "calibrate"
    replan = shlex.split(d["uncertainty"]["settle_commands"][1])
    assert replan[:2] == ["alphagate", "plan"]
    assert replan[replan.index("--alpha-from") + 1] == files[0.5]
    drop = {replan.index("--calibration"), replan.index("--out")}
    argv = [a for i, a in enumerate(replan) if i not in drop and i - 1 not in drop]
    again = Cli().json(*argv[1:])
    assert again["speculative_config"]["method"] == "suffix"
