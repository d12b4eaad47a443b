"""Errors a user can cause. Each message names the flag, field, file or line that was wrong."""

from __future__ import annotations

from pydantic import ValidationError

__all__ = ["ConfigError", "SpecError", "invalid", "validation_problem"]


class ConfigError(ValueError):
    """Invalid user configuration; the message names the field or flag, and ``field`` (when
    known) is the config field at fault, so that the CLI names its flag without reading the
    message (fields are named as their flags: ``api_key`` ↔ ``--api-key``)."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class SpecError(ConfigError):
    """A preset name or spec file that cannot be used; the message says what and where."""


def validation_problem(exc: ValidationError, where: str = "the top level") -> str:
    """``field.path: message`` for the first problem pydantic found (its "Value error, " prefix
    dropped), with a count of the others."""
    first = exc.errors()[0]
    loc = ".".join(str(x) for x in first["loc"]) or where
    msg = str(first["msg"]).removeprefix("Value error, ")
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{loc}: {msg}{more}"


def invalid(source: object, what: str, exc: ValidationError) -> ConfigError:
    """``SOURCE: not a valid WHAT (field: message)`` — a file that parsed but is not the record."""
    return ConfigError(f"{source}: not a valid {what} ({validation_problem(exc)})")
