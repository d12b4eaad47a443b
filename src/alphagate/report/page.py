"""The report page as data: sections in the order a reader decides, each a list of blocks.

1. the verdict and the config to paste; 2. speedup against concurrency (predicted, measured, the
1× break-even and the recommended K); 3. P99 and P50 ITL per token with and without speculation;
4. the ITL CDF; 5. α by position per class with 95% intervals; 6. the acceptance-length
histogram; 7. the gate; 8. the assumptions (deployment, cost terms, α sources); 9. the commands
that reproduce the page. Every section is always there: one without data says what would fill it.

Pure: :class:`~alphagate.report.inputs.ReportInputs` in, a :class:`Page` of text, tables and
:class:`~alphagate.report.charts.Chart` specifications out; :mod:`alphagate.report.html` draws it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from alphagate.bench.acceptance import bench_acceptance
from alphagate.bench.records import BenchResult
from alphagate.core.errors import ConfigError
from alphagate.core.fmt import DASH, num
from alphagate.gate.evaluate import GateResult
from alphagate.plan.records import Plan
from alphagate.report import charts, reproduce
from alphagate.report.bench_plots import goodput_chart
from alphagate.report.charts import Chart
from alphagate.report.inputs import (
    BenchInput,
    FieldsInput,
    GateInput,
    MeasureInput,
    ModelInput,
    PlanInput,
    ReportInputs,
    SweepInput,
)

__all__ = [
    "SECTIONS",
    "Block",
    "Bullets",
    "Cell",
    "Code",
    "Figure",
    "Heading",
    "Page",
    "Prose",
    "Section",
    "Table",
    "Verdict",
    "build_page",
]

#: (id, title) of every section, in order.
SECTIONS: tuple[tuple[str, str], ...] = (
    ("verdict", "Verdict and the config to paste"),
    ("speedup", "Speedup against concurrency"),
    ("itl", "P99 and P50 ITL per token, with and without speculation"),
    ("itl-cdf", "ITL per token: the whole distribution"),
    ("alpha", "α by position per class"),
    ("acceptance-length", "Acceptance length"),
    ("gate", "Gate"),
    ("assumptions", "Assumptions: deployment, cost terms, α sources"),
    ("reproduce", "Commands that reproduce this page"),
)

Tone = Literal["", "good", "bad", "warn"]


@dataclass(frozen=True)
class Cell:
    text: str
    tone: Tone = ""


@dataclass(frozen=True)
class Prose:
    text: str
    tone: Literal["", "note", "warn"] = ""


@dataclass(frozen=True)
class Heading:
    text: str


@dataclass(frozen=True)
class Bullets:
    items: tuple[str, ...]


@dataclass(frozen=True)
class Code:
    label: str
    text: str


@dataclass(frozen=True)
class Table:
    title: str
    header: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]
    note: str = ""


@dataclass(frozen=True)
class Figure:
    chart: Chart


@dataclass(frozen=True)
class Verdict:
    """One decision: a plan's verdict or a gate's."""

    source: str
    title: str
    verdict: str
    tone: Tone
    reason: str
    facts: tuple[tuple[str, str], ...] = ()
    bullets: tuple[str, ...] = ()


Block = Prose | Heading | Bullets | Code | Table | Figure | Verdict


@dataclass(frozen=True)
class Section:
    id: str
    title: str
    blocks: tuple[Block, ...]
    absent: str = ""


@dataclass(frozen=True)
class Page:
    title: str
    summary: tuple[str, ...]
    sections: tuple[Section, ...]
    missing: tuple[str, ...] = ()
    sources: tuple[str, ...] = field(default=())


# ---------------------------------------------------------------- formatting
def _x(v: float | None, digits: int = 2) -> Cell:
    """A ratio where > 1 means speculation helps; marked when it hurts."""
    if v is None:
        return Cell(DASH)
    return Cell(f"{v:.{digits}f}×", "bad" if v < 1.0 else "")


def _n(v: float | None, digits: int = 3) -> str:
    return num(v, f".{digits}f")


def _ci(low: float | None, high: float | None, digits: int = 3) -> str:
    return "" if low is None or high is None else f" [{low:.{digits}f}, {high:.{digits}f}]"


def _c(*texts: str) -> tuple[Cell, ...]:
    return tuple(Cell(t) for t in texts)


def _scalar(v: Any) -> str | None:
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, int | str):
        return str(v)
    if v is None:
        return DASH
    return None


def _fields_table(title: str, fields: dict[str, Any]) -> Table:
    """A record's scalar fields (and lists of scalars) as a two-column table."""
    rows = []
    for key, value in fields.items():
        text = _scalar(value)
        if text is None and isinstance(value, list) and all(_scalar(v) for v in value):
            text = ", ".join(str(_scalar(v)) for v in value)
        if text is not None:
            rows.append(_c(key, text))
    return Table(title=title, header=("field", "value"), rows=tuple(rows))


