"""The Typer application, its error policy, and output: tables and JSON.

Errors: a bad flag or value exits 2 with a message that names the flag
(:mod:`alphagate.cli._check` raises them); with ``--json`` the same error is also printed on
stdout as ``{"schema": ..., "error": {...}}`` so that a script always gets JSON. JSON never
contains NaN or infinity (they become ``null``). Ctrl-C exits 130.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Annotated, Any, TypeVar

import typer
from pydantic import BaseModel
from rich.console import Console, RenderableType
from typer.core import TyperGroup

from alphagate import __version__
from alphagate.core.records import RESULTS_SCHEMA, Results

try:  # Typer ≥ 0.23 ships its own copy of Click; its exceptions are the ones raised
    from typer._click import exceptions as click_exceptions
except ImportError:  # pragma: no cover - older Typer on the installed Click
    from click import exceptions as click_exceptions  # type: ignore[no-redef]

__all__ = [
    "JsonOpt",
    "app",
    "console",
    "err_console",
    "json_dumps",
    "print_json",
    "show",
    "status",
]

console = Console(highlight=False)
#: The command line :func:`alphagate.cli.main` was given (None when the app is invoked some
#: other way, e.g. by click's test runner): what a verb re-runs in a child process.
COMMAND_LINE: list[str] | None = None
err_console = Console(stderr=True, highlight=False)
R = TypeVar("R", bound=BaseModel)


def _clean(obj: Any) -> Any:
    """Non-finite floats → None, recursively (JSON has no NaN or infinity)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    return obj


def json_dumps(payload: Any) -> str:
    """Strict JSON (no NaN, no Infinity), indented."""
    return json.dumps(_clean(payload), indent=2, allow_nan=False, ensure_ascii=False)


def print_json(payload: Any) -> None:
    typer.echo(json_dumps(payload))


def show(verb: str, answer: R, as_json: bool, render: Callable[[R], RenderableType]) -> None:
    """Print one result: its table, or its results JSON (schema + verb + fields)."""
    if as_json:
        if isinstance(answer, Results):
            print_json(answer.payload())
        else:
            print_json({"schema": RESULTS_SCHEMA, "verb": verb, **answer.model_dump(mode="json")})
    else:
        console.print(render(answer))


def status(text: str, quiet: bool) -> AbstractContextManager[object]:
    """A spinner on the terminal while long work runs; nothing with ``--json``."""
    return nullcontext() if quiet else console.status(text, spinner="dots")


class _Group(TyperGroup):
    """Typer's group, with one error policy: message on stderr, JSON on stdout with --json."""

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        argv = list(sys.argv[1:] if args is None else args)
        try:
            rv = super().main(
                args=argv,
                prog_name=prog_name or "alphagate",
                complete_var=complete_var,
                standalone_mode=False,
                **extra,
            )
            code = rv if isinstance(rv, int) else 0
        except click_exceptions.ClickException as exc:
            exc.show()
            if "--json" in argv:
                param = getattr(exc, "param_hint", None) or getattr(
                    getattr(exc, "param", None), "opts", None
                )
                if isinstance(param, list | tuple):
                    param = param[0] if param else None
                print_json(
                    {
                        "schema": RESULTS_SCHEMA,
                        "error": {
                            "type": type(exc).__name__,
                            "message": exc.format_message(),
                            "param": param if isinstance(param, str) else None,
                            "exit_code": exc.exit_code,
                        },
                    }
                )
            code = exc.exit_code
        except (typer.Abort, KeyboardInterrupt):
            err_console.print("interrupted")
            code = 130
        if standalone_mode:
            sys.exit(code)
        return code


app = typer.Typer(
    name="alphagate",
    cls=_Group,
    help=(
        "Measure α before you flip the flag. Model, simulate, benchmark and plan speculative "
        "decoding (EAGLE-3, EAGLE, draft models, n-gram, MTP) for vLLM and SGLang.\n\n"
        "Acceptance quantities are never mixed: α = conditional per-token acceptance "
        "(Leviathan), ρ = draft acceptance rate = accepted ÷ drafted (vLLM), τ = mean "
        "acceptance length incl. the bonus token."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"alphagate {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Show the version and exit."
        ),
    ] = False,
) -> None:
    """alphagate command line."""


JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object instead of tables.")]
