"""Rich tables for ``alphagate bench``: one block per load level — a row per metric, a column per
target, and the candidate's speedup over the baseline — so that it reads at 80 columns. Under an
SLO each block adds goodput; a sweep prints one row per load and the knee of each target instead."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from alphagate.bench.records import BenchResult, Comparison, LevelSummary, Stats
from alphagate.bench.slo import Goodput
from alphagate.bench.sweep import SweepSummary
from alphagate.core.fmt import DASH, num
from alphagate.measure.estimate import AcceptanceEstimate
from alphagate.report._fmt import (
    LOSS,
    fmt_alpha,
    fmt_ms,
    fmt_pct,
    fmt_x,
    fmt_x_marked,
    loss,
    with_ci,
)
from alphagate.report._tables import add_columns, new_table
from alphagate.sim.results import Speedups

__all__ = ["progress_line", "render_bench"]


def _failed(s: Stats) -> str:
    return ", ".join(f"{k}:{v}" for k, v in s.failed_by_type.items()) or "0"


def _acceptance(lv: LevelSummary, cls: str | None = None) -> str:
    if cls is not None:
        ra = lv.request_acceptance
        a: AcceptanceEstimate | None = None if ra is None else ra.classes.get(cls)
    else:
        a = lv.acceptance
    if a is None or a.draft_acceptance_rate is None:
        return DASH
    return " / ".join(
        fmt_alpha(x) for x in (a.draft_acceptance_rate, a.mean_acceptance_length, a.alpha_iid)
    )


#: (label, value of a target's Stats, the Speedups field comparing it) per row
_ROWS: list[tuple[str, str, str | None]] = [
    ("output tokens/s", "tokens", "throughput_speedup"),
    ("TTFT P50 (ms)", "ttft50", "ttft_p50_speedup"),
    ("TPOT mean (ms)", "tpot", "tpot_mean_speedup"),
    ("ITL/token P50 (ms)", "tok50", "itl_per_token_p50_speedup"),
    ("ITL/token P99 (ms)", "tok99", "itl_per_token_p99_speedup"),
    ("ITL/chunk P50 (ms)", "chunk50", "itl_per_chunk_p50_speedup"),
    ("ITL/chunk P99 (ms)", "chunk99", "itl_per_chunk_p99_speedup"),
    ("tokens per chunk", "tpc", None),
]


def _value(s: Stats, key: str) -> str:
    return {
        "tokens": f"{s.output_tokens_per_s:,.0f}",
        "ttft50": fmt_ms(s.ttft_ms.p50),
        "tpot": fmt_ms(s.tpot_ms.mean),
        "tok50": fmt_ms(s.itl_per_token_ms.p50),
        "tok99": fmt_ms(s.itl_per_token_ms.p99),
        "chunk50": fmt_ms(s.itl_per_chunk_ms.p50),
        "chunk99": fmt_ms(s.itl_per_chunk_ms.p99),
        "tpc": num(s.mean_tokens_per_chunk),
    }[key]


def _level_title(lv: LevelSummary) -> str:
    runs = len(lv.runs)
    return _load_title(lv) + (f", {runs} alternated runs" if runs > 1 else "")


def _load_title(lv: LevelSummary) -> str:
    cap = f", at most {lv.concurrency} in flight" if lv.concurrency else ""
    if lv.time_scale is not None:
        pace = "" if lv.time_scale == 1 else f" ({1 / lv.time_scale:g}× speed)"
        return f"{lv.level} — trace replayed at time scale {lv.time_scale:g}{pace}{cap}"
    if lv.rate is not None:
        return f"{lv.level} — open loop, {lv.rate:g} requests/s{cap}"
    return f"{lv.level} — concurrency {lv.concurrency}"


def _level_block(levels: list[LevelSummary], comp: Comparison | None) -> Table:
    t = add_columns(
        new_table(_level_title(levels[0])),
        "",
        *(lv.target for lv in levels),
        *(["cand vs base"] if comp else []),
    )
    sp: Speedups | None = comp.speedups if comp else None
    t.add_row(
        "completed / failed",
        *(f"{lv.overall.completed} / {_failed(lv.overall)}" for lv in levels),
        *([""] if comp else []),
    )
    between = {}
    if comp is not None and comp.runs > 1:
        between = {
            "throughput_speedup": comp.throughput_interval,
            "tpot_mean_speedup": comp.tpot_interval,
        }
    for label, key, field in _ROWS:
        extra = []
        if sp is not None:
            extra = [fmt_x_marked(getattr(sp, field)) if field else ""]
            extra = [with_ci(extra[0], between.get(field or ""), 2)]
        t.add_row(label, *(_value(lv.overall, key) for lv in levels), *extra)
    t.add_row("ρ / τ / α (i.i.d.)", *(_acceptance(lv) for lv in levels), *([""] if comp else []))
    names = sorted(
        {c for lv in levels if lv.request_acceptance for c in lv.request_acceptance.classes}
    )
    for name in names:
        t.add_row(
            Text(f"  … class {name}"),
            *(_acceptance(lv, name) for lv in levels),
            *([""] if comp else []),
        )
    if any(lv.goodput is not None for lv in levels):
        _goodput_rows(t, levels, comp)
    if any(lv.overall.send_lag_ms is not None for lv in levels):
        t.add_row(
            "send lag P50/P99 (ms)", *(_lag(lv.overall) for lv in levels), *([""] if comp else [])
        )
    return t


def _share(g: Goodput | None, *, counts: bool = False) -> str:
    """The share of requests within the SLO (with ``counts``: good/all before it), red and
    marked where the level missed the SLO's target share."""
    if g is None or g.attainment is None:
        return DASH
    share = fmt_pct(g.attainment)
    text = f"{g.good}/{g.requests} ({share})" if counts else share
    return text if g.meets_slo else loss(text)


