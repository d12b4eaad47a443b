"""Rich renderings of the ``alphagate model`` answers."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from alphagate.report._fmt import LOSS, fmt_alpha, fmt_bytes, fmt_count, fmt_x, fmt_x_marked, loss
from alphagate.report._tables import add_columns, new_table
from alphagate.specs.memory import MemoryAnswer
from alphagate.theory.answers import (
    BlendAnswer,
    BreakevenAnswer,
    ConvertAnswer,
    OptimalKAnswer,
    RequiredAnswer,
    SpeedupAnswer,
    TableAnswer,
)

__all__ = [
    "render_blend",
    "render_breakeven",
    "render_convert",
    "render_linear_gap",
    "render_memory",
    "render_optimal_k",
    "render_required",
    "render_speedup",
    "render_table",
]


def _kv(title: str, rows: list[tuple[str, str, str]]) -> Table:
    t = new_table(title)
    t.add_column("quantity", overflow="fold")
    t.add_column("value", justify="right", overflow="fold")
    t.add_column("note", style="dim", overflow="fold")
    for r in rows:
        t.add_row(*r)
    return t


def _with_reason(t: Table, reason: str | None) -> RenderableType:
    """The table, with the answer's caveat under it in yellow when it has one."""
    return Group(t, Text(reason, style="yellow")) if reason else t


def _costs(k: int, c: float, v: float) -> str:
    return f"K={k}, draft cost c={c:g}, verify cost v={v:g}"


def render_speedup(a: SpeedupAnswer) -> RenderableType:
    return _kv(
        f"Speedup at α={a.alpha:g}, {_costs(a.k, a.draft_cost, a.verify_cost)}",
        [
            (
                "E  expected tokens / target pass",
                f"{a.expected_tokens_per_pass:.4f}",
                "(1−α^(K+1))/(1−α)",
            ),
            ("S  speedup", fmt_x(a.speedup, 3), "E / (K·c + v)"),
            ("τ  mean acceptance length", f"{a.mean_acceptance_length:.4f}", "incl. bonus token"),
            (
                "ρ  draft acceptance rate",
                f"{a.draft_acceptance_rate:.4f}",
                "accepted ÷ drafted (vLLM)",
            ),
            ("α  break-even", fmt_alpha(a.alpha_breakeven, 4), "S = 1"),
            ("upper bound on E", f"{a.upper_bound_tokens_per_pass:.4f}", "min(K+1, 1/(1−α))"),
            ("operations factor", f"{a.operations_factor:.3f}", "Leviathan Thm 3.11"),
            (
                "compute-bound floor",
                fmt_x(a.compute_bound_speedup, 3),
                "throughput ratio when FLOP-bound",
            ),
            (
                "linear 1+K·α (APPROX.)",
                f"{a.linear_expected_tokens:.4f}",
                f"overstates E ×{a.linear_overestimate_ratio:.3f}",
            ),
            ("linear speedup (APPROX.)", fmt_x(a.linear_speedup, 3), "(1+K·α)/(1+overhead)"),
        ],
    )


def render_breakeven(a: BreakevenAnswer) -> RenderableType:
    rows = [
        ("α break-even (exact)", fmt_alpha(a.alpha_breakeven, 4), "E(α,K) = K·c + v"),
        (
            "ρ at break-even",
            fmt_alpha(a.draft_acceptance_rate_breakeven, 4),
            "what vLLM would show",
        ),
        ("τ at break-even", fmt_alpha(a.mean_acceptance_length_breakeven, 4), "incl. bonus token"),
        ("α break-even (linear, APPROX.)", fmt_alpha(a.alpha_breakeven_linear, 4), "overhead / K"),
    ]
    t = _kv(f"Break-even α, {_costs(a.k, a.draft_cost, a.verify_cost)}", rows)
    return _with_reason(t, a.reason)


def render_required(a: RequiredAnswer) -> RenderableType:
    rows = [
        ("α required (exact)", fmt_alpha(a.alpha_required, 4), f"for S = {a.target_speedup:g}×"),
        ("ρ required", fmt_alpha(a.draft_acceptance_rate_required, 4), "accepted ÷ drafted"),
        ("τ required", fmt_alpha(a.mean_acceptance_length_required, 4), "incl. bonus token"),
        ("α required (linear, APPROX.)", fmt_alpha(a.alpha_required_linear, 4), "from 1 + K·α"),
        ("max speedup at α = 1", fmt_x(a.max_speedup, 3), "(K+1)/(K·c + v)"),
    ]
    t = _kv(f"α for {a.target_speedup:g}×, {_costs(a.k, a.draft_cost, a.verify_cost)}", rows)
    return _with_reason(t, a.reason)


def render_optimal_k(a: OptimalKAnswer) -> RenderableType:
    t = add_columns(
        new_table(f"Speedup by K at α={a.alpha:g}, c={a.draft_cost:g}, v={a.verify_cost:g}"),
        "K",
        "speedup",
        left=0,
    )
    for i, s in enumerate(a.speedup_by_k, start=1):
        style = "bold green" if i == a.k else None
        t.add_row(str(i), fmt_x(s, 3), style=style)
    verdict = (
        Text(f"optimal K = {a.k} → {fmt_x(a.speedup, 3)}", style="bold green")
        if a.k > 0
        else Text("no K beats plain decoding: leave speculation off (K = 0)", style="bold red")
    )
    return Group(t, verdict)


