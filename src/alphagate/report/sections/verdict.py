"""Section 1 of the report: the verdict and the config to paste — each plan's decision with its
gate and the flags that ship it, each gate decision, the measured A/B table of each bench run,
and the best K per load of each sweep.
"""

from __future__ import annotations

import json

from alphagate.bench.records import BenchResult, Comparison, LevelSummary
from alphagate.core.fmt import DASH, num
from alphagate.plan.records import Plan
from alphagate.report._fmt import fmt_alpha, fmt_ms, fmt_x
from alphagate.report.blocks import (
    Block,
    Cell,
    Code,
    Prose,
    Table,
    Tone,
    Verdict,
    cells,
    ratio_cell,
)
from alphagate.report.inputs import BenchInput, GateInput, PlanInput, ReportInputs, SweepInput
from alphagate.sim.sweep import SweepCell, SweepResult

__all__ = ["VERDICT_TONE", "verdict_section"]

VERDICT_TONE: dict[str, Tone] = {"go": "good", "no-go": "bad", "pass": "good", "fail": "bad"}


# ---------------------------------------------------------------- plans
def _plan_facts(p: Plan) -> tuple[tuple[str, str], ...]:
    facts = [("Policy", p.policy)]
    if p.gate is not None:
        g = p.gate
        facts.append(
            (
                "Gate",
                f"ρ ≥ {g.draft_acceptance_rate_min:.3f} (α ≥ {g.alpha_min:.2f}, τ ≥ "
                f"{g.mean_acceptance_length_min:.2f}) at concurrency {g.concurrency}, K={g.k}",
            )
        )
    facts.append(
        (
            f"Throughput at {p.concurrency}",
            f"{fmt_x(p.headline_speedup)} with what is recommended; {fmt_x(p.fleet_speedup)} over "
            "all traffic (classes served without speculation at 1×)",
        )
    )
    if p.routed_away:
        facts.append(("Served without speculation", ", ".join(p.routed_away)))
    return tuple(facts)


def _plan_verdict(pi: PlanInput) -> list[Block]:
    p = pi.plan
    where = f"concurrency {p.concurrency}" + (
        f", peak {p.peak_concurrency}" if p.peak_concurrency != p.concurrency else ""
    )
    verdict = Verdict(
        source=pi.source,
        title=f"Rollout plan — {where}",
        verdict=p.verdict,
        tone=VERDICT_TONE.get(p.verdict, "warn"),
        reason=p.reason + ".",
        facts=_plan_facts(p),
        bullets=tuple(p.change_verdict),
    )
    return [verdict, *_paste(p)]


def _vllm_config(label: str, config: dict[str, object]) -> Code:
    return Code(label, f"--speculative-config '{json.dumps(config)}'")


def _paste(p: Plan) -> list[Block]:
    """What to paste: the engine flags, stage 1's commands, and a one-K fallback config."""
    if p.verdict == "no-go":
        return [
            Prose(
                f"Nothing to paste: keep speculation off at concurrency {p.concurrency}. The plan's "
                "stages say what to measure to change that.",
                "note",
            )
        ]
    if p.engine == "sglang":
        return [Code("SGLang server flags", " ".join(p.sglang_flags))]
    kind = "K by batch size" if p.dynamic_k_supported else "one K"
    out: list[Block] = [_vllm_config(f"vLLM --speculative-config ({kind})", p.speculative_config)]
    stage1 = next((s for s in p.stages if s.number == 1 and s.commands), None)
    if stage1 is not None:
        out.append(Code(f"Stage 1 — {stage1.title}", "\n".join(stage1.commands)))
    if p.dynamic_k_supported and p.speculative_config_static != p.speculative_config:
        out.append(
            _vllm_config(
                "On a vLLM build without the batch-size schedule (one K)",
                p.speculative_config_static,
            )
        )
    return out


# ---------------------------------------------------------------- gate decisions
def _gate_verdict(gi: GateInput) -> Verdict:
    g = gi.result
    counts = {
        o: sum(1 for r in g.results if r.result == o) for o in ("pass", "fail", "insufficient")
    }
    return Verdict(
        source=gi.source,
        title="Gate decision",
        verdict=g.decision,
        tone=VERDICT_TONE.get(g.decision, "warn"),
        reason=f"{counts['pass']} of {len(g.results)} rules pass, {counts['fail']} fail, "
        f"{counts['insufficient']} lack evidence (exit code {g.exit_code}).",
        facts=(("Evidence", ", ".join(g.sources)),),
        bullets=tuple(
            f"{r.rule.describe()}: {r.result} — {r.why}" for r in g.results if r.result != "pass"
        ),
    )


