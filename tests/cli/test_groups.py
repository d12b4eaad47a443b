"""Option groups (cli/_groups.py): a dataclass of Typer options declared once, taken whole by a
verb — on the command line one option per field, in the verb one instance; `given` still sees
which were typed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import pytest
import typer
from typer.testing import CliRunner

from alphagate.cli._groups import takes_groups
from alphagate.cli._options import CostFlags, DeploymentFlags, given

Size = Annotated[int, typer.Option("--size", min=1, help="How big.")]
Name = Annotated[str, typer.Option("--name", help="What it is called.")]


@dataclass(frozen=True)
class Shape:
    size: Size = 3
    name: Name = "box"


def _app(seen: list[object]) -> typer.Typer:
    app = typer.Typer()

    @app.command()
    @takes_groups
    def cmd(
        ctx: typer.Context,
        shape: Shape = Shape(),
        verbose: Annotated[bool, typer.Option("--verbose")] = False,
    ) -> None:
        seen.append((shape, verbose, given(ctx, "size"), given(ctx, "name")))

    return app


def test_a_group_is_its_options_on_the_command_line_and_one_instance_in_the_verb() -> None:
    seen: list[object] = []
    app = _app(seen)
    r = CliRunner().invoke(app, ["--size", "7", "--verbose"])
    assert r.exit_code == 0, r.output
    assert seen == [(Shape(size=7, name="box"), True, True, False)]
    assert "--size" in (h := CliRunner().invoke(app, ["--help"]).output) and "How big." in h
    bad = CliRunner().invoke(app, ["--size", "0"])  # the option's own bounds still apply
    assert bad.exit_code == 2 and "--size" in bad.output


def test_an_option_declared_twice_is_refused_when_the_verb_is_defined() -> None:
    with pytest.raises(TypeError, match="declared twice"):

        @takes_groups
        def cmd(shape: Shape = Shape(), size: Size = 1) -> None: ...


def test_the_shared_groups_default_to_the_config_records_defaults() -> None:
    from alphagate.specs.deployment import DeploymentConfig

    d, dep = DeploymentConfig(), DeploymentFlags().config()
    assert (dep.model, dep.gpu, dep.max_num_seqs, dep.drafter.method) == (
        d.model,
        d.gpu,
        d.max_num_seqs,
        d.drafter.method,
    )
    assert CostFlags().apply(dep) == dep  # no coefficient given: the deployment as it was
