"""Option groups: a frozen dataclass whose fields are Typer options (``Annotated[T,
typer.Option(...)]`` with their defaults) is declared once and taken whole by every verb that
needs it — the verb's parameter of that type becomes the group's options on the command line, and
the verb receives one instance of it::

    @app.command("simulate")
    @takes_groups
    def simulate_cmd(ctx: typer.Context, dep: DeploymentFlags, ks: KOpt = "1,3,5") -> None: ...

The options keep their field names as parameter names, so ``ctx.params`` and
``ctx.get_parameter_source`` see them as if they were declared one by one.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["group_fields", "takes_groups"]

F = TypeVar("F", bound=Callable[..., Any])


def group_fields(group: type[Any]) -> list[inspect.Parameter]:
    """The options of a group, as the parameters a Typer command declares."""
    hints = typing.get_type_hints(group, include_extras=True)
    return [
        inspect.Parameter(
            f.name,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            default=f.default,
            annotation=hints[f.name],
        )
        for f in dataclasses.fields(group)
    ]


def takes_groups(fn: F) -> F:
    """``fn`` with each parameter whose annotation is a dataclass replaced by that group's
    options; calls build the group from them."""
    hints = typing.get_type_hints(fn, include_extras=True)
    params: list[inspect.Parameter] = []
    groups: dict[str, type[Any]] = {}
    for p in inspect.signature(fn).parameters.values():
        kind = hints.get(p.name)
        if isinstance(kind, type) and dataclasses.is_dataclass(kind):
            groups[p.name] = kind
            params.extend(group_fields(kind))
        else:
            params.append(p.replace(annotation=hints.get(p.name, p.annotation)))
    names = [q.name for q in params]
    clash = {n for n in names if names.count(n) > 1}
    if clash:
        raise TypeError(f"{fn.__name__}: options declared twice: {sorted(clash)}")
    if not groups:
        raise TypeError(f"{fn.__name__}: no option group among its parameters")

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        for name, group in groups.items():
            kwargs[name] = group(**{f.name: kwargs.pop(f.name) for f in dataclasses.fields(group)})
        return fn(*args, **kwargs)

    wrapper.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {q.name: q.annotation for q in params}
    return typing.cast(F, wrapper)
