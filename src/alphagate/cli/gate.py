"""``alphagate gate``: rules judged on measured evidence, as an exit code for CI/CD and canaries.

Exit codes: 0 pass; 1 fail; 2 bad input; 3 not enough evidence yet (too few drafts or requests,
or an interval that straddles a threshold) — never a pass; 130 interrupted while watching.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from alphagate.cli._app import (
    JsonOpt,
    app,
    config_error,
    console,
    err_console,
    fail,
    finite_float,
    json_dumps,
    print_json,
)
from alphagate.cli._files import atomic_write_text, sigterm_as_interrupt
from alphagate.cli._options import check_no_overwrite, check_output_path

if TYPE_CHECKING:
    from alphagate.gate import GateResult, RuleSet
    from alphagate.gate.sources import EvidenceFiles, LiveSource


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
    rs: RuleSet,
    files: EvidenceFiles,
    live: LiveSource | None,
    watch: bool,
    interval: float,
    duration: float | None,
) -> GateResult:
    """Evaluate once, or with --watch every ``interval`` until a fail or ``duration``."""
    start = time.monotonic()
    result: GateResult | None = None
    try:
        while True:
            if watch and ((live is not None and live.accumulates) or result is not None):
                time.sleep(interval)  # /metrics: an interval past the first scrape first
            result = _evaluate_once(rs, files, live, watch)
            if watch:
                err_console.print(_watch_line(result), markup=False, highlight=False)
            if (
                not watch
                or result.decision == "fail"
                or result.source_lost is not None
                or (duration is not None and time.monotonic() - start >= duration)
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


@app.command("gate", short_help="Pass, fail, or not enough evidence: an exit code.")
def gate_cmd(
    plan: Annotated[
        Path | None,
        typer.Option("--plan", help="Take the thresholds of a plan's gate (plan JSON)."),
    ] = None,
    rules: Annotated[Path | None, typer.Option("--rules", help="A JSON rules file.")] = None,
    min_draft_acceptance_rate: Annotated[
        float | None,
        typer.Option(
            "--min-draft-acceptance-rate",
            callback=finite_float("--min-draft-acceptance-rate", 0.0, 1.0),
            help="ρ (accepted ÷ drafted) at least.",
        ),
    ] = None,
    min_alpha: Annotated[
        float | None,
        typer.Option(
            "--min-alpha",
            callback=finite_float("--min-alpha", 0.0, 1.0),
            help="Conditional α at least.",
        ),
    ] = None,
    min_mean_acceptance_length: Annotated[
        float | None,
        typer.Option(
            "--min-mean-acceptance-length",
            callback=finite_float("--min-mean-acceptance-length", 1.0, 65.0),
            help="τ at least.",
        ),
    ] = None,
    min_throughput_speedup: Annotated[
        float | None,
        typer.Option(
            "--min-throughput-speedup",
            callback=finite_float("--min-throughput-speedup", 0.0, 100.0),
            help="Candidate ÷ baseline output tokens/s at least.",
        ),
    ] = None,
    min_tpot_speedup: Annotated[
        float | None,
        typer.Option(
            "--min-tpot-speedup",
            callback=finite_float("--min-tpot-speedup", 0.0, 100.0),
            help="Baseline ÷ candidate mean TPOT at least.",
        ),
    ] = None,
    min_itl_p99: Annotated[
        float | None,
        typer.Option(
            "--min-itl-per-token-p99-speedup",
            callback=finite_float("--min-itl-per-token-p99-speedup", 0.0, 100.0),
            help="Baseline ÷ candidate P99 ITL per token at least (1 = not worse).",
        ),
    ] = None,
    min_goodput_speedup: Annotated[
        float | None,
        typer.Option(
            "--min-goodput-speedup",
            callback=finite_float("--min-goodput-speedup", 0.0, 100.0),
            help="Candidate ÷ baseline goodput (requests/s within the bench runs' --slo) at least.",
        ),
    ] = None,
    max_error_rate: Annotated[
        float | None,
        typer.Option(
            "--max-error-rate",
            callback=finite_float("--max-error-rate", 0.0, 1.0),
            help="Candidate failures ÷ requests at most.",
        ),
    ] = None,
    max_itl_p99_ms: Annotated[
        float | None,
        typer.Option(
            "--max-itl-per-token-p99-ms",
            callback=finite_float("--max-itl-per-token-p99-ms", 0.0, 1e6),
            help="The candidate's P99 ITL per token (ms) at most: an SLO.",
        ),
    ] = None,
    cls: Annotated[
        str | None,
        typer.Option("--class", help="Apply the acceptance flags to this traffic class."),
    ] = None,
    concurrency: Annotated[
        int | None,
        typer.Option("--concurrency", min=1, help="The bench level the A/B flags judge."),
    ] = None,
    min_drafts: Annotated[
        int | None,
        typer.Option(
            "--min-drafts",
            min=1,
            help="Drafts an acceptance rule needs (default 2,000, or the rules file's; the larger "
            "of the two when both are given).",
        ),
    ] = None,
    min_requests: Annotated[
        int | None,
        typer.Option(
            "--min-requests",
            min=1,
            help="Requests per side an A/B rule needs (default 100, or the rules file's).",
        ),
    ] = None,
    allow_point_estimates: Annotated[
        bool,
        typer.Option(
            "--allow-point-estimates",
            help="Judge values that come without an interval (vllm bench serve summaries) as "
            "they are; by default they are not enough evidence.",
        ),
    ] = False,
    max_age: Annotated[
        str,
        typer.Option(
            "--max-age",
            help="Evidence measured longer ago than this (90m, 12h, 7d) is stale: not enough "
            "evidence until measured again.",
        ),
    ] = "7d",
    ignore_errors: Annotated[
        bool,
        typer.Option(
            "--ignore-errors",
            help="Do not judge the candidate's failed requests (by default every A/B is judged "
            "with errors ≤ 5% at its concurrency unless --max-error-rate says otherwise).",
        ),
    ] = False,
    allow_single_run: Annotated[
        bool,
        typer.Option(
            "--allow-single-run",
            help="Judge an A/B of one run per side on its within-run interval; by default it is "
            "not enough evidence (bench --repeats alternates runs and measures their spread).",
        ),
    ] = False,
    measure: Annotated[
        list[Path] | None,
        typer.Option(
            "--measure",
            help="alphagate measure results JSON; or saved /metrics scrapes of one server "
            "(before and after, in time order): acceptance over their counters' increase.",
        ),
    ] = None,
    bench: Annotated[
        list[Path] | None, typer.Option("--bench", help="An alphagate bench A/B summary.json.")
    ] = None,
    baseline: Annotated[
        Path | None, typer.Option("--baseline", help="The baseline run's bench summary.json.")
    ] = None,
    candidate: Annotated[
        Path | None, typer.Option("--candidate", help="The candidate run's bench summary.json.")
    ] = None,
    vllm_baseline: Annotated[
        Path | None,
        typer.Option("--vllm-baseline", help="vllm bench serve --save-result JSON, baseline."),
    ] = None,
    vllm_candidate: Annotated[
        Path | None,
        typer.Option("--vllm-candidate", help="vllm bench serve --save-result JSON, candidate."),
    ] = None,
    url: Annotated[
        list[str] | None,
        typer.Option("--url", help="Live: a server's /metrics (repeat for replicas)."),
    ] = None,
    prometheus: Annotated[
        str | None, typer.Option("--prometheus", help="Live: a Prometheus server.")
    ] = None,
    selector: Annotated[
        str, typer.Option("--selector", help="With --prometheus: label matchers.")
    ] = "",
    window: Annotated[
        str,
        typer.Option(
            "--window",
            help="Live: the acceptance window (90s, 10m, 1h) — the range of the Prometheus query; "
            "with --url --watch, the sliding window of scrapes judged at each evaluation; with "
            "--url once, the longest the measurement waits for --min-drafts.",
        ),
    ] = "10m",
    watch: Annotated[
        bool,
        typer.Option("--watch", help="Re-evaluate every --interval; exit 1 at the first fail."),
    ] = False,
    interval: Annotated[
        float,
        typer.Option(
            "--interval",
            callback=finite_float("--interval", 1.0, 86_400.0),
            help="Seconds between evaluations with --watch.",
        ),
    ] = 60.0,
    duration: Annotated[
        float | None,
        typer.Option(
            "--duration",
            callback=finite_float("--duration", 1.0),
            help="With --watch: stop after this many seconds.",
        ),
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write the decision JSON here.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Judge rules (from flags, --rules or --plan) on evidence (measure results, bench A/B
    summaries, vllm bench serve JSON, or live metrics) and exit 0 pass, 1 fail, 3 not enough
    evidence yet (never a pass), 2 bad input."""
    from pydantic import ValidationError

    from alphagate.core.errors import ConfigError
    from alphagate.gate import load_rules
    from alphagate.gate.rules import load_plan, plan_rules, rule_set
    from alphagate.gate.sources import EvidenceFiles, LiveSource, flag_rules
    from alphagate.measure.prometheus import parse_duration
    from alphagate.measure.results import MeasureError

    if out is not None:
        check_output_path(out, "--out", directory=False)
    check_no_overwrite(
        [(out, "--out", False)],
        [*(measure or []), *(bench or []), baseline, candidate, vllm_baseline, vllm_candidate,
         plan, rules],
    )  # fmt: skip
    try:
        window_s = parse_duration(window)
        max_age_s = parse_duration(max_age)
    except MeasureError as exc:
        fail(str(exc), "--window/--max-age")
    try:
        base = load_rules(rules) if rules else None
        the_plan = load_plan(plan) if plan else None
        from_plan = plan_rules(the_plan, plan) if the_plan is not None and plan else []
    except ConfigError as exc:
        config_error(exc, "--plan/--rules")
    try:
        flagged = flag_rules(
            cls,
            concurrency,
            min_draft_acceptance_rate=min_draft_acceptance_rate,
            min_alpha=min_alpha,
            min_mean_acceptance_length=min_mean_acceptance_length,
            min_throughput_speedup=min_throughput_speedup,
            min_tpot_speedup=min_tpot_speedup,
            min_itl_per_token_p99_speedup=min_itl_p99,
            min_goodput_speedup=min_goodput_speedup,
            max_error_rate=max_error_rate,
            max_itl_per_token_p99_ms=max_itl_p99_ms,
        )
    except ConfigError as exc:
        config_error(exc)
    if not (base or from_plan or flagged):
        fail("no rules: give --plan, --rules or a --min-…/--max-… flag", "--plan")
    rs = rule_set(
        [*from_plan, *flagged],
        file=base,
        min_drafts=min_drafts,
        min_requests=min_requests,
        count_errors=not ignore_errors,
        bench=bool(bench or baseline or candidate or vllm_candidate),
        allow_point_estimates=allow_point_estimates,
        allow_single_run=allow_single_run,
    )
    try:
        live = (
            LiveSource(url or [], prometheus, selector, window_s, rs) if url or prometheus else None
        )
    except ValidationError as exc:
        config_error(exc, "--prometheus/--selector/--url")
    except MeasureError as exc:
        fail(str(exc), "--url")
    if watch and live is None:
        fail("--watch needs live evidence: --url or --prometheus", "--watch")
    files = EvidenceFiles(
        measure or [],
        bench or [],
        baseline,
        candidate,
        vllm_baseline,
        vllm_candidate,
        served_model=None if the_plan is None else the_plan.served_model,
        checkpoint=None if the_plan is None else the_plan.checkpoint,
        max_age_s=max_age_s,
    )
    try:
        with sigterm_as_interrupt():
            if watch and live is not None:
                live.start()
            result = _loop(rs, files, live, watch, interval, duration)
    except MeasureError as exc:
        fail(str(exc), live.flag if live is not None else "--url")
    except _Interrupted as stop:
        if stop.result is not None:
            _show(stop.result, as_json, out)
        raise typer.Exit(130) from None
    _show(result, as_json, out)
    raise typer.Exit(result.exit_code)
