"""Option groups: a set of options declared once and taken whole by every verb that needs it — the
verb's parameter of that type becomes the group's options on the command line, and the verb
receives one instance of it::

    @app.command("simulate")
    @takes_groups
    def simulate_cmd(ctx: typer.Context, dep: DeploymentFlags, ks: KOpt = "1,3,5") -> None: ...

A group is either

- a frozen dataclass whose fields are Typer options (``Annotated[T, typer.Option(...)]`` with
  their defaults), for flags that are not one config record's fields; or
- a pydantic config record (:class:`~alphagate.core.records.Frozen`): its options are generated
  from its fields (:func:`model_options`) — one declaration per field, with its help — and the
  verb receives the validated record, a cross-field rule of its model validators included.

The options keep their field names as parameter names, so ``ctx.params`` and
``ctx.get_parameter_source`` see them as if they were declared one by one. Every parameter of the
command becomes keyword-only (Typer passes them by name), so that a group's required option may
follow an option with a default.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import types
import typing
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import typer
from pydantic import BaseModel, ValidationError

from alphagate.cli._check import bounded, config_error, flag_of

__all__ = ["given", "group_fields", "model_options", "takes_groups"]

F = TypeVar("F", bound=Callable[..., Any])


def _bounds(metadata: list[Any]) -> tuple[Any, Any]:
    """A field's inclusive bounds (``ge``, ``le``); an exclusive one has no flag equivalent."""
    if any(hasattr(m, "gt") or hasattr(m, "lt") for m in metadata):
        raise TypeError("an option is generated from inclusive bounds (ge, le) only")
    lo = next((m.ge for m in metadata if hasattr(m, "ge")), None)
    hi = next((m.le for m in metadata if hasattr(m, "le")), None)
    return lo, hi


def _scalar(annotation: Any) -> Any:
    """``float | None`` → float."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        (one,) = [a for a in typing.get_args(annotation) if a is not type(None)]
        return one
    return annotation


def model_options(model: type[BaseModel]) -> list[inspect.Parameter]:
    """The options of a config record, one per field: flag ``--field-name``
    (:func:`~alphagate.cli._check.flag_of`), help the field's ``description``, its default, and
    its ``ge``/``le`` as the option's bounds (a float's checked finite by
    :func:`~alphagate.cli._check.bounded`)."""
    params = []
    for name, field in model.model_fields.items():
        flag = flag_of(name)
        lo, hi = _bounds(field.metadata)
        kind = _scalar(field.annotation)
        if kind is float:
            option = bounded(flag, lo=lo, hi=hi, help=field.description)
        elif kind is int or (lo is None and hi is None):
            option = typer.Option(flag, min=lo, max=hi, help=field.description)
        else:
            raise TypeError(f"{model.__name__}.{name}: bounds on a {kind}")
        params.append(
            inspect.Parameter(
                name,
                inspect.Parameter.KEYWORD_ONLY,
                default=inspect.Parameter.empty
                if field.is_required()
                else field.get_default(call_default_factory=True),
                annotation=Annotated[field.annotation, option],
            )
        )
    return params


def group_fields(group: type[Any]) -> list[inspect.Parameter]:
    """The options of a group, as the parameters a Typer command declares."""
    if issubclass(group, BaseModel):
        return model_options(group)
    hints = typing.get_type_hints(group, include_extras=True)
    return [
        inspect.Parameter(
            f.name,
            inspect.Parameter.KEYWORD_ONLY,
            default=inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default,
            annotation=hints[f.name],
        )
        for f in dataclasses.fields(group)
    ]


def _is_group(kind: object) -> bool:
    if not isinstance(kind, type):
        return False
    return dataclasses.is_dataclass(kind) or issubclass(kind, BaseModel)


def _build(group: type[Any], values: dict[str, Any]) -> Any:
    """One instance of ``group`` from its options' values; a config record validated (a
    violated rule exits 2 naming the field's flag)."""
    if not issubclass(group, BaseModel):
        return group(**values)
    try:
        return group(**values)
    except ValidationError as exc:
        config_error(exc)


def takes_groups(fn: F) -> F:
    """``fn`` with each parameter whose annotation is a group (a dataclass, or a config record)
    replaced by that group's options; calls build the group from them."""
    hints = typing.get_type_hints(fn, include_extras=True)
    params: list[inspect.Parameter] = []
    groups: dict[str, tuple[type[Any], list[str]]] = {}
    for p in inspect.signature(fn).parameters.values():
        kind = hints.get(p.name)
        if _is_group(kind):
            assert isinstance(kind, type)
            options = group_fields(kind)
            groups[p.name] = (kind, [q.name for q in options])
            params.extend(options)
        else:
            params.append(
                p.replace(
                    kind=inspect.Parameter.KEYWORD_ONLY,
                    annotation=hints.get(p.name, p.annotation),
                )
            )
    names = [q.name for q in params]
    clash = {n for n in names if names.count(n) > 1}
    if clash:
        raise TypeError(f"{fn.__name__}: options declared twice: {sorted(clash)}")
    if not groups:
        raise TypeError(f"{fn.__name__}: no option group among its parameters")

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        for name, (group, fields) in groups.items():
            kwargs[name] = _build(group, {f: kwargs.pop(f) for f in fields})
        return fn(*args, **kwargs)

    wrapper.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {q.name: q.annotation for q in params}
    return typing.cast(F, wrapper)


def given(ctx: typer.Context, param: str) -> bool:
    """Whether the parameter ``param`` (its Python name) was typed on the command line or set
    from the environment, not left at its default."""
    source = ctx.get_parameter_source(param)
    return source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP")