def _goodput_rows(t: Table, levels: list[LevelSummary], comp: Comparison | None) -> None:
    gs = [lv.goodput for lv in levels]
    rows = [
        ("within SLO", [_share(g, counts=True) for g in gs], None),
        (
            "goodput (req/s)",
            [num(None if g is None else g.good_requests_per_s, ",.2f") for g in gs],
            comp.goodput_ratio if comp else None,
        ),
        (
            "goodput (tok/s)",
            [num(None if g is None else g.good_output_tokens_per_s, ",.0f") for g in gs],
            comp.output_goodput_ratio if comp else None,
        ),
    ]
    for label, values, x in rows:
        t.add_row(
            label, *values, *([fmt_x_marked(x) if label != "within SLO" else ""] if comp else [])
        )


def _lag(s: Stats) -> str:
    d = s.send_lag_ms
    if d is None or d.p50 is None:
        return DASH
    return f"{fmt_ms(d.p50, 2)} / {fmt_ms(d.p99, 2)}"


def render_bench(result: BenchResult) -> RenderableType:
    """Every level as a block (a sweep: one row per load, and the knees); speedups read
    "× better": throughput cand ÷ base, latency base ÷ cand."""
    by_level: dict[str, list[LevelSummary]] = {}
    for lv in result.levels:
        by_level.setdefault(lv.level, []).append(lv)
    comps = {c.level: c for c in result.comparisons}
    parts: list[RenderableType] = []
    if result.sweep is not None:
        parts += [_sweep_table(result, result.sweep), _knee_table(result.sweep)]
    else:
        parts += [_level_block(lvs, comps.get(label)) for label, lvs in by_level.items()]
    notes = [
        "ms; ITL per token = chunk gap ÷ tokens in the chunk; ρ = accepted ÷ drafted, τ = mean "
        "acceptance length (incl. bonus), α = the i.i.d. conditional α they imply."
    ]
    if result.slo is not None:
        notes.append(
            f"SLO: {result.slo.describe()}; a request is good when it completed within every "
            "bound; goodput = good requests (and their output tokens) per second."
        )
    if comps:
        notes.append(
            "cand vs base: how many times better the candidate is — throughput cand ÷ base, "
            f"latency base ÷ cand; below 1× ({LOSS}) the candidate is worse."
        )
    if any(c.runs > 1 for c in result.comparisons):
        notes.append(
            "[lo, hi]: 95% interval between the alternated runs (Student's t on the pairs' log "
            "ratios); one run cannot show how much a ratio moves from run to run."
        )
    for lv in result.levels:
        if lv.validity is not None and lv.validity.distorted:
            parts.append(
                Text(
                    f"{lv.target} {lv.level}: distorted — "
                    + "; ".join(lv.validity.reasons)
                    + " (no evidence for a gate: rerun on a quieter machine)",
                    style="red",
                )
            )
        for kind, msg in lv.overall.first_error_by_type.items():
            n = lv.overall.failed_by_type.get(kind, 0)
            total = lv.overall.completed + lv.overall.failed
            parts.append(Text(f"{lv.target} {lv.level}: {n}/{total} {kind}: {msg}", style="yellow"))
    parts.append(Text(" ".join(notes), style="dim"))
    return Group(*parts)


