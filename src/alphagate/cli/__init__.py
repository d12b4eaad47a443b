"""The ``alphagate`` command line: one thin module per verb — parse flags into the typed config,
call one function of a lower layer, render the result or dump its JSON.

Only this package prints, reads the environment, writes files or sets exit codes. Heavy
libraries are imported inside the verbs, so that ``alphagate model … --json`` starts instantly.
"""

from alphagate.cli import (
    bench,
    calibrate,
    demo,
    gate,
    measure,
    model,
    plan,
    report,
    simulate,
    twin,
)
from alphagate.cli._app import app, main

__all__ = [
    "app",
    "bench",
    "calibrate",
    "demo",
    "gate",
    "main",
    "measure",
    "model",
    "plan",
    "report",
    "simulate",
    "twin",
]
