"""Rich tables for ``alphagate bench``: one block per load level — a row per metric, a column per
target, and the candidate's speedup over the baseline — so that it reads at 80 columns."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from alphagate.bench.records import BenchResult, Comparison, LevelSummary, Stats
from alphagate.report._fmt import LOSS, fmt_ms, fmt_x_marked
from alphagate.report._tables import add_columns, new_table
from alphagate.sim.results import Speedups

__all__ = ["progress_line", "render_bench"]


def _failed(s: Stats) -> str:
    return ", ".join(f"{k}:{v}" for k, v in s.failed_by_type.items()) or "0"


def _acceptance(lv: LevelSummary) -> str:
    a = lv.acceptance
    if a is None or a.draft_acceptance_rate is None:
        return "—"
    alpha = "—" if a.implied_alpha_iid is None else f"{a.implied_alpha_iid:.3f}"
    tau = "—" if a.mean_acceptance_length is None else f"{a.mean_acceptance_length:.3f}"
    return f"{a.draft_acceptance_rate:.3f} / {tau} / {alpha}"


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
        "tpc": "—" if s.mean_tokens_per_chunk is None else f"{s.mean_tokens_per_chunk:.2f}",
    }[key]


def _level_title(lv: LevelSummary) -> str:
    if lv.rate is not None:
        cap = f", at most {lv.concurrency} in flight" if lv.concurrency else ""
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
    for label, key, field in _ROWS:
        extra = []
        if sp is not None:
            extra = [fmt_x_marked(getattr(sp, field)) if field else ""]
        t.add_row(label, *(_value(lv.overall, key) for lv in levels), *extra)
    t.add_row("ρ / τ / α (i.i.d.)", *(_acceptance(lv) for lv in levels), *([""] if comp else []))
    return t


def render_bench(result: BenchResult) -> RenderableType:
    """Every level as a block; speedups read "× better": throughput cand ÷ base, latency base ÷ cand."""
    by_level: dict[str, list[LevelSummary]] = {}
    for lv in result.levels:
        by_level.setdefault(lv.level, []).append(lv)
    comps = {c.level: c for c in result.comparisons}
    parts: list[RenderableType] = [
        _level_block(lvs, comps.get(label)) for label, lvs in by_level.items()
    ]
    notes = [
        "ms; ITL per token = chunk gap ÷ tokens in the chunk; ρ = accepted ÷ drafted, τ = mean "
        "acceptance length (incl. bonus), α = the i.i.d. conditional α they imply."
    ]
    if comps:
        notes.append(
            "cand vs base: how many times better the candidate is — throughput cand ÷ base, "
            f"latency base ÷ cand; below 1× ({LOSS}) the candidate is worse."
        )
    for lv in result.levels:
        for kind, msg in lv.overall.first_error_by_type.items():
            n = lv.overall.failed_by_type.get(kind, 0)
            total = lv.overall.completed + lv.overall.failed
            parts.append(Text(f"{lv.target} {lv.level}: {n}/{total} {kind}: {msg}", style="yellow"))
    parts.append(Text(" ".join(notes), style="dim"))
    return Group(*parts)


def progress_line(
    level: str,
    target: str,
    done: int,
    failed: int,
    tok_s: float,
    p99_itl_ms: float | None,
    total: int,
) -> Table:
    """The live line of a running bench."""
    t = Table.grid(padding=(0, 2))
    t.add_row(
        f"[bold]{target}[/bold] {level}",
        f"{done}/{total} done",
        f"{failed} failed",
        f"{tok_s:,.0f} tok/s",
        f"P99 ITL/token {fmt_ms(p99_itl_ms)} ms",
    )
    return t
