"""``alphagate model speedup | breakeven | required | optimal-k | table``: the speedup of
speculative decoding in closed form, and the α and K it depends on."""

from __future__ import annotations

from typing import Annotated

import typer

from alphagate.cli._app import JsonOpt, show
from alphagate.cli._check import bounded, float_list, int_list
from alphagate.cli._groups import takes_groups
from alphagate.cli.model._common import AlphaOpt, DraftCostOpt, KOpt, RatioFlags, model_app

__all__ = ["breakeven", "optimal_k", "required", "speedup", "table"]


@model_app.command("speedup", short_help="Exact speedup, with τ, ρ and the linear rule.")
@takes_groups
def speedup(
    alpha: AlphaOpt,
    k: KOpt,
    costs: RatioFlags = RatioFlags(),
    as_json: JsonOpt = False,
) -> None:
    """Exact speedup S = E(α,K)/(K·c + v), with τ, ρ and the linear rule of thumb beside it."""
    from alphagate.report.model import render_speedup
    from alphagate.theory.answers import speedup_answer

    show(
        "model speedup",
        speedup_answer(alpha, k, costs.model()),
        as_json,
        render_speedup,
    )


@model_app.command("breakeven", short_help="α at which speculation stops paying.")
@takes_groups
def breakeven(
    k: KOpt,
    costs: RatioFlags = RatioFlags(),
    as_json: JsonOpt = False,
) -> None:
    """α at which speculation stops paying (S = 1), exact and per the linear rule overhead/K."""
    from alphagate.report.model import render_breakeven
    from alphagate.theory.answers import breakeven_answer

    show(
        "model breakeven",
        breakeven_answer(k, costs.model()),
        as_json,
        render_breakeven,
    )


@model_app.command("required", short_help="Smallest α for a target speedup.")
@takes_groups
def required(
    target_speedup: Annotated[
        float,
        bounded("--speedup", "-s", lo=1e-9, hi=1e6, help="Target speedup (e.g. 2 for 2×)."),
    ],
    k: KOpt,
    costs: RatioFlags = RatioFlags(),
    as_json: JsonOpt = False,
) -> None:
    """Smallest α that reaches a target speedup (null with the reason when unreachable)."""
    from alphagate.report.model import render_required
    from alphagate.theory.answers import required_answer

    ans = required_answer(target_speedup, k, costs.model())
    show("model required", ans, as_json, render_required)


@model_app.command("optimal-k", short_help="Best K (0 = leave it off).")
@takes_groups
def optimal_k(
    alpha: AlphaOpt,
    costs: RatioFlags = RatioFlags(),
    k_max: Annotated[int, typer.Option("--k-max", min=1, max=64, help="Largest K to try.")] = 10,
    as_json: JsonOpt = False,
) -> None:
    """Best K in 1..k-max; K = 0 means leave speculation off because nothing beats 1×."""
    from alphagate.report.model import render_optimal_k
    from alphagate.theory.answers import optimal_k_answer

    ans = optimal_k_answer(alpha, costs.model(), k_max)
    show("model optimal-k", ans, as_json, render_optimal_k)


@model_app.command("table", short_help="Speedup grid over α × K with break-even α.")
def table(
    alphas: Annotated[
        str, typer.Option("--alphas", help="Comma-separated α values.")
    ] = "0.4,0.5,0.55,0.6,0.7,0.8,0.9",
    ks: Annotated[str, typer.Option("--ks", help="Comma-separated K values.")] = "1,2,3,4,5,6,8",
    draft_cost: DraftCostOpt = 0.0,
    verify_costs: Annotated[
        str,
        typer.Option(
            "--verify-cost", "-v", help="Comma-separated verify cost ratios (sensitivity)."
        ),
    ] = "1.0",
    linear: Annotated[
        bool, typer.Option("--linear", help="Show the linear estimate in each cell.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Speedup grid over α × K with the break-even α per K, for one or more verify costs."""
    from alphagate.report.model import render_table
    from alphagate.theory.answers import table_answer

    ans = table_answer(
        float_list(alphas, "--alphas", 0.0, 1.0),
        int_list(ks, "--ks", 1, 64),
        draft_cost,
        float_list(verify_costs, "--verify-cost", 1e-9, 100.0),
    )
    show("model table", ans, as_json, lambda a: render_table(a, show_linear=linear))
