"""``alphagate model blend | convert``: acceptance figures — traffic classes blended by time per
token, and one figure as α, ρ and τ."""

from __future__ import annotations

from typing import Annotated

import typer

from alphagate.cli._app import JsonOpt, show
from alphagate.cli._check import bounded, fail
from alphagate.cli._groups import takes_groups
from alphagate.cli._workload import traffic_classes
from alphagate.cli.model._common import KOpt, RatioFlags, model_app

__all__ = ["blend", "convert"]


@model_app.command("blend", short_help="Blend traffic classes by time per token.")
@takes_groups
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
    costs: RatioFlags = RatioFlags(),
    as_json: JsonOpt = False,
) -> None:
    """Blend classes by time per token (not by averaging α); shows the naive mean α beside it."""
    from alphagate.report.model import render_blend
    from alphagate.theory.answers import blend_answer

    ans = blend_answer(list(traffic_classes(classes, require_alpha=True)), k, costs.model())
    show("model blend", ans, as_json, render_blend)


@model_app.command("convert", short_help="One acceptance figure as α, ρ and τ.")
def convert(
    k: KOpt,
    alpha: Annotated[
        float | None,
        bounded("--alpha", "-a", lo=0.0, hi=1.0, help="Given α (conditional)."),
    ] = None,
    rho: Annotated[
        float | None,
        bounded(
            "--draft-acceptance-rate", "--rho", lo=0.0, hi=1.0, help="Given ρ = accepted ÷ drafted."
        ),
    ] = None,
    tau: Annotated[
        float | None,
        bounded(
            "--mean-acceptance-length",
            "--tau",
            lo=1.0,
            hi=65.0,
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