def _load_name(kind: str) -> str:
    return "concurrency" if kind == "concurrency" else "rate (req/s)"


def _sweep_table(result: BenchResult, sw: SweepSummary) -> Table:
    """One row per load run: each target's goodput and share of requests within the SLO."""
    targets = list(dict.fromkeys(lv.target for lv in result.levels))
    by = {(lv.target, lv.load): lv for lv in result.levels}
    comps = {c.level: c for c in result.comparisons}
    loads = sorted({lv.load for lv in result.levels if lv.load is not None})
    ab = len(targets) > 1
    heads = [_load_name(sw.sweep.kind)]
    for tg in targets:
        short = tg[:4] if ab else ""
        heads += [f"{short} good/s".strip(), f"{short} in SLO".strip()]
    if ab:
        heads.append("goodput ×")
    t = add_columns(
        new_table(f"Sweep {sw.sweep.kind} {sw.sweep.lo:g}..{sw.sweep.hi:g}: goodput per load"),
        *heads,
    )
    for load in loads:
        row = [f"{load:g}"]
        label = ""
        for tg in targets:
            lv = by.get((tg, load))
            g = None if lv is None else lv.goodput
            label = label or ("" if lv is None else lv.level)
            row += [
                "" if g is None else f"{g.good_requests_per_s:,.2f}",
                "" if lv is None else _share(g),
            ]
        if ab:
            c = comps.get(label)
            row.append("" if c is None else fmt_x_marked(c.goodput_ratio))
        t.add_row(*row)
    return t


def _knee_table(sw: SweepSummary) -> Table:
    kind = sw.sweep.kind
    t = add_columns(
        new_table("Knee: the highest load that met the SLO"),
        "target",
        "knee",
        "first failing",
        "loads run",
    )
    for k in sw.knees:
        knee = "none" if k.knee is None else (f"≥ {k.knee:g}" if k.capped else f"{k.knee:g}")
        first = num(k.first_failing, "g")
        runs = " ".join(f"{x:g}{'' if ok else LOSS}" for x, ok in zip(k.loads, k.met, strict=True))
        t.add_row(k.target, knee, first, runs)
    if sw.knee_ratio is not None:
        capped = any(k.capped for k in sw.knees)
        t.caption = (
            f"candidate knee ÷ baseline knee: {fmt_x(sw.knee_ratio)}"
            f"{' (a bound: a knee reached the top of the range)' if capped else ''} — "
            f"the {_load_name(kind)} each sustains within the SLO"
        )
    return t


def progress_line(
    level: str,
    target: str,
    done: int,
    failed: int,
    tok_s: float,
    p99_itl_ms: float | None,
    total: int | None,
) -> Table:
    """The live line of a running bench (``total`` None: not known in advance, as in a sweep)."""
    t = Table.grid(padding=(0, 2))
    t.add_row(
        f"[bold]{target}[/bold] {level}",
        f"{done}/{total} done" if total is not None else f"{done} done",
        f"{failed} failed",
        f"{tok_s:,.0f} tok/s",
        f"P99 ITL/token {fmt_ms(p99_itl_ms)} ms",
    )
    return t
