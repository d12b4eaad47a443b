"""The documentation's reference pages, generated from the code they describe so that they cannot
drift from it: every verb and flag from the CLI's own command tree (click, as Typer built it), and
the results JSON of every verb from its pydantic model's schema."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["cli_reference", "results_reference"]


# Typer builds its commands on a click of its own (``typer._click``): they are read by their
# attributes here, not by isinstance against a separately installed click.
def _is_group(cmd: Any) -> bool:
    return isinstance(getattr(cmd, "commands", None), dict)


def _commands(group: Any, prefix: str) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for name in sorted(group.commands):
        cmd = group.commands[name]
        if getattr(cmd, "hidden", False):
            continue
        path = f"{prefix} {name}".strip()
        out.append((path, cmd))
        if _is_group(cmd):
            out += _commands(cmd, path)
    return out


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _type_text(annotation: Any) -> str:
    """``int | None`` → int, ``Literal['a', 'b']`` → a \\| b, ``list[str]`` → str, repeated."""
    import types
    import typing

    origin = typing.get_origin(annotation)
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if origin is typing.Literal:
        return " | ".join(str(a) for a in typing.get_args(annotation))
    if origin in (typing.Union, types.UnionType) and len(args) == 1:
        return _type_text(args[0])
    if origin is list and args:
        return f"{_type_text(args[0])}, repeated"
    return getattr(annotation, "__name__", str(annotation)).replace("PosixPath", "path")


def _param_row(p: Any) -> str | None:
    if getattr(p, "hidden", False):
        return None
    if p.param_type_name == "argument":
        names = "`" + str(p.metavar or p.name or "").upper() + "`"
        help_text = getattr(p, "help", None) or ""
    else:
        names = ", ".join(f"`{o}`" for o in [*p.opts, *p.secondary_opts])
        help_text = p.help or ""
    desc = getattr(p, "type_descriptor", None)
    kind = "flag" if getattr(p, "is_flag", False) else _type_text(getattr(desc, "annotation", str))
    default = p.default
    shown = (
        ""
        if default is None or default is False or callable(default) or default == ()
        else f"`{default}`"
    )
    env = getattr(p, "envvar", None)
    if env:
        help_text += f" (env {env})"
    return f"| {names} | {_cell(kind)} | {shown} | {_cell(help_text)} |"


def cli_reference() -> str:
    """Every verb with its help and a table of its flags, as markdown."""
    import typer.main

    from alphagate.cli import app

    root = typer.main.get_command(app)
    lines = [
        "# Every flag",
        "",
        "Generated from the command tree itself (`alphagate --help` for each verb); the tables",
        "cannot drift from the code. Exit codes: 0 done or pass, 1 fail, 2 bad input, 3 not",
        "enough evidence yet, 130 interrupted.",
        "",
    ]
    for path, cmd in _commands(root, "alphagate"):
        lines += [f"## `{path}`", ""]
        if cmd.help:
            lines += [" ".join(cmd.help.split("\n\n")[0].split()), ""]
        if _is_group(cmd):
            continue
        rows = [r for p in cmd.params if (r := _param_row(p)) is not None]
        if rows:
            lines += ["| flag | type | default | what it does |", "|---|---|---|---|", *rows, ""]
    return "\n".join(lines) + "\n"


def _result_models() -> list[tuple[str, type[Any]]]:
    from alphagate.bench.records import BenchResult
    from alphagate.gate.evaluate import GateResult
    from alphagate.measure.results import MeasureResult
    from alphagate.plan.records import Plan
    from alphagate.sim.sweep import SweepResult
    from alphagate.specs.calibration import CalibrationProfile

    return [
        ("plan", Plan),
        ("bench", BenchResult),
        ("measure live | prometheus | logs | offline | bench", MeasureResult),
        ("gate", GateResult),
        ("simulate", SweepResult),
        ("calibrate (the profile)", CalibrationProfile),
    ]


def _fields_table(schema: dict[str, Any]) -> list[str]:
    props = schema.get("properties", {})
    required = set(schema.get("required", []))
    rows = ["| field | type | required | meaning |", "|---|---|---|---|"]
    for name, spec in props.items():
        kind = spec.get("type") or (spec["$ref"].rsplit("/", 1)[-1] if "$ref" in spec else "any of")
        rows.append(
            f"| `{name}` | {_cell(str(kind))} | {'yes' if name in required else ''} | "
            f"{_cell(spec.get('description', ''))} |"
        )
    return rows


def results_reference() -> str:
    """Each verb's results JSON (schema ``alphagate.results/v1``): its top-level fields, and its
    whole JSON Schema, generated from the pydantic model that writes and reads it."""
    lines = [
        "# Results JSON",
        "",
        'Every results file carries `"schema": "alphagate.results/v1"` and the `verb` that wrote',
        "it. Generated from the pydantic models that write and read them.",
        "",
    ]
    for verb, model in _result_models():
        schema = model.model_json_schema(mode="serialization")
        lines += [f"## `{verb}` — `{model.__name__}`", ""]
        doc = (model.__doc__ or "").strip().split("\n\n")[0]
        if doc:
            lines += [" ".join(doc.split()), ""]
        lines += _fields_table(schema)
        lines += [
            "",
            '??? note "JSON Schema"',
            "    ```json",
            *("    " + ln for ln in json.dumps(schema, indent=1).splitlines()),
            "    ```",
            "",
        ]
    return "\n".join(lines) + "\n"