# ---------------------------------------------------------------- 1. verdict
_VERDICT_TONE: dict[str, Tone] = {"go": "good", "no-go": "bad", "pass": "good", "fail": "bad"}


def _plan_verdict(pi: PlanInput) -> list[Block]:
    p = pi.plan
    where = f"concurrency {p.concurrency}" + (
        f", peak {p.peak_concurrency}" if p.peak_concurrency != p.concurrency else ""
    )
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
            f"{p.headline_speedup:.2f}× with what is recommended; {p.fleet_speedup:.2f}× over all "
            "traffic (classes served without speculation at 1×)",
        )
    )
    if p.routed_away:
        facts.append(("Served without speculation", ", ".join(p.routed_away)))
    blocks: list[Block] = [
        Verdict(
            source=pi.source,
            title=f"Rollout plan — {where}",
            verdict=p.verdict,
            tone=_VERDICT_TONE.get(p.verdict, "warn"),
            reason=p.reason + ".",
            facts=tuple(facts),
            bullets=tuple(p.change_verdict),
        )
    ]
    return blocks + _paste(p)


def _paste(p: Plan) -> list[Block]:
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
    out: list[Block] = [
        Code(
            f"vLLM --speculative-config ({kind})",
            f"--speculative-config '{json.dumps(p.speculative_config)}'",
        )
    ]
    stage1 = next((s for s in p.stages if s.number == 1 and s.commands), None)
    if stage1 is not None:
        out.append(Code(f"Stage 1 — {stage1.title}", "\n".join(stage1.commands)))
    if p.dynamic_k_supported and p.speculative_config_static != p.speculative_config:
        out.append(
            Code(
                "On a vLLM build without the batch-size schedule (one K)",
                f"--speculative-config '{json.dumps(p.speculative_config_static)}'",
            )
        )
    return out


def _gate_verdict(gi: GateInput) -> Verdict:
    g = gi.result
    counts = {
        o: sum(1 for r in g.results if r.result == o) for o in ("pass", "fail", "insufficient")
    }
    return Verdict(
        source=gi.source,
        title="Gate decision",
        verdict=g.decision,
        tone=_VERDICT_TONE.get(g.decision, "warn"),
        reason=f"{counts['pass']} of {len(g.results)} rules pass, {counts['fail']} fail, "
        f"{counts['insufficient']} lack evidence (exit code {g.exit_code}).",
        facts=(("Evidence", ", ".join(g.sources)),),
        bullets=tuple(
            f"{r.rule.describe()}: {r.result} — {r.why}" for r in g.results if r.result != "pass"
        ),
    )


def _candidate_acceptance(b: BenchResult, level: str) -> tuple[str, str, str]:
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
    return _n(a.draft_acceptance_rate), _n(a.mean_acceptance_length), _n(a.alpha_iid)


def _bench_table(bi: BenchInput) -> Table:
    b = bi.result
    if b.comparisons:
        rows = []
        for c in b.comparisons:
            s = c.speedups
            rows.append(
                (
                    Cell(c.level),
                    _x(s.throughput_speedup),
                    _x(s.tpot_mean_speedup),
                    _x(s.itl_per_token_p50_speedup),
                    _x(s.itl_per_token_p99_speedup),
                    Cell(_n(s.candidate_tokens_per_chunk, 2)),
                    *_c(*_candidate_acceptance(b, c.level)),
                )
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
            rows=tuple(rows),
            note="How many times better the candidate is: throughput candidate ÷ baseline, "
            "latencies baseline ÷ candidate; below 1× the candidate is worse.",
        )
    rows = []
    for lv in b.levels:
        st = lv.overall
        a = lv.acceptance
        rows.append(
            _c(
                f"{lv.level} {lv.target}",
                f"{st.output_tokens_per_s:,.0f}",
                _n(st.tpot_ms.mean, 1),
                _n(st.itl_per_token_ms.p50, 1),
                _n(st.itl_per_token_ms.p99, 1),
                _n(a.draft_acceptance_rate if a else None),
                _n(a.mean_acceptance_length if a else None),
                _n(a.alpha_iid if a else None),
            )
        )
    return Table(
        title=f"Measured — bench run {b.run_id} ({bi.source})",
        header=("level", "tokens/s", "TPOT ms", "ITL/token P50 ms", "P99 ms", "ρ", "τ", "α"),
        rows=tuple(rows),
    )


