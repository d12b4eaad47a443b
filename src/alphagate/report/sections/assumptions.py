"""Section 8 of the report, the assumptions: the deployment behind each input, the cost terms of
the step-time model (and of the closed forms), where each class's α comes from, each bench's
configuration, and the definitions of α, ρ, τ and the latency figures.
"""

from __future__ import annotations

from alphagate.report._fmt import fmt_alpha, with_ci
from alphagate.report.blocks import Block, Bullets, Cell, Heading, Prose, Table, cells, fields_table
from alphagate.report.inputs import (
    BenchInput,
    FieldsInput,
    MeasureInput,
    ModelInput,
    PlanInput,
    ReportInputs,
    SweepInput,
)

__all__ = ["NOTES", "assumptions_section"]

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

Row = tuple[Cell, ...]


def _deployments(inp: ReportInputs) -> list[Block]:
    rows = [cells(pi.source, "predicted (plan)", pi.plan.deployment) for pi in inp.of(PlanInput)]
    rows += [
        cells(si.source, "predicted (simulate)", si.result.deployment) for si in inp.of(SweepInput)
    ]
    for bi in inp.of(BenchInput):
        first = bi.result.levels[0].level
        urls = ", ".join(f"{lv.target} {lv.url}" for lv in bi.result.levels if lv.level == first)
        rows.append(cells(bi.source, "measured (bench)", f"endpoints: {urls}"))
    for mi in inp.of(MeasureInput):
        rows.append(cells(mi.source, f"measured ({mi.result.verb})", mi.result.source))
    if not rows:
        return []
    return [Table("Deployments", ("file", "kind", "deployment"), tuple(rows))]


def _sweep_costs(si: SweepInput) -> Table:
    r = si.result
    rows = tuple(
        cells(
            f"{row.load:g}",
            f"{row.baseline.mean_batch:.1f}",
            f"{row.draft_cost_ratio:.3f}",
            *(f"{kr.verify_cost_ratio:.2f}" for kr in row.by_k),
        )
        for row in r.rows
    )
    return Table(
        f"Emergent cost terms of the step-time model ({si.source})",
        (r.rows[0].load_kind, "mean batch", "draft c", *(f"verify v, K={k}" for k in r.ks)),
        rows,
        note="c = one draft pass ÷ one decode step; v = one verify pass of K+1 tokens ÷ "
        "one decode step, at the steady batch (roofline model, not measured).",
    )


def _model_costs(mi: ModelInput) -> list[Block]:
    d = mi.answer.model_dump()
    if "draft_cost" not in d:
        return []
    v = d.get("verify_cost", d.get("verify_costs"))
    return [
        Prose(f"{mi.source} ({mi.verb}): draft cost c = {d['draft_cost']:g}, verify cost v = {v}.")
    ]


def _cost_terms(inp: ReportInputs) -> list[Block]:
    return [
        *(_sweep_costs(si) for si in inp.of(SweepInput)),
        *(b for mi in inp.of(ModelInput) for b in _model_costs(mi)),
        *(fields_table(f"{fi.verb} ({fi.source})", fi.fields) for fi in inp.of(FieldsInput)),
    ]


# ---------------------------------------------------------------- α sources
def _plan_alpha_rows(pi: PlanInput) -> list[Row]:
    return [
        cells(pi.source, c.name, f"{c.share:.2f}", c.alpha_label, c.alpha_source, c.source)
        for c in pi.plan.classes
    ]


def _sweep_alpha_rows(si: SweepInput) -> list[Row]:
    """The sweep's acceptance axis: one α per setting, or a traffic mix."""
    r = si.result
    return [
        cells(
            si.source,
            m,
            "1.00" if a is not None else "mix",
            f"{a:g}" if a is not None else m,
            "given",
            "the sweep's acceptance axis",
        )
        for m, a in zip(r.mixes, r.mix_alphas, strict=True)
    ]


def _bench_alpha_rows(bi: BenchInput) -> list[Row]:
    return [
        cells(
            bi.source,
            f"{lv.level} all traffic",
            "1.00",
            with_ci(fmt_alpha(a.alpha_iid), a.alpha_iid_ci),
            "measured",
            f"/metrics deltas over {a.num_drafts:,.0f} drafts, K={a.k}; α is the i.i.d. α that "
            "gives ρ",
        )
        for lv in bi.result.levels
        if (a := lv.acceptance) is not None and a.num_drafts > 0
    ]


def _measure_alpha_rows(mi: MeasureInput) -> list[Row]:
    m = mi.result
    ests = [*m.classes.items(), *([("all traffic", m.overall)] if m.overall else [])]
    return [
        cells(
            mi.source,
            name,
            "",
            fmt_alpha(e.alpha_iid),
            "measured",
            f"{m.verb}: {e.num_drafts:,.0f} drafts",
        )
        for name, e in ests
    ]


def _alpha_sources(inp: ReportInputs) -> list[Block]:
    rows = [
        *(r for pi in inp.of(PlanInput) for r in _plan_alpha_rows(pi)),
        *(r for si in inp.of(SweepInput) for r in _sweep_alpha_rows(si)),
        *(r for bi in inp.of(BenchInput) for r in _bench_alpha_rows(bi)),
        *(r for mi in inp.of(MeasureInput) for r in _measure_alpha_rows(mi)),
    ]
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
        out.append(fields_table(f"Bench configuration ({bi.source})", fields))
        if b.dataset_problems:
            out.append(Bullets(tuple(b.dataset_problems)))
    return out


def assumptions_section(inp: ReportInputs) -> list[Block]:
    return [
        *_deployments(inp),
        *_cost_terms(inp),
        *_alpha_sources(inp),
        *_bench_configs(inp),
        Heading("Definitions"),
        Bullets(NOTES),
    ]
