"""``alphagate model``: closed forms — speedup, break-even α, α for a target, optimal K, blends,
α/ρ/τ conversions, draft memory. No hardware needed; starts in well under half a second."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from alphagate.cli._app import JsonOpt, app, show
from alphagate.cli._check import config_error, fail, finite_float, float_list, int_list
from alphagate.cli._options import (
    DEFAULT_DTYPE,
    DEFAULT_KV_DTYPE,
    DtypeOpt,
    KvDtypeOpt,
    traffic_classes,
)

if TYPE_CHECKING:
    from alphagate.theory.answers import CostModel

model_app = typer.Typer(
    help="Closed forms (no hardware needed): speedup, break-even α, α for a target speedup, "
    "optimal K, traffic blends, α/ρ/τ conversions, draft memory. Costs default to Leviathan's "
    "idealisation: draft cost c = 0, verify cost v = 1.",
    no_args_is_help=True,
)
app.add_typer(model_app, name="model", short_help="Closed forms: speedup, break-even, K, blends.")

AlphaOpt = Annotated[
    float,
    typer.Option(
        "--alpha",
        "-a",
        callback=finite_float("--alpha", 0.0, 1.0),
        help="α: conditional per-token acceptance, in [0, 1].",
    ),
]
KOpt = Annotated[
    int, typer.Option("--k", "-k", min=1, max=64, help="K: draft tokens per step (1–64).")
]
DraftCostOpt = Annotated[
    float,
    typer.Option(
        "--draft-cost",
        "-c",
        callback=finite_float("--draft-cost", 0.0, 100.0),
        help="c: one draft forward ÷ one plain decode step (>= 0).",
    ),
]
VerifyCostOpt = Annotated[
    float,
    typer.Option(
        "--verify-cost",
        "-v",
        callback=finite_float("--verify-cost", 1e-9, 100.0),
        help="v: verify pass over K+1 tokens ÷ one plain decode step (> 0; 1 = Leviathan's assumption).",
    ),
]


def _costs(draft_cost: float, verify_cost: float) -> CostModel:
    from alphagate.theory.answers import CostModel

    return CostModel(draft_cost=draft_cost, verify_cost=verify_cost)


@model_app.command("speedup", short_help="Exact speedup, with τ, ρ and the linear rule.")
def speedup(
    alpha: AlphaOpt,
    k: KOpt,
    draft_cost: DraftCostOpt = 0.0,
    verify_cost: VerifyCostOpt = 1.0,
    as_json: JsonOpt = False,
) -> None:
    """Exact speedup S = E(α,K)/(K·c + v), with τ, ρ and the linear rule of thumb beside it."""
    from alphagate.report.model import render_speedup
    from alphagate.theory.answers import speedup_answer

    show(
        "model speedup",
        speedup_answer(alpha, k, _costs(draft_cost, verify_cost)),
        as_json,
        render_speedup,
    )


@model_app.command("breakeven", short_help="α at which speculation stops paying.")
def breakeven(
    k: KOpt,
    draft_cost: DraftCostOpt = 0.0,
    verify_cost: VerifyCostOpt = 1.0,
    as_json: JsonOpt = False,
) -> None:
    """α at which speculation stops paying (S = 1), exact and per the linear rule overhead/K."""
    from alphagate.report.model import render_breakeven
    from alphagate.theory.answers import breakeven_answer

    show(
        "model breakeven",
        breakeven_answer(k, _costs(draft_cost, verify_cost)),
        as_json,
        render_breakeven,
    )


@model_app.command("required", short_help="Smallest α for a target speedup.")
def required(
    target_speedup: Annotated[
        float,
        typer.Option(
            "--speedup",
            "-s",
            callback=finite_float("--speedup", 1e-9, 1e6),
            help="Target speedup (e.g. 2 for 2×).",
        ),
    ],
    k: KOpt,
    draft_cost: DraftCostOpt = 0.0,
    verify_cost: VerifyCostOpt = 1.0,
    as_json: JsonOpt = False,
) -> None:
    """Smallest α that reaches a target speedup (null with the reason when unreachable)."""
    from alphagate.report.model import render_required
    from alphagate.theory.answers import required_answer

    ans = required_answer(target_speedup, k, _costs(draft_cost, verify_cost))
    show("model required", ans, as_json, render_required)


@model_app.command("optimal-k", short_help="Best K (0 = leave it off).")
def optimal_k(
    alpha: AlphaOpt,
    draft_cost: DraftCostOpt = 0.0,
    verify_cost: VerifyCostOpt = 1.0,
    k_max: Annotated[int, typer.Option("--k-max", min=1, max=64, help="Largest K to try.")] = 10,
    as_json: JsonOpt = False,
) -> None:
    """Best K in 1..k-max; K = 0 means leave speculation off because nothing beats 1×."""
    from alphagate.report.model import render_optimal_k
    from alphagate.theory.answers import optimal_k_answer

    ans = optimal_k_answer(alpha, _costs(draft_cost, verify_cost), k_max)
    show("model optimal-k", ans, as_json, render_optimal_k)


@model_app.command("blend", short_help="Blend traffic classes by time per token.")
def blend(
    classes: Annotated[
        list[str],
        typer.Option(
            "--class",
            help="NAME:SHARE:ALPHA (or NAME:SHARE:A1,A2,… per position), repeated; SHARE = "
            "fraction of output tokens (they sum to 1).",
        ),
    ],
    k: KOpt,
    draft_cost: DraftCostOpt = 0.0,
    verify_cost: VerifyCostOpt = 1.0,
    as_json: JsonOpt = False,
) -> None:
    """Blend classes by time per token (not by averaging α); shows the naive mean α beside it."""
    from alphagate.report.model import render_blend
    from alphagate.theory.answers import blend_answer

    ans = blend_answer(
        list(traffic_classes(classes, require_alpha=True)), k, _costs(draft_cost, verify_cost)
    )
    show("model blend", ans, as_json, render_blend)


@model_app.command("convert", short_help="One acceptance figure as α, ρ and τ.")
def convert(
    k: KOpt,
    alpha: Annotated[
        float | None,
        typer.Option(
            "--alpha",
            "-a",
            callback=finite_float("--alpha", 0.0, 1.0),
            help="Given α (conditional).",
        ),
    ] = None,
    rho: Annotated[
        float | None,
        typer.Option(
            "--draft-acceptance-rate",
            "--rho",
            callback=finite_float("--draft-acceptance-rate", 0.0, 1.0),
            help="Given ρ = accepted ÷ drafted.",
        ),
    ] = None,
    tau: Annotated[
        float | None,
        typer.Option(
            "--mean-acceptance-length",
            "--tau",
            callback=finite_float("--mean-acceptance-length", 1.0, 65.0),
            help="Given τ (incl. bonus token).",
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Express one acceptance figure as all three: α, ρ and τ (i.i.d. α assumed)."""
    from alphagate.report.model import render_convert
    from alphagate.theory.answers import convert_answer

    given = [
        (n, v)
        for n, v in (
            ("alpha", alpha),
            ("draft_acceptance_rate", rho),
            ("mean_acceptance_length", tau),
        )
        if v is not None
    ]
    if len(given) != 1:
        fail(
            "give exactly one of --alpha, --draft-acceptance-rate, --mean-acceptance-length",
            "--alpha/--draft-acceptance-rate/--mean-acceptance-length",
        )
    name, value = given[0]
    if name == "mean_acceptance_length" and value > k + 1:
        fail(f"τ = {value:g} exceeds K + 1 = {k + 1}", "--mean-acceptance-length")
    show("model convert", convert_answer(name, value, k), as_json, render_convert)  # type: ignore[arg-type]


