"""Bad values, as errors that name their flag: exit 2 with the message (and, with ``--json``, the
error as JSON: :mod:`alphagate.cli._app`), and the parsers and checks of the values the verbs
share (finite numbers within bounds, comma-separated lists)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NoReturn, TypeVar

import typer
from pydantic import ValidationError

from alphagate.core.errors import ConfigError, validation_problem

N = TypeVar("N", int, float)

__all__ = [
    "DEPLOYMENT_FLAGS",
    "bounded",
    "config_error",
    "deployment_errors",
    "fail",
    "finite_float",
    "flag_errors",
    "flag_of",
    "float_list",
    "int_list",
]


def flag_of(field: str) -> str:
    """The flag of a config field: fields are named as their flags (``min_alpha`` ↔
    ``--min-alpha``)."""
    return "--" + field.replace("_", "-")


def fail(message: str, flag: str | None = None) -> NoReturn:
    """A bad value: exit 2 with the message, naming the flag."""
    raise typer.BadParameter(message, param_hint=flag)


def config_error(exc: ConfigError | ValidationError, flag: str | None = None) -> NoReturn:
    """A validation error from a lower layer, as a flag error; without ``flag``, the flag of the
    config field it names (fields are named as their flags: ``candidate_url`` ↔
    ``--candidate-url``), or of the :class:`ConfigError`'s ``field`` (one that a model
    validator raised, too)."""
    if isinstance(exc, ValidationError):
        if flag is None:
            flag = _flag_of_problem(exc)
        fail(validation_problem(exc, where="").removeprefix(": "), flag)
    if flag is None and exc.field is not None:
        flag = flag_of(exc.field)
    fail(str(exc), flag)


def _flag_of_problem(exc: ValidationError) -> str | None:
    """The flag of pydantic's first problem: its field's, else that of the
    :class:`ConfigError` a model validator raised."""
    errors = exc.errors()
    if not errors:
        return None
    loc = errors[0]["loc"]
    if loc and isinstance(loc[0], str):
        return flag_of(loc[0])
    raised = errors[0].get("ctx", {}).get("error")
    if isinstance(raised, ConfigError) and raised.field is not None:
        return flag_of(raised.field)
    return None


def finite_float(
    flag: str, lo: float | None = None, hi: float | None = None
) -> Callable[[float | None], float | None]:
    """A Typer callback for ``flag``: a finite number (no NaN, no infinity) within [lo, hi]."""

    def check(value: float | None) -> float | None:
        if value is None:
            return value
        if not math.isfinite(value):
            fail(f"must be a finite number, got {value}", flag)
        if lo is not None and value < lo:
            fail(f"{value:g} is below the smallest allowed value, {lo:g}", flag)
        if hi is not None and value > hi:
            fail(f"{value:g} is above the largest allowed value, {hi:g}", flag)
        return value

    return check


def bounded(flag: str, *aliases: str, lo: float | None = None, hi: float | None = None,
            **settings: Any) -> Any:  # fmt: skip
    """A Typer option for a finite number within [lo, hi], which :func:`finite_float` checks
    naming ``flag`` (``settings``: the rest of ``typer.Option``'s, help included)."""
    return typer.Option(flag, *aliases, callback=finite_float(flag, lo, hi), **settings)


def _no_empty_entry(text: str, flag: str) -> None:
    """``''``, ``1,,2`` and ``4,`` are refused: an empty entry is a typo, not a level."""
    if not text.strip():
        fail("the list is empty", flag)
    if any(not part.strip() for part in text.split(",")):
        fail(f"{text!r} has an empty entry", flag)


def _numbers(text: str, flag: str, kind: Callable[[str], N], what: str) -> list[N]:
    """``text``'s comma-separated entries as ``kind`` (``what``: their name, for the message)."""
    _no_empty_entry(text, flag)
    try:
        values = [kind(x) for x in text.split(",") if x.strip()]
    except ValueError:
        fail(f"{text!r} is not a comma-separated list of {what}", flag)
    if not values:
        fail("the list is empty", flag)
    return values


def float_list(
    text: str, flag: str, lo: float | None = None, hi: float | None = None
) -> list[float]:
    """``0.4,0.5,0.7`` → finite floats in [lo, hi]."""
    values = _numbers(text, flag, float, "numbers")
    for x in values:
        if not math.isfinite(x):
            fail(f"{x} is not a finite number", flag)
        if (lo is not None and x < lo) or (hi is not None and x > hi):
            fail(f"{x:g} is outside [{lo}, {hi}]", flag)
    return values


def int_list(text: str, flag: str, lo: int = 1, hi: int = 1_000_000) -> list[int]:
    """``1,16,64`` → integers in [lo, hi]."""
    values = _numbers(text, flag, int, "integers")
    bad = [v for v in values if not lo <= v <= hi]
    if bad:
        fail(f"{bad[0]} is outside [{lo}, {hi:,}]", flag)
    return values


@contextmanager
def flag_errors(flag: str | None = None) -> Iterator[None]:
    """A :class:`ConfigError` or ``ValidationError`` raised inside, as a flag error
    (:func:`config_error`): ``flag``, else the flag of the field at fault."""
    try:
        yield
    except (ConfigError, ValidationError) as exc:
        config_error(exc, flag)


#: the flags a deployment that cannot be modelled is blamed on (a preset, or a size that does
#: not fit)
DEPLOYMENT_FLAGS = "--model/--gpu/--tp/--dtype"


@contextmanager
def deployment_errors() -> Iterator[None]:
    """A lower layer's errors while it models the deployment: a ``ValidationError`` names its
    field's flag, a :class:`ConfigError` the deployment flags (:data:`DEPLOYMENT_FLAGS`)."""
    try:
        yield
    except ValidationError as exc:
        config_error(exc)
    except ConfigError as exc:
        config_error(exc, DEPLOYMENT_FLAGS)
