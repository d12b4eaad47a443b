"""Section 7 of the report, the gate: each gate decision rule by rule with its value and 95%
interval, and each plan's thresholds with the command that judges a measurement against them (or
why no measurement among the inputs can be judged).
"""

from __future__ import annotations

from alphagate.plan.records import Gate, Plan
from alphagate.report._fmt import fmt_alpha, fmt_x, with_ci
from alphagate.report.blocks import Block, Cell, Code, Prose, Table, Tone, cells
from alphagate.report.inputs import BenchInput, GateInput, PlanInput, ReportInputs

__all__ = ["gate_section"]

_RESULT_TONE: dict[str, Tone] = {"pass": "good", "fail": "bad", "insufficient": "warn"}


def _gate_result_table(gi: GateInput) -> Table:
    g = gi.result
    rows = tuple(
        (
            Cell(r.rule.describe()),
            Cell(with_ci(fmt_alpha(r.value), r.interval)),
            Cell(f"{r.sample:,.0f} {r.sample_unit}"),
            Cell(r.result, _RESULT_TONE[r.result]),
            Cell(r.why),
            Cell(r.evidence),
        )
        for r in g.results
    )
    return Table(
        title=f"Gate decision: {g.decision} ({gi.source})",
        header=("rule", "value [95% interval]", "sample", "result", "why", "evidence"),
        rows=rows,
        note="A ≥ rule passes when the whole 95% interval clears the threshold; an interval that "
        "straddles it, or too small a sample, is insufficient — never a pass.",
    )


def _threshold_rows(p: Plan, g: Gate) -> tuple[tuple[Cell, ...], ...]:
    """(quantity, threshold, where, note) for every rule of the plan's gate, and the fixed rule."""
    at = f"concurrency {g.concurrency}, K={g.k}"
    ab = f"concurrency {p.concurrency}"
    return (
        cells(
            "ρ draft acceptance rate",
            f"≥ {g.draft_acceptance_rate_min:.3f}",
            at,
            "what vLLM reports",
        ),
        cells(
            "α conditional (i.i.d.)",
            f"≥ {g.alpha_min:.3f}",
            at,
            f"break-even {g.alpha_breakeven:.3f} + margin",
        ),
        cells(
            "τ mean acceptance length",
            f"≥ {g.mean_acceptance_length_min:.3f}",
            at,
            "incl. bonus token",
        ),
        cells("TPOT speedup", f"≥ {fmt_x(g.min_tpot_speedup)}", ab, "baseline ÷ candidate"),
        cells(
            "P99 ITL per token speedup",
            f"≥ {fmt_x(g.min_itl_per_token_p99_speedup, 3)}",
            ab,
            f"baseline ÷ candidate: a P99 up to {g.p99_budget:g}× the baseline's "
            f"({g.p99_budget_source})",
        ),
        cells(
            "the fixed rule, for comparison",
            f"α ≥ {g.fixed_rule_alpha:.2f}",
            f"K={g.k}",
            f"ρ ≥ {g.fixed_rule_draft_acceptance_rate:.3f}",
        ),
    )


def _judge(pi: PlanInput, benches: list[BenchInput]) -> list[Block]:
    """The gate command for a bench at the plan's concurrency, or why none can be judged."""
    p = pi.plan
    at_target = [
        b for b in benches if any(lv.concurrency == p.concurrency for lv in b.result.levels)
    ]
    if at_target:
        return [
            Code(
                "Judge a measurement against these thresholds",
                f"alphagate gate --plan {pi.source} --bench {at_target[0].source}",
            )
        ]
    if not benches:
        return []
    levels = ", ".join(dict.fromkeys(lv.level for b in benches for lv in b.result.levels))
    return [
        Prose(
            f"No measurement here can be judged against these thresholds: the bench ran at "
            f"{levels}, the plan's A/B rules are at concurrency {p.concurrency} (on the "
            "plan's own deployment). Stage 2 of the plan prints the A/B that can.",
            "note",
        )
    ]


def _plan_gate_table(pi: PlanInput, benches: list[BenchInput]) -> list[Block]:
    p = pi.plan
    if p.gate is None:
        return [Prose(f"{pi.source}: a {p.verdict} plan has no gate — nothing to ship.", "note")]
    table = Table(
        title=f"Gate thresholds of the plan ({pi.source})",
        header=("quantity", "threshold", "where", "note"),
        rows=_threshold_rows(p, p.gate),
        note=f"The gate uses the {p.gate.quantity_gated}.",
    )
    return [table, *_judge(pi, benches)]


def gate_section(inp: ReportInputs) -> list[Block]:
    out: list[Block] = [_gate_result_table(gi) for gi in inp.of(GateInput)]
    for pi in inp.of(PlanInput):
        out += _plan_gate_table(pi, inp.of(BenchInput))
    return out