@model_app.command("memory", short_help="Weights and KV per token: target vs drafter.")
def memory(
    target: Annotated[
        str,
        typer.Option(
            "--target",
            "-t",
            help="Target: a preset (llama-3.3-70b-fp8, llama-3.3-70b, llama-3.1-8b, "
            "llama-3.1-8b-fp8, llama-3.2-1b) or config.json.",
        ),
    ],
    draft: Annotated[
        str,
        typer.Option(
            "--draft",
            "-d",
            help="Drafter: eagle3, eagle, mtp, or a draft model preset / config.json.",
        ),
    ],
    dtype: DtypeOpt = DEFAULT_DTYPE,
    kv_dtype: KvDtypeOpt = DEFAULT_KV_DTYPE,
    draft_vocab_size: Annotated[
        int,
        typer.Option(
            "--draft-vocab-size", min=1, max=10_000_000, help="EAGLE-3 draft vocabulary size."
        ),
    ] = 32_000,
    as_json: JsonOpt = False,
) -> None:
    """Parameters, weight bytes and KV bytes per token of a target and its drafter, compared."""
    from alphagate.core.errors import ConfigError
    from alphagate.report.model import render_memory
    from alphagate.specs.memory import memory_answer

    try:
        ans = memory_answer(target, draft, dtype, kv_dtype, draft_vocab_size)
    except ConfigError as exc:
        config_error(exc, "--target/--draft")
    show("model memory", ans, as_json, render_memory)


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
