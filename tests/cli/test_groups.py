"""Option groups (cli/_groups.py): a dataclass of Typer options, or a config record whose options
are generated from its fields, declared once and taken whole by a verb — on the command line one
option per field, in the verb one instance (a record validated, its rules naming their flag);
`given` still sees which were typed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import pytest
import typer
from pydantic import Field, model_validator
from typer.testing import CliRunner

from alphagate.cli._groups import given, model_options, takes_groups
from alphagate.cli._options import DeploymentFlags
from alphagate.core.errors import ConfigError
from alphagate.core.records import Frozen

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
    from alphagate.specs.calibration import CostOverrides
    from alphagate.specs.deployment import DeploymentConfig

    d, dep = DeploymentConfig(), DeploymentFlags().config()
    assert (dep.model, dep.gpu, dep.max_num_seqs, dep.drafter.method) == (
        d.model,
        d.gpu,
        d.max_num_seqs,
        d.drafter.method,
    )
    assert CostOverrides().apply(dep) == dep  # no coefficient given: the deployment as it was


class Window(Frozen):
    """A config record taken as a group: its options are generated from its fields."""

    width_s: float = Field(default=1.0, ge=0.5, le=10.0, description="How wide, in seconds.")
    count: int | None = Field(default=None, ge=1, le=9, description="How many.")
    strict: bool = Field(default=False, description="Refuse what is off.")
    label: str = Field(default="w", description="What it is called.")

    @model_validator(mode="after")
    def _count_fits(self) -> Window:
        if self.count is not None and self.count > self.width_s:
            raise ConfigError("more counts than seconds", "count")
        return self


def _record_app(seen: list[object]) -> typer.Typer:
    app = typer.Typer()

    @app.command()
    @takes_groups
    def cmd(ctx: typer.Context, window: Window = Window()) -> None:
        seen.append((window, given(ctx, "width_s")))

    return app


def test_a_config_record_is_a_group_of_options_generated_from_its_fields() -> None:
    seen: list[object] = []
    app = _record_app(seen)
    r = CliRunner().invoke(app, ["--width-s", "4", "--count", "2", "--strict"])
    assert r.exit_code == 0, r.output
    assert seen == [(Window(width_s=4.0, count=2, strict=True), True)]
    params = {p.name: p for p in typer.main.get_command(app).params}
    assert params["width_s"].opts == ["--width-s"]
    assert params["width_s"].help == "How wide, in seconds."
    assert (params["count"].min, params["count"].max, params["count"].default) == (1, 9, None)
    assert params["label"].default == "w" and params["strict"].is_flag


def test_a_generated_option_keeps_the_fields_bounds_and_its_rules() -> None:
    app = _record_app([])
    for args, flag, words in (
        (["--width-s", "11"], "--width-s", "above the largest allowed value, 10"),
        (["--width-s", "nan"], "--width-s", "finite"),
        (["--count", "0"], "--count", ""),
        (["--width-s", "1", "--count", "3"], "--count", "more counts than seconds"),
    ):
        r = CliRunner().invoke(app, args)
        assert r.exit_code == 2, (args, r.output)
        assert flag in r.output and words in r.output, (args, r.output)


def test_an_exclusive_bound_has_no_option() -> None:
    class Open(Frozen):
        x: float = Field(default=1.0, gt=0.0)

    with pytest.raises(TypeError, match="inclusive"):
        model_options(Open)


def test_the_gates_flags_are_its_threshold_and_policy_records() -> None:
    from alphagate.cli import app
    from alphagate.gate.rules import EvidencePolicy, Thresholds

    gate = typer.main.get_command(app).commands["gate"]  # type: ignore[attr-defined]
    flags = {o for p in gate.params for o in p.opts}
    for record in (Thresholds, EvidencePolicy):
        for name, field in record.model_fields.items():
            (p,) = [p for p in gate.params if p.name == name]
            assert p.opts == ["--" + name.replace("_", "-")] and p.help == field.description
    assert {"--min-alpha", "--max-itl-per-token-p99-ms", "--min-drafts", "--max-age"} <= flags


def _own_options(command: typer.models.CommandInfo) -> list[str]:
    """The options and arguments a verb's function declares itself: not the context, and not
    a group's (a dataclass of options, or a config record)."""
    import dataclasses
    import inspect
    import typing

    from pydantic import BaseModel

    assert command.callback is not None
    fn = inspect.unwrap(command.callback)
    hints = typing.get_type_hints(fn, include_extras=True)
    own = []
    for name in inspect.signature(fn).parameters:
        kind = hints.get(name)
        grouped = isinstance(kind, type) and (
            dataclasses.is_dataclass(kind) or issubclass(kind, BaseModel)
        )
        if kind is not typer.Context and not grouped:
            own.append(name)
    return own


def _verbs(app: typer.Typer, prefix: str = "") -> dict[str, list[str]]:
    verbs = {
        prefix + (c.name or getattr(c.callback, "__name__", "?")): _own_options(c)
        for c in app.registered_commands
    }
    for g in app.registered_groups:
        assert g.typer_instance is not None
        verbs |= _verbs(g.typer_instance, f"{prefix}{g.name} ")
    return verbs


def test_no_verb_declares_more_than_twelve_options_of_its_own() -> None:
    """Past a dozen, a verb's flags are grouped (a coherent set declared once as a group)."""
    from alphagate.cli import VERBS, app

    verbs = _verbs(app)
    assert {v.split()[0] for v in verbs} == set(VERBS)
    assert len(verbs["train-head"]) > 0 and len(verbs["plan"]) > 0
    crowded = {v: len(own) for v, own in verbs.items() if len(own) > 12}
    assert not crowded, f"verbs with more than 12 options of their own: {crowded}"