def _best_k_table(si: SweepInput) -> Table:
    r = si.result
    rows = []
    for row in r.rows:
        cells = [Cell(f"{row.load:g}")]
        for m in r.mixes:
            best = max(
                (c for c in r.cells if c.load == row.load and c.mix == m),
                key=lambda c: c.speedup.throughput_speedup or 0.0,
                default=None,
            )
            s = best.speedup.throughput_speedup if best else None
            if best is None or s is None:
                cells.append(Cell(DASH))
            elif s < 1.0:
                cells.append(Cell(f"off (best K={best.k}: {s:.2f}×)", "bad"))
            else:
                cells.append(Cell(f"K={best.k}: {s:.2f}×"))
        rows.append(tuple(cells))
    return Table(
        title=f"Best K per load, simulated ({si.source})",
        header=(r.rows[0].load_kind, *r.mixes),
        rows=tuple(rows),
        note="The K with the highest simulated throughput speedup; off where every K loses.",
    )


def _verdict_section(inp: ReportInputs) -> list[Block]:
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


# ---------------------------------------------------------------- 2–6. figures
def _figures(
    inp: ReportInputs,
    kind: type[Any],
    make: Callable[[Any], Chart | None],
) -> list[Block]:
    out: list[Block] = []
    for item in inp.of(kind):
        chart = make(item)
        if chart is not None:
            out.append(Figure(chart))
    return out


def _closed_forms(inp: ReportInputs) -> list[Block]:
    out: list[Block] = []
    for mi in inp.of(ModelInput):
        if mi.verb == "model table":
            out.append(Figure(charts.table_speedup_chart(mi.answer)))
        else:
            out.append(
                _fields_table(f"{mi.verb} — closed form ({mi.source})", mi.answer.model_dump())
            )
    return out


def _plans(inp: ReportInputs) -> list[Plan]:
    return [pi.plan for pi in inp.of(PlanInput)]


def _benches(inp: ReportInputs) -> list[BenchResult]:
    return [bi.result for bi in inp.of(BenchInput)]


def _speedup_section(inp: ReportInputs) -> list[Block]:
    plans = _plans(inp)
    return [
        *(
            Figure(charts.plan_speedup_chart(group, _benches(inp)))
            for group in charts.same_policy(plans)
        ),
        *_figures(inp, BenchInput, lambda bi: charts.bench_speedup_chart(bi.result, plans)),
        *_figures(inp, BenchInput, lambda bi: goodput_chart(bi.result)),
        *_figures(inp, SweepInput, lambda si: charts.sweep_speedup_chart(si.result)),
        *_closed_forms(inp),
    ]


def _itl_section(inp: ReportInputs) -> list[Block]:
    plans = _plans(inp)
    return [
        *(Figure(charts.plan_itl_chart(group)) for group in charts.same_itl(plans)),
        *_figures(inp, BenchInput, lambda bi: charts.bench_itl_chart(bi.result, plans)),
        *_figures(inp, SweepInput, lambda si: charts.sweep_itl_chart(si.result)),
    ]


def _no_records(inp: ReportInputs, what: str) -> list[Block]:
    return [
        Prose(f"{bi.source}: its requests.jsonl was not read, so {what} is missing.", "warn")
        for bi in inp.of(BenchInput)
        if bi.records is None
    ]


def _cdf_section(inp: ReportInputs) -> list[Block]:
    return [
        *_figures(
            inp,
            BenchInput,
            lambda bi: (
                charts.bench_itl_cdf_chart(bi.result, bi.records, _plans(inp))
                if bi.records
                else None
            ),
        ),
        *_no_records(inp, "the measured ITL distribution"),
        *_figures(inp, SweepInput, lambda si: charts.sweep_itl_cdf_chart(si.result)),
    ]


