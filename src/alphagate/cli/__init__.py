"""The ``alphagate`` command line: one thin module per verb — parse flags into the typed config,
call one function of a lower layer, render the result or dump its JSON.

Only this package prints, reads the environment, writes files or sets exit codes. Heavy
libraries are imported inside the verbs, so that ``alphagate model … --json`` starts instantly.

A verb's module registers its command on :data:`alphagate.cli._app.app` when imported.
:func:`main` imports only the module of the verb on its command line (Typer then builds one
command's parameters, not twenty: ~0.1 s of every start); ``alphagate --help``, an unknown verb,
and ``from alphagate.cli import app`` get every verb.

It also runs numpy's OpenBLAS on one thread unless ``OPENBLAS_NUM_THREADS`` is set: OpenBLAS
starts a thread per extra core when numpy is imported, and each spins for ~0.1 s before it
sleeps (``blas_thread_server``) — 0.08 CPU-seconds of every command on two cores, more on a big
machine — for matrix products the verbs do not need (the largest, a bootstrap's resample
weights times per-request counts, is exact in any order). torch uses its own MKL and threads.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

__all__ = ["VERBS", "app", "main"]

#: every verb, each named as its module that registers it (``-`` for ``_``; imported in this order)
VERBS: tuple[str, ...] = (
    "bench",
    "calibrate",
    "demo",
    "explain",
    "gate",
    "measure",
    "model",
    "plan",
    "report",
    "simulate",
    "train-head",
    "twin",
)


def _load(verbs: list[str]) -> Any:
    for verb in verbs:
        importlib.import_module(f"alphagate.cli.{verb.replace('-', '_')}")
    from alphagate.cli._app import app

    return app


def _verb(argv: list[str]) -> str | None:
    """The verb a command line names: its first argument, when that is one."""
    return argv[0] if argv and argv[0] in VERBS else None


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy loads OpenBLAS
    args = sys.argv[1:] if argv is None else argv
    verb = _verb(args)
    try:
        from alphagate.cli import _app

        _app.COMMAND_LINE = list(args)
        _load([verb] if verb is not None else list(VERBS))(args=args)
    except KeyboardInterrupt:  # Ctrl-C before a verb's own handler is installed: no traceback
        sys.stderr.write("interrupted\n")
        raise SystemExit(130) from None


def __getattr__(name: str) -> Any:
    if name == "app":  # the whole command line, every verb registered
        return _load(list(VERBS))
    raise AttributeError(f"module 'alphagate.cli' has no attribute {name!r}")
