"""Rich tables for ``alphagate simulate``: speedups, ITL tails, emergent costs, crossovers."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.text import Text

from alphagate.core.fmt import DASH
from alphagate.core.records import Interval
from alphagate.report._fmt import LOSS, fmt_alpha, fmt_interval, fmt_x_marked, loss
from alphagate.report._tables import add_columns, new_table
from alphagate.sim.sweep import SweepResult

__all__ = ["render_sweep"]


def _load_name(kind: str, load: float) -> str:
    return f"{load:g}" if kind == "concurrency" else f"{load:g}/s"


def _load_header(kind: str) -> str:
    return "C" if kind == "concurrency" else "rate"


def _under(value: str, iv: Interval | None, digits: int = 2) -> str:
    """A value with its range on a dim second line (the tables stay narrow at 80 columns)."""
    if iv is None or iv.low is None:
        return value
    # an open high end: beyond what the quantity takes there (no α pays; pays at every batch)
    if iv.high is None:
        text = f"≥ {iv.low:.{digits}f}"
    else:
        text = fmt_interval(iv, digits, brackets=False, mark=False)
    return f"{value}\n[dim]{text}[/dim]"


def _speedups(r: SweepResult, kind: str) -> RenderableType:
    sp = add_columns(
        new_table(
            "Throughput speedup, speculative ÷ no speculation (paired: same requests, arrivals, lengths)"
        ),
        _load_header(kind),
        "K",
        *r.mixes,
        left=0,
    )
    for row in r.rows:
        for ki, k in enumerate(r.ks):
            vals = []
            for m in r.mixes:
                c = r.cell(row.load, k, m)
                s = c.speedup.throughput_speedup if c else None
                if s is None or c is None:
                    vals.append(DASH)
                    continue
                v = fmt_x_marked(s, compact=True)
                vals.append(_under(v, c.throughput_speedup_interval))
            sp.add_row(
                _load_name(kind, row.load) if ki == 0 else "",
                str(k),
                *vals,
                end_section=ki == len(r.ks) - 1,
            )
    return sp


def _breakeven(r: SweepResult, kind: str) -> RenderableType:
    be = add_columns(
        new_table(
            "Break-even conditional α per K: model (closed form with the emergent c, v) / sim "
            "(bisection on paired simulations)"
        ),
        _load_header(kind),
        *(f"K={k}" for k in r.ks),
        left=0,
    )
    for row in r.rows:
        cells = []
        for k in r.ks:
            kr = row.for_k(k)
            value = (
                f"{fmt_alpha(kr.alpha_breakeven_model, 2)} / {fmt_alpha(kr.alpha_breakeven_sim, 2)}"
            )
            cells.append(_under(value, kr.alpha_breakeven_interval))
        be.add_row(_load_name(kind, row.load), *cells)
    return be


def _itl(r: SweepResult, kind: str) -> RenderableType:
    itl = add_columns(
        new_table(
            "ITL per token P50 / P99 (ms): off = no speculation; chunk gap ÷ tokens in the chunk"
        ),
        _load_header(kind),
        "K",
        "off",
        *r.mixes,
        left=0,
    )
    for row in r.rows:
        b = row.baseline.itl_per_token_ms
        for ki, k in enumerate(r.ks):
            vals = []
            for m in r.mixes:
                c = r.cell(row.load, k, m)
                d = c.spec.itl_per_token_ms if c else None
                if d is None or d.p50 is None or d.p99 is None or b.p99 is None:
                    vals.append(DASH)
                    continue
                worse = d.p99 > b.p99
                p99 = loss(f"{d.p99:.0f}", compact=True) if worse else f"{d.p99:.0f}"
                vals.append(f"{d.p50:.0f}/{p99}")
            off = (
                f"{b.p50:.0f}/{b.p99:.0f}"
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
    return itl


def _costs(r: SweepResult, kind: str) -> RenderableType:
    costs = add_columns(
        new_table("Emergent cost ratios from the step-time model (at the steady batch)"),
        _load_header(kind),
        "mean batch",
        "tok/s off",
        "draft c",
        *(f"verify v K={k}" for k in r.ks),
        left=0,
    )
    for row in r.rows:
        costs.add_row(
            _load_name(kind, row.load),
            f"{row.baseline.mean_batch:.1f}",
            f"{row.baseline.output_tokens_per_s:,.0f}",
            f"{row.draft_cost_ratio:.3f}",
            *(f"{row.for_k(k).verify_cost_ratio:.2f}" for k in r.ks),
        )
    return costs


def _crossovers(r: SweepResult) -> RenderableType:
    cx = add_columns(
        new_table(
            "Crossover: batch size at which speculation stops paying (step-time model; the "
            f"batch can reach {r.crossover_search_max} here)"
        ),
        "acceptance",
        *(f"K={k}" for k in r.ks),
    )
    for m in r.mixes:
        cells = []
        for k in r.ks:
            x = next(c for c in r.crossovers if c.mix == m and c.k == k)
            v = x.batch
            text = (
                f"> {r.crossover_search_max}"
                if v is None
                else ("never pays" if v <= 1.0 else f"{v:.0f}")
            )
            cells.append(_under(text, x.batch_interval, 0))
        cx.add_row(m, *cells)
    return cx


def _caps_note(r: SweepResult) -> Text | None:
    """The largest batch of each arm, where the speculative server's is the smaller."""
    caps = dict(zip(r.ks, r.largest_batch, strict=False))
    if all(c.speculative >= c.baseline for c in caps.values()):
        return None
    base = next(iter(caps.values())).baseline
    held = ", ".join(f"{c.speculative} at K={k}" for k, c in caps.items())
    return Text(
        f"Largest batch: {base} sequences without speculation, {held} with it (the drafter's "
        "KV shares the cache, and each sequence holds its draft and lookahead slots); above "
        "it the speculative server's requests queue.",
        style="dim",
    )


def render_sweep(r: SweepResult) -> RenderableType:
    kind = r.rows[0].load_kind if r.rows else "concurrency"
    parts: list[RenderableType] = [
        Text(r.deployment, style="bold"),
        _speedups(r, kind),
        _breakeven(r, kind),
        _itl(r, kind),
        _costs(r, kind),
    ]
    if r.crossovers:
        parts.append(_crossovers(r))
    caps = _caps_note(r)
    if caps is not None:
        parts.append(caps)
    parts.append(
        Text(
            f"{LOSS} (red) = net loss, or a P99 worse than without speculation."
            + _ranges_note(r.ranges_origin),
            style="dim",
        )
    )
    return Group(*parts)


def _ranges_note(origin: str | None) -> str:
    if origin is None:
        return ""
    source = (
        "the calibration's fitted values ± 2 standard errors"
        if origin == "calibration"
        else "the documented prior ranges (--explain-cost lists them; calibrate narrows them)"
    )
    return (
        " Second line of a cell: its range over the step-time constants' ranges, from "
        f"{source}. A speedup whose range holds 1× has no settled sign: measure before you "
        "decide on it."
    )
