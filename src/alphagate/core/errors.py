"""Errors a user can cause. Each message names the flag, field, file or line that was wrong."""

from __future__ import annotations

__all__ = ["ConfigError", "SpecError"]


class ConfigError(ValueError):
    """Invalid user configuration; the message names the field or flag."""


class SpecError(ConfigError):
    """A preset name or spec file that cannot be used; the message says what and where."""