def render_blend(a: BlendAnswer) -> RenderableType:
    t = add_columns(
        new_table(f"Traffic blend, {_costs(a.k, a.draft_cost, a.verify_cost)}"),
        "class",
        "token share",
        "α",
        "E",
        "speedup",
        "time share",
        "net win",
    )
    for r in a.classes:
        t.add_row(
            r.name,
            f"{r.share:.3f}",
            f"{r.alpha:.3f}",
            f"{r.expected_tokens_per_pass:.3f}",
            fmt_x(r.speedup, 3),
            f"{r.time_share:.3f}",
            "yes" if r.net_win else loss("no"),
        )
    summary = _kv(
        "Blended (time per token, not averaged α)",
        [
            ("blended speedup", fmt_x(a.blended_speedup, 3), "1 / Σ share_i / S_i"),
            ("equivalent single α", f"{a.equivalent_alpha:.4f}", "α giving the same speedup"),
            ("naive mean α", f"{a.naive_mean_alpha:.4f}", "Σ share_i · α_i — do not use"),
            ("speedup at naive α", fmt_x(a.naive_speedup, 3), "what averaging α would claim"),
            ("α break-even", fmt_alpha(a.alpha_breakeven, 4), "S = 1"),
            ("net win", "yes" if a.net_win else loss("no"), ""),
        ],
    )
    return Group(t, summary)


def render_convert(a: ConvertAnswer) -> RenderableType:
    rows = [
        ("α  conditional (i.i.d.)", fmt_alpha(a.alpha, 4), "Leviathan α"),
        ("ρ  draft acceptance rate", f"{a.draft_acceptance_rate:.4f}", "accepted ÷ drafted"),
        ("τ  mean acceptance length", f"{a.mean_acceptance_length:.4f}", "1 + K·ρ, incl. bonus"),
    ]
    if a.per_position_unconditional:
        rates = ", ".join(f"{x:.3f}" for x in a.per_position_unconditional)
        rows.append(("per-position (unconditional)", rates, "α^i, as vLLM reports"))
    t = _kv(f"Acceptance at K={a.k} from {a.given}={a.given_value:g}", rows)
    return _with_reason(t, a.reason)


def render_memory(a: MemoryAnswer) -> RenderableType:
    t = add_columns(
        new_table(f"Memory ({a.weight_dtype} weights, {a.kv_dtype} KV cache)"),
        "model",
        "kind",
        "params",
        "weights",
        "KV / token",
        "KV layers",
        left=2,
    )
    for fp in (a.target, a.draft):
        t.add_row(
            fp.name,
            fp.kind,
            fmt_count(fp.params),
            fmt_bytes(fp.weight_bytes),
            fmt_bytes(fp.kv_bytes_per_token),
            str(fp.layers_with_kv),
        )
    summary = _kv(
        "Drafter cost",
        [
            ("draft weights ÷ target weights", f"{a.draft_weight_fraction_of_target:.4f}", ""),
            ("draft KV ÷ target KV per token", f"{a.draft_kv_fraction_of_target:.4f}", ""),
            (
                "target KV tokens displaced",
                f"{a.tokens_of_target_kv_displaced_by_draft_weights:,.0f}",
                "draft weights ÷ target KV/token",
            ),
        ],
    )
    return Group(t, summary)


def _grid(a: TableAnswer, vi: int, title: str, values: list[list[float]], be: bool) -> Table:
    t = add_columns(
        new_table(title),
        "K",
        *(f"α={al:g}" for al in a.alphas),
        *(["α_be", "linear α_be"] if be else []),
        left=0,
    )
    for ki, k in enumerate(a.ks):
        cells = [fmt_x_marked(x, compact=True) for x in values[ki]]
        extra = (
            [fmt_alpha(a.alpha_breakeven[vi][ki]), fmt_alpha(a.alpha_breakeven_linear[vi][ki])]
            if be
            else []
        )
        t.add_row(str(k), *cells, *extra)
    return t


def render_table(a: TableAnswer, show_linear: bool = False) -> RenderableType:
    """The exact speedup grid per verify cost (and, with ``show_linear``, the linear estimate's)."""
    parts: list[RenderableType] = []
    for vi, v in enumerate(a.verify_costs):
        costs = f"draft cost c={a.draft_cost:g}, verify cost v={v:g}"
        parts.append(_grid(a, vi, f"Speedup (exact), {costs}", a.speedup[vi], be=True))
        if show_linear:
            title = f"Linear estimate (1+K·α)/(1+overhead), {costs} — APPROXIMATION"
            parts.append(_grid(a, vi, title, a.linear_speedup[vi], be=False))
    parts.append(Text(f"{LOSS} = net loss (speedup below 1×)", style="dim"))
    return Group(*parts)


def render_linear_gap(a: TableAnswer) -> RenderableType:
    """How far the linear 1 + K·α is from the exact E(α, K): the overestimate ratio."""
    t = add_columns(
        new_table("Linear approximation 1+K·α ÷ exact E(α,K)  (1.00 = exact)"),
        "K",
        *(f"α={al:g}" for al in a.alphas),
        left=0,
    )
    for ki, k in enumerate(a.ks):
        cells = []
        for ai in range(len(a.alphas)):
            ratio = a.linear_expected_tokens[ki][ai] / a.expected_tokens_per_pass[ki][ai]
            cells.append(f"[yellow]{ratio:.3f}[/yellow]" if ratio > 1.1 else f"{ratio:.3f}")
        t.add_row(str(k), *cells)
    return t
