"""The workload as flags, for the verbs that model one: request lengths, and the traffic mix —
``--class`` values, with the α measured in ``--alpha-from`` files folded into the classes that
have none (:func:`alphagate.plan.fold.fold_measurements`). Option groups
(:mod:`alphagate.cli._groups`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from alphagate.cli._check import fail, flag_errors, float_list, int_list
from alphagate.cli._groups import given
from alphagate.core.traffic import TrafficClass, parse_traffic_class, validate_classes
from alphagate.specs.workload import WorkloadConfig, parse_length

__all__ = ["LengthFlags", "PlanMixFlags", "SimulateMixFlags", "traffic_classes"]


def traffic_classes(values: list[str], *, require_alpha: bool) -> tuple[TrafficClass, ...]:
    """``--class NAME:SHARE[:ALPHA]`` values, validated together (names, shares sum to 1)."""
    with flag_errors("--class"):
        classes = tuple(parse_traffic_class(v, require_alpha=require_alpha) for v in values)
        validate_classes(classes)
    return classes


@dataclass(frozen=True)
class LengthFlags:
    """Request lengths."""

    prompt_len: Annotated[
        str,
        typer.Option(
            "--prompt-len", help="fixed:N | uniform:LO:HI | lognormal:MEAN[:SIGMA] | file:PATH"
        ),
    ] = "lognormal:512"
    output_len: Annotated[str, typer.Option("--output-len", help="Same forms as --prompt-len.")] = (
        "lognormal:256"
    )

    def workload(self, classes: tuple[TrafficClass, ...] | None = None) -> WorkloadConfig:
        """The workload of these lengths and ``classes`` (the default mix when None)."""
        with flag_errors("--prompt-len"):
            prompt_len = parse_length(self.prompt_len)
        with flag_errors("--output-len"):
            output_len = parse_length(self.output_len)
        with flag_errors("--class"):
            return WorkloadConfig(
                prompt_len=prompt_len,
                output_len=output_len,
                **({"classes": classes} if classes else {}),
            )


def _fold(
    classes: tuple[TrafficClass, ...],
    paths: list[Path],
    *,
    k: int | None,
    overall: bool,
    require_all: bool,
) -> tuple[TrafficClass, ...]:
    from alphagate.plan.fold import fold_measurements

    with flag_errors():
        return fold_measurements(classes, paths, k=k, overall=overall, require_all=require_all)


@dataclass(frozen=True)
class SimulateMixFlags:
    """The α values compared one class at a time, or one mix of classes."""

    alphas: Annotated[
        str, typer.Option("--alpha", "-a", help="Comma-separated α values (one class each).")
    ] = "0.4,0.5,0.55,0.6,0.7,0.8"
    classes: Annotated[
        list[str] | None,
        typer.Option(
            "--class",
            help="NAME:SHARE:ALPHA or NAME:SHARE:A1,A2,… (α per draft position), repeated: one "
            "traffic mix (replaces --alpha); NAME:SHARE with --alpha-from.",
        ),
    ] = None
    alpha_from: Annotated[
        Path | None,
        typer.Option(
            "--alpha-from",
            help="α for the classes without one: an alphagate measure results file (α by "
            "position per class), a bench summary or vllm bench serve JSON.",
        ),
    ] = None
    alpha_overall: Annotated[
        bool,
        typer.Option("--alpha-overall", help="Apply one overall measured α to every class."),
    ] = False

    def check(self, ctx: typer.Context) -> None:
        """A mix gives each class its α: the --alpha values would be ignored."""
        if self.classes and given(ctx, "alphas"):
            fail(
                "--class gives each traffic class its α (or --alpha-from does): drop --alpha, "
                "or drop --class to compare the --alpha values",
                "--alpha",
            )

    def mix(self, ks: str) -> tuple[TrafficClass, ...] | None:
        """The traffic mix (None: compare the --alpha values), with α read from --alpha-from
        where a class has none (ρ inverted at the largest of ``ks``, the --k values, where a
        file does not say)."""
        if not self.classes:
            if self.alpha_from is not None:
                fail(
                    "--alpha-from fills the α of --class NAME:SHARE classes; give --class",
                    "--class",
                )
            return None
        mix = traffic_classes(self.classes, require_alpha=self.alpha_from is None)
        if self.alpha_from is None:
            return mix
        k = max(int_list(ks, "--k", 1, 64))
        return _fold(mix, [self.alpha_from], k=k, overall=self.alpha_overall, require_all=True)

    def alpha_grid(self, mix: tuple[TrafficClass, ...] | None) -> tuple[float, ...] | None:
        """The α values to compare, when there is no mix."""
        return None if mix else tuple(float_list(self.alphas, "--alpha", 0.0, 1.0))


@dataclass(frozen=True)
class PlanMixFlags:
    """The traffic classes a plan is for, with measured α where they have none."""

    classes: Annotated[
        list[str],
        typer.Option(
            "--class",
            help="NAME:SHARE[:ALPHA], repeated; SHARE = fraction of output tokens. A class without "
            "ALPHA gets a documented prior (or a measurement from --alpha-from).",
        ),
    ]
    alpha_from: Annotated[
        list[Path] | None,
        typer.Option(
            "--alpha-from",
            help="Measured α: an alphagate results file (measure, bench summary) or vllm bench "
            "serve JSON; repeat for files that each measure other classes.",
        ),
    ] = None
    alpha_overall: Annotated[
        bool,
        typer.Option(
            "--alpha-overall",
            help="Apply one overall measured α (e.g. a bench summary) to every class.",
        ),
    ] = False

    def mix(self, k: int | None) -> tuple[TrafficClass, ...]:
        """The classes, with α from --alpha-from where one has none (a class still without
        gets the plan's prior)."""
        parsed = traffic_classes(self.classes, require_alpha=False)
        if not self.alpha_from:
            return parsed
        return _fold(parsed, self.alpha_from, k=k, overall=self.alpha_overall, require_all=False)
