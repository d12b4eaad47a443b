"""Shell commands printed so that a copy from the terminal runs: never broken inside a token.

A command that fits the width is one line. A longer one is broken only between arguments, each
line but the last ending in `` \\`` (the shell joins them), a flag kept with its value; a token
longer than the width (a quoted JSON config) is printed whole on its own line, and the terminal
may fold it on screen but copies it as one line. Rich never re-wraps the result
(``no_wrap``, ``overflow="ignore"``).
"""

from __future__ import annotations

import shlex

from rich.console import Console, ConsoleOptions, RenderResult
from rich.text import Text

__all__ = ["ShellCommand", "wrap_command"]

INDENT = "    "


def _groups(tokens: list[str]) -> list[str]:
    """Tokens joined into unbreakable groups: a ``--flag`` with the value that follows it."""
    out: list[str] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        nxt = tokens[i + 1] if i + 1 < len(tokens) else None
        if tok.startswith("-") and nxt is not None and not nxt.startswith("-"):
            out.append(f"{tok} {nxt}")
            i += 2
        else:
            out.append(tok)
            i += 1
    return out


def wrap_command(command: str, width: int) -> str:
    """``command`` (a shell line) as lines of at most ``width`` characters where arguments allow,
    broken only between arguments with `` \\`` continuations."""
    if len(command) <= width:
        return command
    try:
        tokens = [shlex.quote(t) for t in shlex.split(command)]
    except ValueError:  # not shell syntax: leave it whole
        return command
    lines: list[str] = []
    line = ""
    for group in _groups(tokens):
        if not line:
            line = group
        elif len(line) + 1 + len(group) + 2 <= width:
            line += " " + group
        else:
            lines.append(line + " \\")
            line = INDENT + group
    lines.append(line)
    return "\n".join(lines)


class ShellCommand:
    """A command rendered for the console's width by :func:`wrap_command`."""

    def __init__(self, command: str, style: str = "") -> None:
        self.command = command
        self.style = style

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        text = wrap_command(self.command, options.max_width)
        yield Text(text, style=self.style, no_wrap=True, overflow="ignore")