# ---------------------------------------------------------------- bench runs
def _candidate_acceptance(b: BenchResult, level: str) -> tuple[str, str, str]:
    """ρ, τ and the i.i.d. α the candidate's counters show at ``level``."""
    lv = next(
        (
            x
            for x in b.levels
            if x.level == level and x.acceptance is not None and x.target != "baseline"
        ),
        None,
    )
    a = lv.acceptance if lv is not None else None
    if a is None or a.num_drafts <= 0:
        return DASH, DASH, DASH
    return (
        fmt_alpha(a.draft_acceptance_rate),
        fmt_alpha(a.mean_acceptance_length),
        fmt_alpha(a.alpha_iid),
    )


def _comparison_row(b: BenchResult, c: Comparison) -> tuple[Cell, ...]:
    s = c.speedups
    return (
        Cell(c.level),
        ratio_cell(s.throughput_speedup),
        ratio_cell(s.tpot_mean_speedup),
        ratio_cell(s.itl_per_token_p50_speedup),
        ratio_cell(s.itl_per_token_p99_speedup),
        Cell(num(s.candidate_tokens_per_chunk, ".2f")),
        *cells(*_candidate_acceptance(b, c.level)),
    )


def _level_row(lv: LevelSummary) -> tuple[Cell, ...]:
    st, a = lv.overall, lv.acceptance
    return cells(
        f"{lv.level} {lv.target}",
        f"{st.output_tokens_per_s:,.0f}",
        fmt_ms(st.tpot_ms.mean),
        fmt_ms(st.itl_per_token_ms.p50),
        fmt_ms(st.itl_per_token_ms.p99),
        fmt_alpha(a.draft_acceptance_rate if a else None),
        fmt_alpha(a.mean_acceptance_length if a else None),
        fmt_alpha(a.alpha_iid if a else None),
    )


def _bench_table(bi: BenchInput) -> Table:
    """An A/B: a row of candidate-vs-baseline ratios per level; one server: a row per level."""
    b = bi.result
    if not b.comparisons:
        return Table(
            title=f"Measured — bench run {b.run_id} ({bi.source})",
            header=("level", "tokens/s", "TPOT ms", "ITL/token P50 ms", "P99 ms", "ρ", "τ", "α"),
            rows=tuple(_level_row(lv) for lv in b.levels),
        )
    return Table(
        title=f"Measured A/B — bench run {b.run_id} ({bi.source})",
        header=(
            "level",
            "throughput",
            "TPOT",
            "ITL/token P50",
            "ITL/token P99",
            "tokens/chunk",
            "ρ",
            "τ",
            "α (i.i.d.)",
        ),
        rows=tuple(_comparison_row(b, c) for c in b.comparisons),
        note="How many times better the candidate is: throughput candidate ÷ baseline, "
        "latencies baseline ÷ candidate; below 1× the candidate is worse.",
    )


# ---------------------------------------------------------------- sweeps
def _best_k_cell(r: SweepResult, load: float, mix: str) -> Cell:
    best: SweepCell | None = max(
        (c for c in r.cells if c.load == load and c.mix == mix),
        key=lambda c: c.speedup.throughput_speedup or 0.0,
        default=None,
    )
    s = best.speedup.throughput_speedup if best else None
    if best is None or s is None:
        return Cell(DASH)
    if s < 1.0:
        return Cell(f"off (best K={best.k}: {fmt_x(s)})", "bad")
    return Cell(f"K={best.k}: {fmt_x(s)}")


def _best_k_table(si: SweepInput) -> Table:
    r = si.result
    rows = tuple(
        (Cell(f"{row.load:g}"), *(_best_k_cell(r, row.load, m) for m in r.mixes)) for row in r.rows
    )
    return Table(
        title=f"Best K per load, simulated ({si.source})",
        header=(r.rows[0].load_kind, *r.mixes),
        rows=rows,
        note="The K with the highest simulated throughput speedup; off where every K loses.",
    )


def verdict_section(inp: ReportInputs) -> list[Block]:
    blocks: list[Block] = []
    for pi in inp.of(PlanInput):
        blocks += _plan_verdict(pi)
    blocks += [_gate_verdict(gi) for gi in inp.of(GateInput)]
    blocks += [_bench_table(bi) for bi in inp.of(BenchInput)]
    if not inp.of(PlanInput) and not inp.of(GateInput):
        blocks.insert(
            0,
            Prose(
                "No rollout plan or gate decision among the inputs, so no verdict: the figures "
                "below are the evidence. `alphagate plan` turns them into a decision.",
                "note",
            ),
        )
        blocks += [_best_k_table(si) for si in inp.of(SweepInput)]
    return blocks
