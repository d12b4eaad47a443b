"""Rich tables for ``alphagate simulate``: speedups, ITL tails, break-even α and crossovers."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from alphagate.report._fmt import fmt_alpha
from alphagate.sim.sweep import SweepCell, SweepResult

__all__ = ["render_sweep"]


def _cell(cells: list[SweepCell], load: float, k: int, mix: str) -> SweepCell | None:
    for c in cells:
        if c.load == load and c.k == k and c.mix == mix:
            return c
    return None


def _load_name(kind: str, load: float) -> str:
    return f"{load:g}" if kind == "concurrency" else f"{load:g}/s"


def render_sweep(r: SweepResult) -> RenderableType:
    kind = r.rows[0].load_kind if r.rows else "concurrency"
    head = Text(r.deployment, style="bold")

    sp = Table(
        title="Throughput speedup, speculative ÷ no-speculation (paired: same seed, arrivals, lengths)"
    )
    sp.add_column("C" if kind == "concurrency" else "rate", justify="right")
    sp.add_column("K", justify="right")
    for m in r.mixes:
        sp.add_column(m, justify="right")
    sp.add_column("α_be model", justify="right", style="bold")
    sp.add_column("α_be sim", justify="right", style="bold")
    for row in r.rows:
        for ki, k in enumerate(r.ks):
            vals = []
            for m in r.mixes:
                c = _cell(r.cells, row.load, k, m)
                s = c.speedup.throughput if c else float("nan")
                vals.append(f"[red]{s:.2f}[/red]" if s < 1.0 else f"{s:.2f}")
            sp.add_row(
                _load_name(kind, row.load) if ki == 0 else "",
                str(k),
                *vals,
                fmt_alpha(row.alpha_breakeven_model.get(k), 2),
                fmt_alpha(row.alpha_breakeven_sim.get(k), 2),
                end_section=ki == len(r.ks) - 1,
            )

    itl = Table(
        title="ITL per token P50 / P99 (ms): off = no speculation; chunk gap ÷ tokens in the chunk"
    )
    itl.add_column("C" if kind == "concurrency" else "rate", justify="right")
    itl.add_column("K", justify="right")
    itl.add_column("off", justify="right", style="cyan")
    for m in r.mixes:
        itl.add_column(m, justify="right")
    for row in r.rows:
        b = row.baseline.itl_per_token_ms
        for ki, k in enumerate(r.ks):
            vals = []
            for m in r.mixes:
                c = _cell(r.cells, row.load, k, m)
                d = c.spec.itl_per_token_ms if c else None
                if d is None or d.p50 is None or d.p99 is None or b.p99 is None:
                    vals.append("—")
                    continue
                p99 = f"[red]{d.p99:.0f}[/red]" if d.p99 > b.p99 else f"{d.p99:.0f}"
                vals.append(f"{d.p50:.0f} / {p99}")
            off = (
                f"{b.p50:.0f} / {b.p99:.0f}"
                if ki == 0 and b.p50 is not None and b.p99 is not None
                else ""
            )
            itl.add_row(
                _load_name(kind, row.load) if ki == 0 else "",
                str(k),
                off,
                *vals,
                end_section=ki == len(r.ks) - 1,
            )

    costs = Table(title="Emergent cost ratios from the step-time model (at the steady batch)")
    costs.add_column("C" if kind == "concurrency" else "rate", justify="right")
    costs.add_column("tok/s off", justify="right")
    costs.add_column("draft c", justify="right")
    for k in r.ks:
        costs.add_column(f"verify v (K={k})", justify="right")
    for row in r.rows:
        costs.add_row(
            _load_name(kind, row.load),
            f"{row.baseline.output_tokens_per_s:,.0f}",
            f"{row.draft_cost_ratio:.3f}",
            *(f"{row.verify_cost_ratio[k]:.2f}" for k in r.ks),
        )

    parts: list[RenderableType] = [head, sp, itl, costs]
    if r.crossover_concurrency_model:
        cx = Table(
            title=f"Crossover: batch size at which speculation stops paying (step-time model; "
            f"the batch can reach {r.crossover_search_max} here)"
        )
        cx.add_column("acceptance")
        for k in r.ks:
            cx.add_column(f"K={k}", justify="right")
        for m, by_k in r.crossover_concurrency_model.items():
            cx.add_row(
                m,
                *(
                    f"> {r.crossover_search_max}"
                    if v is None
                    else ("never pays" if v <= 1.0 else f"{v:.0f}")
                    for v in (by_k[k] for k in r.ks)
                ),
            )
        parts.append(cx)
    parts.append(
        Text(
            "red speedup = net loss; red P99 = tail worse than without speculation. α_be: break-even conditional α "
            "(model: closed form with emergent c, v; sim: bisection on paired simulations).",
            style="dim",
        )
    )
    return Group(*parts)
