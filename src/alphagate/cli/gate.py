"""``alphagate gate``: rules judged on measured evidence, as an exit code for CI/CD and canaries.

Exit codes: 0 pass; 1 fail; 2 bad input; 3 not enough evidence yet (too few drafts or requests,
or an interval that straddles a threshold) — never a pass; 130 interrupted while watching.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NamedTuple

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
from alphagate.cli._options import check_output_path

if TYPE_CHECKING:
    from alphagate.gate import Evidence, GateResult, Rule, RuleSet


def _flag_rules(cls: str | None, concurrency: int | None, **mins: float | None) -> list[Rule]:
    from alphagate.gate import Rule

    names = {
        "min_draft_acceptance_rate": ("draft_acceptance_rate", ">="),
        "min_alpha": ("alpha", ">="),
        "min_mean_acceptance_length": ("mean_acceptance_length", ">="),
        "min_throughput_speedup": ("throughput_speedup", ">="),
        "min_tpot_speedup": ("tpot_speedup", ">="),
        "min_itl_per_token_p99_speedup": ("itl_per_token_p99_speedup", ">="),
        "max_error_rate": ("error_rate", "<="),
    }
    out = []
    for key, value in mins.items():
        if value is None:
            continue
        metric, op = names[key]
        ab = metric in (
            "throughput_speedup",
            "tpot_speedup",
            "itl_per_token_p99_speedup",
            "error_rate",
        )
        out.append(
            Rule(
                metric=metric,
                op=op,
                threshold=value,
                cls=None if ab else cls,
                concurrency=concurrency if ab else None,
                source="flag",
            )
        )
    return out


def _evidence(
    measure: list[Path],
    bench: list[Path],
    baseline: Path | None,
    candidate: Path | None,
    vllm_baseline: Path | None,
    vllm_candidate: Path | None,
) -> Evidence:
    from alphagate.core.errors import ConfigError
    from alphagate.gate import Evidence, load_bench, load_measure, load_vllm_result

    ev = Evidence()
    try:
        for p in measure:
            load_measure(p, ev)
        for p in bench:
            load_bench(p, ev)
        if baseline is not None:
            load_bench(baseline, ev, role="baseline")
        if candidate is not None:
            load_bench(candidate, ev, role="candidate")
        if vllm_baseline is not None:
            load_vllm_result(vllm_baseline, ev, "baseline")
        if vllm_candidate is not None:
            load_vllm_result(vllm_candidate, ev, "candidate")
    except ConfigError as exc:
        config_error(exc, "--measure/--bench/--baseline/--candidate")
    return ev


class _Live:
    """Live acceptance for the gate: a Prometheus window, or /metrics scraped since the start."""

    def __init__(
        self, urls: list[str], prometheus: str | None, selector: str, window_s: float, rs: RuleSet
    ) -> None:
        from alphagate.measure.live import LiveConfig, LiveWindow

        self.prometheus, self.selector, self.window_s, self.rs = prometheus, selector, window_s, rs
        self.cfg = LiveConfig(
            urls=tuple(urls or ["-"]),
            min_drafts=rs.min_drafts,
            duration_s=window_s,
            interval_s=min(2.0, window_s),
        )
        self.window = LiveWindow(self.cfg) if urls else None

    def start(self) -> None:
        """--watch on /metrics: the first scrape is the baseline the window counts from."""
        import asyncio

        from alphagate.measure.results import MeasureError

        if self.window is not None:
            try:
                asyncio.run(self.window.scrape())
            except MeasureError as exc:
                fail(str(exc), "--url")

    def add_to(self, ev: Evidence, watching: bool) -> None:
        """Add the acceptance measured now to ``ev``; no drafts yet leaves it out (exit 3)."""
        import asyncio

        from alphagate.measure.live import measure_live
        from alphagate.measure.prometheus import PrometheusQuery, measure_prometheus
        from alphagate.measure.results import MeasureError

        try:
            if self.prometheus:
                m = measure_prometheus(
                    PrometheusQuery(
                        url=self.prometheus, selector=self.selector, window_s=self.window_s
                    )
                )
            elif watching and self.window is not None:
                asyncio.run(self.window.scrape())
                m = self.window.result()
            else:  # one window, ended early once the rules have the drafts they need
                m = measure_live(self.cfg)
        except MeasureError as exc:
            if exc.exit_code == 2:
                fail(str(exc), "--prometheus" if self.prometheus else "--url")
            return
        if m.overall is not None and m.overall.num_drafts > 0:
            window = f" over {m.window_s:,.0f} s" if m.window_s else ""
            ev.add_acceptance(None, m.overall, m.source + window)


def _watch_line(result: GateResult) -> str:
    parts = []
    for r in result.results:
        v = "—" if r.value is None else f"{r.value:.3g}"
        parts.append(f"{r.rule.describe()}: {v} {r.result}")
    return f"{time.strftime('%H:%M:%S')} {result.decision.upper()}  " + "; ".join(parts)


class _Interrupted(Exception):
    """Ctrl-C or SIGTERM while watching; carries the last decision, if any."""

    def __init__(self, result: GateResult | None) -> None:
        super().__init__()
        self.result = result


class _Files(NamedTuple):
    measure: list[Path]
    bench: list[Path]
    baseline: Path | None
    candidate: Path | None
    vllm_baseline: Path | None
    vllm_candidate: Path | None


def _loop(
    rs: RuleSet,
    live: _Live | None,
    watch: bool,
    interval: float,
    duration: float | None,
    start: float,
    files: _Files,
) -> GateResult:
    """Evaluate once, or with --watch every ``interval`` until a fail or ``duration``."""
    from alphagate.gate import evaluate

    result: GateResult | None = None
    try:
        while True:
            if watch and ((live is not None and live.window is not None) or result is not None):
                time.sleep(interval)  # /metrics: an interval past the baseline scrape first
            ev = _evidence(*files)
            if live is not None:
                live.add_to(ev, watch)
            if not ev.sources and not ev.acceptance and live is None:
                fail(
                    "no evidence: give --measure, --bench, --baseline/--candidate, --url or "
                    "--prometheus",
                    "--measure",
                )
            result = evaluate(rs, ev)
            if watch:
                err_console.print(_watch_line(result), markup=False, highlight=False)
            if (
                not watch
                or result.decision == "fail"
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
    max_error_rate: Annotated[
        float | None,
        typer.Option(
            "--max-error-rate",
            callback=finite_float("--max-error-rate", 0.0, 1.0),
            help="Candidate failures ÷ requests at most.",
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
        int, typer.Option("--min-drafts", min=1, help="Drafts an acceptance rule needs.")
    ] = 2000,
    min_requests: Annotated[
        int, typer.Option("--min-requests", min=1, help="Requests per side an A/B rule needs.")
    ] = 100,
    measure: Annotated[
        list[Path] | None, typer.Option("--measure", help="alphagate measure results JSON.")
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
        str, typer.Option("--window", help="Live: the acceptance window (90s, 10m, 1h).")
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
    from alphagate.core.errors import ConfigError
    from alphagate.gate import RuleSet, load_rules, rules_from_plan
    from alphagate.measure.prometheus import parse_duration
    from alphagate.measure.results import MeasureError

    if out is not None:
        check_output_path(out, "--out", directory=False)
    try:
        base = load_rules(rules) if rules else None
        from_plan = rules_from_plan(plan) if plan else []
        window_s = parse_duration(window)
    except MeasureError as exc:
        fail(str(exc), "--window")
    except ConfigError as exc:
        config_error(exc, "--plan/--rules")
    flagged = _flag_rules(
        cls,
        concurrency,
        min_draft_acceptance_rate=min_draft_acceptance_rate,
        min_alpha=min_alpha,
        min_mean_acceptance_length=min_mean_acceptance_length,
        min_throughput_speedup=min_throughput_speedup,
        min_tpot_speedup=min_tpot_speedup,
        min_itl_per_token_p99_speedup=min_itl_p99,
        max_error_rate=max_error_rate,
    )
    all_rules = [*(base.rules if base else []), *from_plan, *flagged]
    if not all_rules:
        fail("no rules: give --plan, --rules or a --min-…/--max-… flag", "--plan")
    rs = RuleSet(rules=all_rules, min_drafts=min_drafts, min_requests=min_requests)
    live = _Live(url or [], prometheus, selector, window_s, rs) if url or prometheus else None
    if watch and live is None:
        fail("--watch needs live evidence: --url or --prometheus", "--watch")
    if watch and live is not None:
        live.start()
    files = _Files(measure or [], bench or [], baseline, candidate, vllm_baseline, vllm_candidate)
    start = time.monotonic()
    result: GateResult | None = None
    try:
        with sigterm_as_interrupt():
            result = _loop(rs, live, watch, interval, duration, start, files)
    except _Interrupted as stop:
        if stop.result is not None:
            _show(stop.result, as_json, out)
        raise typer.Exit(130) from None
    assert result is not None
    _show(result, as_json, out)
    raise typer.Exit(result.exit_code)
