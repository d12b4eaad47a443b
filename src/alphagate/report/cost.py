"""Rich tables for ``alphagate simulate --explain-cost`` and ``alphagate calibrate``."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from alphagate.core.fmt import DASH
from alphagate.report._fmt import fmt_pct, fmt_span, fmt_x
from alphagate.report._tables import add_columns, new_table
from alphagate.sim.explain import CostExplanation
from alphagate.specs.calibration import CalibrationProfile

__all__ = ["const_text", "render_calibration", "render_explanation"]

#: Column-friendly names of the step-time model's terms (``alphagate.sim.cost.TERMS``).
SHORT = {
    "target_gemm": "GEMMs",
    "target_attention": "attention",
    "target_sampler": "sampler",
    "target_allreduce": "all-reduce",
    "target_kernels": "kernels",
    "draft_gemm": "dr. GEMMs",
    "draft_attention": "dr. attn",
    "draft_sampler": "dr. sample",
    "draft_allreduce": "dr. all-red",
    "draft_kernels": "dr. kernels",
    "host_step": "host/step",
    "host_seq": "host/seq",
    "host_token": "host/token",
    "host_spec": "host/spec",
    "host_spec_seq": "host/sp.seq",
    "host_draft": "host/draft",
    "host_draft_seq": "host/dr.seq",
    "host_sync": "host/sync",
}


def const_text(name: str, x: float) -> str:
    """A step-time constant in its natural unit: seconds as ms or µs, factors as they are."""
    if not name.endswith("_s"):
        return f"{x:.3g}"
    return f"{x * 1e3:.3g} ms" if x >= 1e-4 or x == 0 else f"{x * 1e6:.3g} µs"


def _totals_table(e: CostExplanation, kd: int) -> Table:
    """v(B, K) for every K and c(B, K) at ``kd``, per batch size."""
    kj = e.ks.index(kd)
    totals = add_columns(
        new_table(
            f"Step-time model, mean context {e.mean_context:.0f} tokens: one speculative step "
            "costs K·c + v decode steps"
        ),
        "B",
        "decode ms",
        *(f"v K={k}" for k in e.ks),
        f"c K={kd}",
        left=0,
    )
    for i, b in enumerate(e.batches):
        totals.add_row(
            str(b),
            f"{e.decode_ms[i]:.2f}",
            *(f"{v:.3f}" for v in e.verify_cost[i]),
            f"{e.draft_cost[i][kj]:.3f}",
        )
    return totals


def _term_parts(e: CostExplanation, kd: int) -> list[RenderableType]:
    """How each term that matters moves v or c at ``kd``, what it models, and the ones left out."""
    kj = e.ks.index(kd)
    terms = add_columns(
        new_table(f"How each term moves v (target, host) and c (drafter) at K={kd}"),
        "term",
        "",
        *(f"B={b}" for b in e.batches),
        left=2,
    )
    shown = [t for t in e.terms if any(abs(row[kj]) >= 5e-4 for row in t.by_batch)]
    for t in shown:
        terms.add_row(SHORT[t.term], t.moves, *(f"{row[kj]:+.3f}" for row in t.by_batch))
    sources = add_columns(
        new_table("What each term models, and its source"), "term", "model", left=2
    )
    for t in shown:
        sources.add_row(SHORT[t.term], f"{t.mechanism} ({t.source})")
    hidden = [t.term for t in e.terms if t not in shown]
    note = (
        f"Below 0.0005 everywhere here: {', '.join(SHORT[t] for t in hidden)}. " if hidden else ""
    ) + "v = 1 + Σ of the v rows; c = Σ of the c rows (--json: every term at every K)."
    return [terms, sources, Text(note)]


def _engine_parts(e: CostExplanation) -> list[RenderableType]:
    """The engine settings that move a speculative step, per K, and what each does."""
    if not e.engine:
        return []
    facts = add_columns(
        new_table("Engine settings that move a speculative step (K = 0: no speculation)"),
        "setting",
        *(f"K={k}" for k in [0, *e.ks]),
        left=1,
    )
    for f in e.engine:
        facts.add_row(f.name, *(f"{x:,}" for x in f.by_k))
    return [facts, Text("\n".join(f"{f.name}: {f.effect} ({f.source})." for f in e.engine))]


def _ranges_parts(e: CostExplanation) -> list[RenderableType]:
    """The uncertain constants with their ranges (prior or calibrated)."""
    if not e.ranges:
        return []
    title = (
        "The uncertain constants and their prior ranges (plan and simulate intervals span them)"
        if e.ranges_origin == "prior"
        else "The calibrated constants ± 2 standard errors (plan and simulate intervals span them)"
    )
    ranges = add_columns(new_table(title), "constant", "value", "range", "source", left=4)
    for r in e.ranges:
        low, high = const_text(r.coefficient, r.low), const_text(r.coefficient, r.high)
        ranges.add_row(
            r.coefficient,
            const_text(r.coefficient, r.value),
            fmt_span(low, high, spaced=True),
            r.source,
        )
    return [ranges]


def render_explanation(e: CostExplanation, k_detail: int | None = None) -> RenderableType:
    """v(B, K) and c(B, K) per batch, then every term's contribution at one K."""
    kd = k_detail if k_detail in e.ks else e.ks[len(e.ks) // 2]
    return Group(
        Text(e.deployment),
        _totals_table(e, kd),
        *_term_parts(e, kd),
        *_engine_parts(e),
        *_ranges_parts(e),
    )


def _coefficients_table(p: CalibrationProfile) -> Table:
    coef = add_columns(
        new_table("Coefficients (step = Σ coefficient × term; see alphagate.sim.cost)"),
        "coefficient",
        "fitted",
        "±1 s.e.",
        "prior",
        "set by",
        left=1,
    )
    for c in p.coefficients:
        coef.add_row(
            c.name,
            _fmt(c.name, c.value),
            f"±{fmt_pct(c.standard_error / c.value)}" if c.value > 0 else DASH,
            _fmt(c.name, c.prior),
            c.determined_by,
        )
    return coef


def _points_table(p: CalibrationProfile) -> Table:
    pts = add_columns(
        new_table("Points: measured vs the fitted model (step = mean decode step)"),
        "level",
        "metric",
        "C",
        "K",
        "measured ms",
        "fitted ms",
        "residual",
        left=2,
    )
    for pt in p.points:
        pts.add_row(
            pt.label,
            "TTFT" if pt.metric == "ttft" else "step",
            str(pt.concurrency),
            str(pt.k),
            f"{pt.observed_ms:.3f}",
            f"{pt.fitted_ms:.3f}",
            f"{pt.residual_pct:+.1f}%",
        )
    return pts


def _validity(p: CalibrationProfile) -> Text:
    """The deployment, where the profile is valid, and how well it fits."""
    lo, hi = p.valid_concurrency
    klo, khi = p.valid_k
    extra = (
        f"; {p.request_overhead_s * 1e3:.2f} ms per request outside the engine (from TTFT)"
        if p.request_overhead_s is not None
        else ""
    )
    if p.request_overhead_s is not None and p.frontend_request_s is not None:
        extra += (
            f", {p.frontend_request_s * 1e3:.2f} ms of it in the server's front-end, one request "
            "after another"
        )
    return Text(
        f"{p.deployment_description}\nvalid for concurrency {fmt_span(str(lo), str(hi))}"
        + (f" and K {fmt_span(str(klo), str(khi))}" if khi else " (no speculative level)")
        + f"; RMS residual {p.rms_residual_pct:.1f}%{extra}"
    )


def render_calibration(p: CalibrationProfile) -> RenderableType:
    """The fitted coefficients, the points they came from and the fit's residuals."""
    return Group(_validity(p), _coefficients_table(p), _points_table(p))


def _fmt(name: str, value: float) -> str:
    if name.endswith("_scale"):
        return fmt_x(value, 3)
    if value >= 1e-3:
        return f"{value * 1e3:.3f} ms"
    return f"{value * 1e6:.2f} µs"