def _measured_alpha(inp: ReportInputs, plans: tuple[Plan, ...]) -> list[charts.MeasuredAlpha]:
    """The α by position each measurement among the inputs gives, per class and for all
    traffic, to draw beside the plans' (a bench's per class from its replies' per-request counts,
    else its counters: :func:`~alphagate.bench.acceptance.bench_acceptance`)."""
    deps = ", ".join(dict.fromkeys(charts.plan_deployment_name(p) for p in plans))
    out = []
    for bi in inp.of(BenchInput):
        try:
            got = bench_acceptance(bi.result, bi.source)
        except ConfigError:
            continue  # counts that contradict the counters: the gate section says so
        where = charts.elsewhere(bi.result, plans)
        what = f"bench run {bi.result.run_id}"
        if got.overall is not None:
            out.append(charts.MeasuredAlpha(None, what, got.overall, where))
        for name, est in got.classes.items():
            out.append(charts.MeasuredAlpha(name, what, est, where))
    for mi in inp.of(MeasureInput):
        m = mi.result
        where = (
            f"Measured from {m.source} (model not recorded), not known to be the plan's "
            f"deployment ({deps})"
        )
        for name, est in m.classes.items():
            out.append(charts.MeasuredAlpha(name, m.verb, est, where))
        if m.overall is not None:
            out.append(charts.MeasuredAlpha(None, m.verb, m.overall, where))
    return out


def _plan_alpha(inp: ReportInputs) -> list[Block]:
    out: list[Block] = []
    for group in charts.same_classes(_plans(inp)):
        chart = charts.plan_alpha_chart(group, _measured_alpha(inp, group))
        if chart is not None:
            out.append(Figure(chart))
    return out


def _alpha_section(inp: ReportInputs) -> list[Block]:
    return [
        *_figures(inp, MeasureInput, lambda mi: charts.measure_alpha_chart(mi.result)),
        *_figures(inp, BenchInput, lambda bi: charts.bench_alpha_chart(bi.result, bi.records)),
        *_no_records(inp, "α per class from the streamed chunks"),
        *_plan_alpha(inp),
        *_figures(inp, SweepInput, lambda si: charts.sweep_alpha_chart(si.result)),
    ]


def _length_section(inp: ReportInputs) -> list[Block]:
    return [
        *_figures(inp, MeasureInput, lambda mi: charts.measure_acceptance_length_chart(mi.result)),
        *_figures(
            inp, BenchInput, lambda bi: charts.bench_acceptance_length_chart(bi.result, bi.records)
        ),
        *_figures(inp, PlanInput, lambda pi: charts.plan_acceptance_length_chart(pi.plan)),
        *_figures(inp, SweepInput, lambda si: charts.sweep_acceptance_length_chart(si.result)),
    ]


