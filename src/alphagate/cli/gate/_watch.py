"""The gate's judging loop: once, or ``--watch`` every interval until a fail; the decision
shown, written and turned into the exit code."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import typer

from alphagate.cli._app import console, err_console, json_dumps, print_json
from alphagate.cli._check import config_error, fail
from alphagate.cli._files import atomic_write_text, sigterm_as_interrupt

if TYPE_CHECKING:
    from alphagate.cli.gate._flags import LiveFlags
    from alphagate.gate import GateResult, RuleSet
    from alphagate.gate.sources import EvidenceFiles, LiveSource

__all__ = ["judge"]


def _watch_line(result: GateResult) -> str:
    from alphagate.core.fmt import num

    parts = []
    for r in result.results:
        v = num(r.value, ".3g")
        parts.append(f"{r.rule.describe()}: {v} {r.result}")
    return f"{time.strftime('%H:%M:%S')} {result.decision.upper()}  " + "; ".join(parts)


class _Interrupted(Exception):
    """Ctrl-C or SIGTERM while watching; carries the last decision, if any."""

    def __init__(self, result: GateResult | None) -> None:
        super().__init__()
        self.result = result


def _evaluate_once(
    rs: RuleSet, files: EvidenceFiles, live: LiveSource | None, watching: bool
) -> GateResult:
    from alphagate.core.errors import ConfigError
    from alphagate.gate import evaluate
    from alphagate.measure.results import MeasureError

    try:
        ev = files.load()
        if live is not None:
            live.add_to(ev, watching)
            if files.served_model is not None:
                from alphagate.gate.consistency import check_deployment

                check_deployment(files.served_model, ev.models)
        from alphagate.gate.consistency import check_definitions

        check_definitions(
            rs.rules, definition=ev.definition, source=ev.acceptance_source, engine=ev.engine
        )
    except MeasureError as exc:  # a ConfigError too: caught first
        if watching and exc.exit_code == 3:  # the source went quiet: judged, not a bad input
            from alphagate.gate import no_evidence

            return no_evidence(rs, str(exc), [])
        fail(str(exc), live.flag if live is not None else "--url")
    except ConfigError as exc:
        config_error(exc, "--measure/--bench/--baseline/--candidate")
    if not ev.sources and not ev.acceptance and live is None:
        fail(
            "no evidence: give --measure, --bench, --baseline/--candidate, --url or --prometheus",
            "--measure",
        )
    return evaluate(rs, ev)


def _loop(
    rs: RuleSet, files: EvidenceFiles, live: LiveSource | None, flags: LiveFlags
) -> GateResult:
    """Evaluate once, or with --watch every ``interval`` until a fail or ``duration``."""
    start = time.monotonic()
    result: GateResult | None = None
    watch = flags.watch
    try:
        while True:
            if watch and ((live is not None and live.accumulates) or result is not None):
                time.sleep(flags.interval)  # /metrics: an interval past the first scrape first
            result = _evaluate_once(rs, files, live, watch)
            if watch:
                err_console.print(_watch_line(result), markup=False, highlight=False)
            if (
                not watch
                or result.decision == "fail"
                or result.source_lost is not None
                or (flags.duration is not None and time.monotonic() - start >= flags.duration)
            ):
                return result
    except KeyboardInterrupt:
        raise _Interrupted(result) from None


def _show(result: GateResult, as_json: bool, out: Path | None) -> None:
    from alphagate.report.measure import render_gate

    if out is not None:
        atomic_write_text(out, json_dumps(result.payload()) + "\n", "--out")
    if as_json:
        print_json(result.payload())
    else:
        console.print(render_gate(result))


def judge(
    rs: RuleSet,
    files: EvidenceFiles,
    live: LiveSource | None,
    flags: LiveFlags,
    *,
    as_json: bool,
    out: Path | None,
) -> NoReturn:
    """Judge, show the decision (the last one when interrupted) and exit with its code."""
    from alphagate.measure.results import MeasureError

    try:
        with sigterm_as_interrupt():
            if flags.watch and live is not None:
                live.start()
            result = _loop(rs, files, live, flags)
    except MeasureError as exc:
        fail(str(exc), live.flag if live is not None else "--url")
    except _Interrupted as stop:
        if stop.result is not None:
            _show(stop.result, as_json, out)
        raise typer.Exit(130) from None
    _show(result, as_json, out)
    raise typer.Exit(result.exit_code)
