"""Rich tables for ``alphagate bench``: per level, per target, and the A/B comparison."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table

from alphagate.bench.records import Comparison, LevelSummary, Stats

__all__ = ["progress_table", "render_bench"]


def _ms(x: float | None) -> str:
    return "—" if x is None else f"{x:.1f}"


def _x(x: float | None) -> str:
    if x is None:
        return "—"
    s = f"{x:.2f}×"
    return f"[red]{s}[/red]" if x < 1.0 else s


def render_bench(levels: list[LevelSummary], comparisons: list[Comparison]) -> RenderableType:
    t = Table(
        title="alphagate bench — per level (ms; ITL per token = chunk gap ÷ tokens in the chunk)"
    )
    for col in (
        "target",
        "level",
        "ok",
        "failed",
        "tok/s",
        "TTFT p50",
        "TPOT mean",
        "ITL/chunk p50",
        "ITL/chunk p99",
        "ITL/token p50",
        "ITL/token p99",
        "tok/chunk",
        "ρ",
        "τ",
        "α (i.i.d.)",
    ):
        t.add_column(col, justify="left" if col in ("target", "level") else "right")
    for lv in levels:
        s: Stats = lv.overall
        a = lv.acceptance
        t.add_row(
            lv.target,
            lv.level,
            str(s.completed),
            ", ".join(f"{k}:{v}" for k, v in s.failed_by_type.items()) or "0",
            f"{s.output_tokens_per_s:,.0f}",
            _ms(s.ttft_ms.p50),
            _ms(s.tpot_ms.mean),
            _ms(s.itl_per_chunk_ms.p50),
            _ms(s.itl_per_chunk_ms.p99),
            _ms(s.itl_per_token_ms.p50),
            _ms(s.itl_per_token_ms.p99),
            "—" if s.mean_tokens_per_chunk is None else f"{s.mean_tokens_per_chunk:.2f}",
            "—"
            if a is None or a.draft_acceptance_rate is None
            else f"{a.draft_acceptance_rate:.3f}",
            "—"
            if a is None or a.mean_acceptance_length is None
            else f"{a.mean_acceptance_length:.3f}",
            "—" if a is None or a.implied_alpha_iid is None else f"{a.implied_alpha_iid:.3f}",
        )
    parts: list[RenderableType] = [t]
    if comparisons:
        c = Table(
            title="Candidate vs baseline (throughput: cand ÷ base; latency: base ÷ cand; > 1 = candidate better)"
        )
        for col in (
            "level",
            "output tok/s",
            "TPOT",
            "TTFT p50",
            "ITL/token p50",
            "ITL/token p99",
            "ITL/chunk p50",
            "ITL/chunk p99",
            "tok/chunk",
        ):
            c.add_column(col, justify="right")
        for cmp in comparisons:
            c.add_row(
                cmp.level,
                _x(cmp.output_throughput),
                _x(cmp.tpot_mean),
                _x(cmp.ttft_p50),
                _x(cmp.itl_per_token_p50),
                _x(cmp.itl_per_token_p99),
                _x(cmp.itl_per_chunk_p50),
                _x(cmp.itl_per_chunk_p99),
                "—" if cmp.mean_tokens_per_chunk is None else f"{cmp.mean_tokens_per_chunk:.2f}",
            )
        parts.append(c)
    return Group(*parts)


def progress_table(
    level: str,
    target: str,
    done: int,
    failed: int,
    tok_s: float,
    p99_itl_ms: float | None,
    total: int,
) -> Table:
    t = Table.grid(padding=(0, 2))
    t.add_row(
        f"[bold]{target}[/bold] {level}",
        f"completed {done}/{total}",
        f"failed {failed}",
        f"{tok_s:,.0f} tok/s",
        f"P99 ITL/token {_ms(p99_itl_ms)} ms",
    )
    return t