# ---------------------------------------------------------------- 7. gate
def _gate_result_table(gi: GateInput) -> Table:
    g: GateResult = gi.result
    tone: dict[str, Tone] = {"pass": "good", "fail": "bad", "insufficient": "warn"}
    rows = tuple(
        (
            Cell(r.rule.describe()),
            Cell(_n(r.value) + (_ci(r.interval.low, r.interval.high) if r.interval else "")),
            Cell(f"{r.sample:,.0f} {r.sample_unit}"),
            Cell(r.result, tone[r.result]),
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


def _plan_gate_table(pi: PlanInput, benches: list[BenchInput]) -> list[Block]:
    p = pi.plan
    if p.gate is None:
        return [Prose(f"{pi.source}: a {p.verdict} plan has no gate — nothing to ship.", "note")]
    g = p.gate
    at = f"concurrency {g.concurrency}, K={g.k}"
    rows = (
        _c(
            "ρ draft acceptance rate",
            f"≥ {g.draft_acceptance_rate_min:.3f}",
            at,
            "what vLLM reports",
        ),
        _c(
            "α conditional (i.i.d.)",
            f"≥ {g.alpha_min:.3f}",
            at,
            f"break-even {g.alpha_breakeven:.3f} + margin",
        ),
        _c(
            "τ mean acceptance length",
            f"≥ {g.mean_acceptance_length_min:.3f}",
            at,
            "incl. bonus token",
        ),
        _c(
            "TPOT speedup",
            f"≥ {g.min_tpot_speedup:.2f}×",
            f"concurrency {p.concurrency}",
            "baseline ÷ candidate",
        ),
        _c(
            "P99 ITL per token speedup",
            f"≥ {g.min_itl_per_token_p99_speedup:.3f}×",
            f"concurrency {p.concurrency}",
            f"baseline ÷ candidate: a P99 up to {g.p99_budget:g}× the baseline's "
            f"({g.p99_budget_source})",
        ),
        _c(
            "the fixed rule, for comparison",
            f"α ≥ {g.fixed_rule_alpha:.2f}",
            f"K={g.k}",
            f"ρ ≥ {g.fixed_rule_draft_acceptance_rate:.3f}",
        ),
    )
    out: list[Block] = [
        Table(
            title=f"Gate thresholds of the plan ({pi.source})",
            header=("quantity", "threshold", "where", "note"),
            rows=rows,
            note=f"The gate uses the {g.quantity_gated}.",
        )
    ]
    at_target = [
        b for b in benches if any(lv.concurrency == p.concurrency for lv in b.result.levels)
    ]
    if at_target:
        out.append(
            Code(
                "Judge a measurement against these thresholds",
                f"alphagate gate --plan {pi.source} --bench {at_target[0].source}",
            )
        )
    elif benches:
        levels = ", ".join(dict.fromkeys(lv.level for b in benches for lv in b.result.levels))
        out.append(
            Prose(
                f"No measurement here can be judged against these thresholds: the bench ran at "
                f"{levels}, the plan's A/B rules are at concurrency {p.concurrency} (on the "
                "plan's own deployment). Stage 2 of the plan prints the A/B that can.",
                "note",
            )
        )
    return out


def _gate_section(inp: ReportInputs) -> list[Block]:
    out: list[Block] = [_gate_result_table(gi) for gi in inp.of(GateInput)]
    for pi in inp.of(PlanInput):
        out += _plan_gate_table(pi, inp.of(BenchInput))
    return out


# ---------------------------------------------------------------- 8. assumptions
def _deployments(inp: ReportInputs) -> list[Block]:
    rows = [_c(pi.source, "predicted (plan)", pi.plan.deployment) for pi in inp.of(PlanInput)]
    rows += [
        _c(si.source, "predicted (simulate)", si.result.deployment) for si in inp.of(SweepInput)
    ]
    for bi in inp.of(BenchInput):
        urls = ", ".join(
            f"{lv.target} {lv.url}"
            for lv in bi.result.levels
            if lv.level == bi.result.levels[0].level
        )
        rows.append(_c(bi.source, "measured (bench)", f"endpoints: {urls}"))
    for mi in inp.of(MeasureInput):
        rows.append(_c(mi.source, f"measured ({mi.result.verb})", mi.result.source))
    if not rows:
        return []
    return [Table("Deployments", ("file", "kind", "deployment"), tuple(rows))]


def _cost_terms(inp: ReportInputs) -> list[Block]:
    out: list[Block] = []
    for si in inp.of(SweepInput):
        r = si.result
        rows = tuple(
            _c(
                f"{row.load:g}",
                f"{row.baseline.mean_batch:.1f}",
                f"{row.draft_cost_ratio:.3f}",
                *(f"{kr.verify_cost_ratio:.2f}" for kr in row.by_k),
            )
            for row in r.rows
        )
        out.append(
            Table(
                f"Emergent cost terms of the step-time model ({si.source})",
                (r.rows[0].load_kind, "mean batch", "draft c", *(f"verify v, K={k}" for k in r.ks)),
                rows,
                note="c = one draft pass ÷ one decode step; v = one verify pass of K+1 tokens ÷ "
                "one decode step, at the steady batch (roofline model, not measured).",
            )
        )
    for mi in inp.of(ModelInput):
        d = mi.answer.model_dump()
        if "draft_cost" in d:
            v = d.get("verify_cost", d.get("verify_costs"))
            out.append(
                Prose(
                    f"{mi.source} ({mi.verb}): draft cost c = {d['draft_cost']:g}, verify cost v = {v}."
                )
            )
    for fi in inp.of(FieldsInput):
        out.append(_fields_table(f"{fi.verb} ({fi.source})", fi.fields))
    return out


def _alpha_sources(inp: ReportInputs) -> list[Block]:
    rows = []
    for pi in inp.of(PlanInput):
        for c in pi.plan.classes:
            rows.append(
                _c(pi.source, c.name, f"{c.share:.2f}", c.alpha_label, c.alpha_source, c.source)
            )
    for si in inp.of(SweepInput):
        r = si.result
        for m, a in zip(r.mixes, r.mix_alphas or [None] * len(r.mixes), strict=True):
            rows.append(
                _c(
                    si.source,
                    m,
                    "1.00" if a is not None else "mix",
                    f"{a:g}" if a is not None else m,
                    "given",
                    "the sweep's acceptance axis",
                )
            )
    for bi in inp.of(BenchInput):
        for lv in bi.result.levels:
            a = lv.acceptance
            if a is not None and a.num_drafts > 0:
                rows.append(
                    _c(
                        bi.source,
                        f"{lv.level} all traffic",
                        "1.00",
                        _n(a.alpha_iid)
                        + _ci(
                            a.alpha_iid_ci.low if a.alpha_iid_ci else None,
                            a.alpha_iid_ci.high if a.alpha_iid_ci else None,
                        ),
                        "measured",
                        f"/metrics deltas over {a.num_drafts:,.0f} drafts, K={a.k}; α is the i.i.d. α that gives ρ",
                    )
                )
    for mi in inp.of(MeasureInput):
        for name, e in [
            *mi.result.classes.items(),
            *([("all traffic", mi.result.overall)] if mi.result.overall else []),
        ]:
            rows.append(
                _c(
                    mi.source,
                    name,
                    "",
                    _n(e.alpha_iid),
                    "measured",
                    f"{mi.result.verb}: {e.num_drafts:,.0f} drafts",
                )
            )
    if not rows:
        return []
    return [Table("α sources", ("file", "class", "share", "α", "from", "source"), tuple(rows))]


def _bench_configs(inp: ReportInputs) -> list[Block]:
    out: list[Block] = []
    for bi in inp.of(BenchInput):
        b = bi.result
        fields = {
            k: v
            for k, v in b.config.items()
            if k not in ("targets", "levels", "headers", "api_key") and v not in (None, {}, [])
        }
        fields["levels"] = ", ".join(lv.level for lv in b.levels if lv.target == b.levels[0].target)
        fields["records"] = (
            f"{len(bi.records)} requests ({bi.records_source})"
            if bi.records is not None
            else "not read"
        )
        if b.interrupted or b.stop_reason:
            fields["stopped"] = b.stop_reason or "interrupted"
        out.append(_fields_table(f"Bench configuration ({bi.source})", fields))
        if b.dataset_problems:
            out.append(Bullets(tuple(b.dataset_problems)))
    return out


NOTES = (
    "α = conditional per-token acceptance probability (Leviathan et al. 2023); ρ = accepted ÷ "
    "drafted tokens (vLLM's draft acceptance rate); τ = tokens per target pass including the "
    "bonus token (vLLM, EAGLE). Every number on this page says which one it is.",
    "Predicted figures are the simulator's model time on a roofline step-time model with paired "
    "runs (same requests, arrivals and lengths with and without speculation); measured figures "
    "are wall-clock times on the bench host.",
    "ITL per token = the gap before a streamed chunk ÷ the tokens in it, one sample per token; "
    "TPOT = (E2E − TTFT) ÷ (output tokens − 1).",
)


def _assumptions_section(inp: ReportInputs) -> list[Block]:
    return [
        *_deployments(inp),
        *_cost_terms(inp),
        *_alpha_sources(inp),
        *_bench_configs(inp),
        Heading("Definitions"),
        Bullets(NOTES),
    ]


# ---------------------------------------------------------------- 9. reproduce
def _commands(inp: ReportInputs) -> list[reproduce.Command]:
    out = []
    for item in inp.inputs:
        if isinstance(item, PlanInput):
            out.append(reproduce.plan_command(item.plan, item.source))
        elif isinstance(item, SweepInput):
            out.append(reproduce.sweep_command(item.result, item.source))
        elif isinstance(item, BenchInput):
            out.append(reproduce.bench_command(item.result, item.source))
        elif isinstance(item, ModelInput):
            out.append(reproduce.model_command(item.verb, item.answer.model_dump(), item.source))
    return out


def _reproduce_section(inp: ReportInputs) -> list[Block]:
    out: list[Block] = []
    if inp.produced_by:
        out.append(Code("Produce the inputs", "\n".join(inp.produced_by)))
    else:
        cmds = _commands(inp)
        if cmds:
            out.append(
                Code("Produce the inputs (rebuilt from the files)", "\n".join(c.text for c in cmds))
            )
            gaps = [
                f"{c.text.split(' ')[1]}: {', '.join(c.unrecorded)}" for c in cmds if c.unrecorded
            ]
            if gaps:
                out.append(
                    Prose("Not recorded in the files, so left at their defaults above:", "note")
                )
                out.append(Bullets(tuple(gaps)))
        other = [
            i.source for i in inp.inputs if isinstance(i, MeasureInput | GateInput | FieldsInput)
        ]
        if other:
            out.append(
                Prose(
                    "Re-run the measure, gate or calibrate command that wrote "
                    + ", ".join(other)
                    + ".",
                    "note",
                )
            )
    if inp.command:
        out.append(Code("Render this page", inp.command))
    rows = tuple(_c(i.source, _verb(i)) for i in inp.inputs)
    out.append(Table("Inputs", ("file", "results"), rows))
    return out


def _verb(i: Any) -> str:
    if isinstance(i, PlanInput):
        return f"plan ({i.plan.verdict})"
    if isinstance(i, SweepInput):
        return f"simulate ({len(i.result.rows)} loads × {len(i.result.ks)} K × {len(i.result.mixes)} acceptance settings)"
    if isinstance(i, BenchInput):
        recs = (
            "no records" if i.records is None else f"{len(i.records)} records in {i.records_source}"
        )
        return f"bench run {i.result.run_id} ({recs})"
    if isinstance(i, MeasureInput | GateInput):
        return i.result.verb
    return str(i.verb)


# ---------------------------------------------------------------- the page
_ABSENT = {
    "verdict": "Nothing to decide from: add a plan (alphagate plan --json) or a gate decision.",
    "speedup": "No speedup figures: add a plan, a simulate sweep, a bench A/B or a model answer.",
    "itl": "No latency figures: add a plan, a simulate sweep or a bench run.",
    "itl-cdf": "No latency distribution: add a simulate sweep, or a bench run with its requests.jsonl.",
    "alpha": "No acceptance figures: add a plan, a sweep, a bench run against a speculative server, or a measurement.",
    "acceptance-length": "No acceptance figures: add a plan, a sweep, a bench run against a speculative server, or a measurement.",
    "gate": "No gate: add a plan (its thresholds) or a gate decision (alphagate gate --json).",
    "assumptions": "",
    "reproduce": "",
}

_BUILDERS: dict[str, Callable[[ReportInputs], list[Block]]] = {
    "verdict": _verdict_section,
    "speedup": _speedup_section,
    "itl": _itl_section,
    "itl-cdf": _cdf_section,
    "alpha": _alpha_section,
    "acceptance-length": _length_section,
    "gate": _gate_section,
    "assumptions": _assumptions_section,
    "reproduce": _reproduce_section,
}


def _summary(inp: ReportInputs) -> tuple[str, ...]:
    out = []
    for pi in inp.of(PlanInput):
        out.append(f"plan at concurrency {pi.plan.concurrency}: {pi.plan.verdict.upper()}")
    for gi in inp.of(GateInput):
        out.append(f"gate: {gi.result.decision.upper()}")
    for bi in inp.of(BenchInput):
        out.append(f"bench run {bi.result.run_id}")
    for si in inp.of(SweepInput):
        out.append(
            f"simulated: {si.result.deployment_detail.model} on {si.result.deployment_detail.gpu}"
        )
    return tuple(out)


def build_page(inp: ReportInputs) -> Page:
    """Every section, in order, from whatever the inputs hold."""
    sections = tuple(
        Section(id=sid, title=title, blocks=tuple(_BUILDERS[sid](inp)), absent=_ABSENT[sid])
        for sid, title in SECTIONS
    )
    return Page(
        title="Speculative decoding: should it ship?",
        summary=_summary(inp),
        sections=sections,
        missing=tuple(inp.missing),
        sources=tuple(i.source for i in inp.inputs),
    )
