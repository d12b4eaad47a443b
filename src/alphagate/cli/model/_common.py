"""What the ``model`` sub-verbs share: their Typer group, the α and K options, and the cost
ratios as an option group (:mod:`alphagate.cli._groups`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

import typer

from alphagate.cli._app import app
from alphagate.cli._check import bounded

if TYPE_CHECKING:
    from alphagate.theory.answers import CostModel

__all__ = ["AlphaOpt", "DraftCostOpt", "KOpt", "RatioFlags", "model_app"]

model_app = typer.Typer(
    help="Closed forms (no hardware needed): speedup, break-even α, α for a target speedup, "
    "optimal K, traffic blends, α/ρ/τ conversions, draft memory. Costs default to Leviathan's "
    "idealisation: draft cost c = 0, verify cost v = 1.",
    no_args_is_help=True,
)
app.add_typer(model_app, name="model", short_help="Closed forms: speedup, break-even, K, blends.")

AlphaOpt = Annotated[
    float,
    bounded(
        "--alpha", "-a", lo=0.0, hi=1.0, help="α: conditional per-token acceptance, in [0, 1]."
    ),
]
KOpt = Annotated[
    int, typer.Option("--k", "-k", min=1, max=64, help="K: draft tokens per step (1–64).")
]
DraftCostOpt = Annotated[
    float,
    bounded(
        "--draft-cost",
        "-c",
        lo=0.0,
        hi=100.0,
        help="c: one draft forward ÷ one plain decode step (>= 0).",
    ),
]


@dataclass(frozen=True)
class RatioFlags:
    """The draft and verify cost ratios, in plain decode steps (Leviathan's idealisation by
    default)."""

    draft_cost: DraftCostOpt = 0.0
    verify_cost: Annotated[
        float,
        bounded(
            "--verify-cost",
            "-v",
            lo=1e-9,
            hi=100.0,
            help="v: verify pass over K+1 tokens ÷ one plain decode step (> 0; 1 = Leviathan's assumption).",
        ),
    ] = 1.0

    def model(self) -> CostModel:
        from alphagate.theory.answers import CostModel

        return CostModel(draft_cost=self.draft_cost, verify_cost=self.verify_cost)
