"""A short measurement sweep against live OpenAI-compatible servers, for calibration.

Each server is one configuration (one vLLM or SGLang server without speculation, or with it at
its K). At every concurrency the sweep sends ``requests_per_user × concurrency`` requests (at
least :data:`MIN_REQUESTS`) of ``prompt_tokens`` words asking for exactly ``output_tokens``
tokens (``ignore_eos``), closed loop, with ``alphagate bench``'s client; K and the acceptance by
position come from the server's ``/metrics`` counters over the level, as ``bench`` reads them. A
short warm-up level runs first on every server and is not used (a server compiles or captures
graphs on first sight of a shape). A prefill probe follows: 8 requests, one at a time, with
``prefill_probe_tokens``-word prompts and 8 output tokens — its TTFT is one long prefill step,
compute-bound on a GPU, which tells the modelled GPU time apart from the host constants.

Every network wait is bounded: each request has a total deadline derived from its output tokens
(:meth:`LiveSweep.request_deadline_s`), a connect, a silent stream and every ``/metrics`` and
``/v1/models`` read a limit of their own (:meth:`LiveSweep.stall_timeout_s`), the warm-up runs
on its own and one failure there ends the sweep, and a level's run stops once its failures can no longer stay within
:data:`MAX_FAILED_SHARE`. A failure says the server's HTTP status and message (redacted).
Credentials in a URL become an ``Authorization`` header, and every URL shown or written is
redacted (:mod:`alphagate.core.secrets`). Interrupted (Ctrl-C), the sweep raises
:class:`SweepInterrupted` with the levels that completed.

How long it takes: a level costs ``requests_per_user × output_tokens`` engine steps (fewer with
speculation), so with the defaults (8 requests per user, 128 output tokens) about 1,000 steps per
level and server — ~7 s per level on an 8B model on an H100 (≈ 7 ms per step), and the sweep
(3 concurrencies on one baseline and one speculative server) about a minute.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Final, NamedTuple

from pydantic import Field, SecretStr

from alphagate.bench.config import BenchConfig, Level
from alphagate.bench.dataset import DatasetError, Prompt, load_prompts
from alphagate.bench.records import BenchResult, LevelSummary, RequestRecord
from alphagate.bench.run import run_bench
from alphagate.calibrate.observations import Observation, observations_from_result
from alphagate.core.errors import ConfigError
from alphagate.core.records import Frozen
from alphagate.core.secrets import Secrets, auth_headers, plain_http_warning, redact
from alphagate.net.transport import Transport

__all__ = [
    "FIRST_TOKEN_S",
    "MAX_FAILED_SHARE",
    "MIN_REQUESTS",
    "PER_TOKEN_S",
    "LiveSweep",
    "SweepInterrupted",
    "SweepRun",
    "run_live_sweep",
]

MIN_REQUESTS: Final = 8
WARMUP: Final = "warmup"
PROBE: Final = "prefill-probe"
PROBE_OUTPUT: Final = 8
#: A request's deadline: this long for the connection and the first token (a long prompt's
#: prefill on a slow server included) …
FIRST_TOKEN_S: Final = 30.0
#: … plus this long per output token — 40× a 8B model's decode step on one H100 (≈ 7 ms), room
#: for a CPU build or a loaded server at concurrency 16.
PER_TOKEN_S: Final = 0.25
#: The share of a run's requests that may fail (``BenchResult.failure``); one more ends the run.
MAX_FAILED_SHARE: Final = 0.05


class LiveSweep(Frozen):
    """What ``alphagate calibrate --url …`` measures."""

    urls: tuple[str, ...] = Field(min_length=1, description="one server per configuration")
    metrics_urls: tuple[str, ...] | None = Field(
        default=None, description="each server's /metrics (default: URL/metrics)"
    )
    model: str | None = None
    api_key: SecretStr | None = Field(default=None, exclude=True)
    concurrencies: tuple[int, ...] = Field(
        default=(1, 4, 16), description="closed-loop levels (none: only the prefill probe)"
    )
    requests_per_user: int = Field(default=8, ge=1, le=10_000)
    prompt_tokens: int = Field(default=512, ge=1, le=1_000_000)
    output_tokens: int = Field(default=128, ge=2, le=1_000_000)
    dataset: str | None = Field(
        default=None,
        description="prompts for the concurrency levels (an alphagate bench dataset: JSONL, "
        "ShareGPT); None = prompt_tokens synthetic words. Every request asks for exactly "
        "output_tokens tokens either way",
    )
    prefill_probe_tokens: int | None = Field(
        default=2048,
        ge=1,
        le=1_000_000,
        description="a level at concurrency 1 with prompts this long and 8 output tokens: its "
        "TTFT is one long prefill, which separates the GPU terms (compute-bound there) from the "
        "host constants; None = no probe",
    )
    warmup_requests: int = Field(
        default=2, ge=0, le=1000, description="requests of the unused warm-up level (0 = none)"
    )
    timeout_s: float | None = Field(
        default=None,
        gt=0,
        allow_inf_nan=False,
        description="each request's total deadline in seconds, and the limit of a connect, a "
        "silent stream and every GET (None: FIRST_TOKEN_S + PER_TOKEN_S × its output tokens, "
        "and FIRST_TOKEN_S)",
    )
    seed: int = Field(default=0, ge=0)

    def requests(self, concurrency: int) -> int:
        return max(MIN_REQUESTS, self.requests_per_user * concurrency)

    def request_deadline_s(self, output_tokens: int) -> float:
        """The longest one request with ``output_tokens`` tokens may take in all."""
        if self.timeout_s is not None:
            return self.timeout_s
        return FIRST_TOKEN_S + PER_TOKEN_S * output_tokens

    def stall_timeout_s(self) -> float:
        """The longest a connect, a silent stream or a ``/metrics`` read may take."""
        return self.timeout_s if self.timeout_s is not None else FIRST_TOKEN_S

    def secrets(self) -> Secrets:
        """Everything secret the sweep holds (the key, URL credentials and keys)."""
        key = self.api_key.get_secret_value() if self.api_key is not None else None
        return Secrets.of(urls=(*self.urls, *(self.metrics_urls or ())), api_key=key)

    def shown(self, url: str) -> str:
        """A URL as it may be printed and written."""
        return redact(url, self.secrets())

    def servers(self) -> list[_Server]:
        """Each server's URLs without credentials, the headers sent to it (the key, or its URL's
        credentials) and the URL shown. Raises :class:`ConfigError` (nothing secret shown)."""
        if self.metrics_urls is not None and len(self.metrics_urls) != len(self.urls):
            raise ConfigError("give one --metrics-url per --url, in the same order")
        key = self.api_key.get_secret_value() if self.api_key is not None else None
        out = []
        for i, url in enumerate(self.urls):
            targets = [("server", url)]
            if self.metrics_urls is not None:
                targets.append(("metrics", self.metrics_urls[i]))
            headers, clean = auth_headers([], key, tuple(targets))
            if key is not None:
                headers["Authorization"] = f"Bearer {key.strip()}"
            out.append(
                _Server(
                    url=clean[0][1],
                    metrics_url=clean[1][1] if len(clean) > 1 else None,
                    headers=headers,
                    shown=self.shown(url),
                )
            )
        return out

    def warnings(self) -> list[str]:
        """What the sweep sends that the network can read: a key or credentials over plain
        http to a host that is not this machine."""
        key = self.api_key.get_secret_value() if self.api_key is not None else None
        out = []
        for srv in self.servers():
            for u in (srv.url, srv.metrics_url):
                why = None if u is None else plain_http_warning(u, srv.headers, key)
                if why is not None and why not in out:
                    out.append(why)
        return out


class _Server(Frozen):
    url: str
    metrics_url: str | None
    headers: dict[str, str] = Field(repr=False)
    shown: str


class SweepRun(Frozen):
    """One server's bench run, as ``alphagate bench`` would have written it (``url`` as shown:
    redacted)."""

    url: str
    result: BenchResult
    records: list[RequestRecord]


class SweepInterrupted(Exception):
    """Ctrl-C (or SIGTERM) during the sweep: the observations and runs of the levels that
    completed (a level cut short is left out of both)."""

    def __init__(self, observations: list[Observation], runs: list[SweepRun]) -> None:
        super().__init__("interrupted")
        self.observations = observations
        self.runs = runs


class _Shape(NamedTuple):
    """The levels of one bench run and the requests it sends."""

    levels: tuple[Level, ...]
    prompt_tokens: int  # words of each synthetic prompt
    output_tokens: int  # tokens each request asks for, exactly
    from_dataset: bool  # prompts from --dataset, when one is given


@dataclass(frozen=True)
class _Hooks:
    """What every bench run of a sweep reports to, and sends through."""

    on_level: Callable[[str, str], None] | None
    on_record: Callable[[RequestRecord], None] | None
    transport: Transport | None


def _shapes(sweep: LiveSweep) -> list[_Shape]:
    """The concurrency levels (if any), then the prefill probe (if any)."""
    main = tuple(
        Level(label=f"c{c}", concurrency=c, requests=sweep.requests(c)) for c in sweep.concurrencies
    )
    shapes = (
        [_Shape(main, sweep.prompt_tokens, sweep.output_tokens, True)]
        if sweep.concurrencies
        else []
    )
    if sweep.prefill_probe_tokens is not None:
        probe = (Level(label=PROBE, concurrency=1, requests=MIN_REQUESTS),)
        shapes.append(_Shape(probe, sweep.prefill_probe_tokens, PROBE_OUTPUT, False))
    return shapes


def run_live_sweep(
    sweep: LiveSweep,
    *,
    on_level: Callable[[str, str], None] | None = None,
    on_record: Callable[[RequestRecord], None] | None = None,
    transport: Transport | None = None,
) -> tuple[list[Observation], list[SweepRun]]:
    """Measure every concurrency on every server; returns the observations and the runs. Every
    request, ``/metrics`` and ``/v1/models`` read goes through ``transport`` (None: bench's
    llhttp client; a test passes a ``MockTransport``).

    Raises :class:`ConfigError` when a server fails (its HTTP status and message, redacted) or
    reports inconsistent counters, and :class:`SweepInterrupted` on Ctrl-C."""
    if not sweep.concurrencies and sweep.prefill_probe_tokens is None:
        raise ConfigError("nothing to measure: no concurrency level and no prefill probe")
    servers = sweep.servers()
    shapes = _shapes(sweep)
    hooks = _Hooks(on_level, on_record, transport)
    observations: list[Observation] = []
    runs: list[SweepRun] = []
    try:
        for i, srv in enumerate(servers):
            if sweep.warmup_requests:
                warm = (Level(label=WARMUP, concurrency=1, requests=sweep.warmup_requests),)
                shape = shapes[0]._replace(levels=warm)
                _run(sweep, srv, shape, f"calibrate-{i}-warmup", hooks, max_errors=1)
            for j, shape in enumerate(shapes):
                run = _run(sweep, srv, shape, f"calibrate-{i}-{j}", hooks)
                runs.append(run)
                observations += observations_from_result(run.result, run.records, srv.shown)
    except _Interrupted as stop:
        if stop.run is not None:
            runs.append(stop.run)
            observations += observations_from_result(
                stop.run.result, stop.run.records, stop.run.url
            )
        raise SweepInterrupted(observations, runs) from None
    except KeyboardInterrupt:
        raise SweepInterrupted(observations, runs) from None
    return observations, runs


class _Interrupted(Exception):
    """A run was interrupted: its completed levels (None: none completed)."""

    def __init__(self, run: SweepRun | None) -> None:
        super().__init__("interrupted")
        self.run = run


def _bench_config(
    sweep: LiveSweep, srv: _Server, shape: _Shape, n: int, max_errors: int | None
) -> BenchConfig:
    """``n`` prompts on one server, the run ended once its failures cannot stay within
    :data:`MAX_FAILED_SHARE` (``max_errors`` when given)."""
    total = sum(lv.requests or 1 for lv in shape.levels)
    return BenchConfig(
        targets=(("default", srv.url),),
        model=sweep.model,
        api_key=None,  # in srv.headers: the key, or the URL's credentials
        headers=srv.headers,
        levels=shape.levels,
        num_prompts=n,
        seed=sweep.seed,
        timeout_s=sweep.stall_timeout_s(),
        request_timeout_s=sweep.request_deadline_s(shape.output_tokens),
        metrics_urls=(srv.metrics_url,) if srv.metrics_url else None,
        max_errors=max_errors or 1 + math.floor(MAX_FAILED_SHARE * total),
    )


def _run(
    sweep: LiveSweep,
    srv: _Server,
    shape: _Shape,
    run_id: str,
    hooks: _Hooks,
    *,
    max_errors: int | None = None,
) -> SweepRun:
    """One bench run of ``shape`` on one server, checked: every failure and interruption
    raised (see :func:`run_live_sweep`)."""
    n = max(lv.requests or 1 for lv in shape.levels)
    prompts = _prompts(sweep, n, shape)
    cfg = _bench_config(sweep, srv, shape, n, max_errors)
    records: list[RequestRecord] = []
    sink = _Collector(records, srv.shown, hooks.on_level, hooks.on_record)
    secrets = sweep.secrets() | Secrets.of(headers=srv.headers)
    problems: list[str] = []
    result = run_bench(
        cfg, prompts, run_id=run_id, sink=sink, metrics_problems=problems,
        transport=hooks.transport,
    )  # fmt: skip
    if problems and not result.interrupted:  # accepted above drafted, …: K and α unknown
        raise ConfigError(
            f"{srv.shown}: its /metrics cannot be calibrated from: {redact(problems[0], secrets)}"
        )
    result = _shown(result, srv.shown)
    levels = shape.levels
    if result.interrupted:
        done = [lv for lv in result.levels if _complete(lv, levels)]
        if not done or levels[0].label == WARMUP:
            raise _Interrupted(None)
        labels = {lv.level for lv in done}
        kept = result.model_copy(
            update={"levels": done, "comparisons": [], "stop_reason": "interrupted"}
        )
        raise _Interrupted(
            SweepRun(url=srv.shown, result=kept, records=[r for r in records if r.level in labels])
        )
    why = _failure(result)
    if why is not None:
        what = "warm-up" if levels[0].label == WARMUP else "sweep"
        raise ConfigError(
            f"{srv.shown}: the {what} did not complete ({redact(why, secrets)})"
            + _first_failure(records, secrets)
        )
    return SweepRun(url=srv.shown, result=result, records=records)


def _failure(result: BenchResult) -> str | None:
    """Why a run cannot be calibrated from, or None."""
    total, failed = result.requests
    if failed and (failed > MAX_FAILED_SHARE * total or result.stop_reason is not None):
        return (
            f"every request failed ({failed}/{total})"
            if failed == total
            else f"{failed} of {total} requests failed, more than {MAX_FAILED_SHARE:.0%}"
        )
    return result.failure(MAX_FAILED_SHARE) or result.stop_reason


def _complete(lv: LevelSummary, levels: tuple[Level, ...]) -> bool:
    """A level that ran to its end: all its requests, and its closing scrape (a level cut short
    is summarised without the run's validity figures)."""
    want = next((x.requests for x in levels if x.label == lv.level), None)
    return (
        lv.validity is not None
        and want is not None
        and lv.overall.completed + lv.overall.failed >= want
    )


def _shown(result: BenchResult, shown: str) -> BenchResult:
    """The result with each level's URL as shown (a key in the query redacted)."""
    return result.model_copy(
        update={"levels": [lv.model_copy(update={"url": shown}) for lv in result.levels]}
    )


def _first_failure(records: list[RequestRecord], secrets: Secrets) -> str:
    """``; the first failure: HTTP 401: invalid key`` — what the server said, redacted."""
    bad = next((r for r in records if not r.ok), None)
    if bad is None:
        return ""
    kind = bad.error_type or "error"
    kind = f"HTTP {kind.removeprefix('http_')}" if kind.startswith("http_") else kind
    message = redact((bad.error_message or "").strip(), secrets)[:300]
    return f"; the first failure: {kind}" + (f": {message}" if message else "")


def _prompts(sweep: LiveSweep, n: int, shape: _Shape) -> list[Prompt]:
    n_in, n_out = shape.prompt_tokens, shape.output_tokens
    if not shape.from_dataset or sweep.dataset is None:
        return load_prompts(f"synthetic:in={n_in},out={n_out}", n, sweep.seed)[0]
    try:
        loaded, _ = load_prompts(sweep.dataset, n, sweep.seed)
    except (DatasetError, OSError) as exc:
        raise ConfigError(f"--dataset {sweep.dataset}: {exc}") from None
    if not loaded:
        raise ConfigError(f"--dataset {sweep.dataset}: no prompts")
    return [replace(p, max_tokens=n_out, ignore_eos=True) for p in loaded]


class _Collector:
    """Keeps a server's records and reports each new level and record."""

    def __init__(
        self,
        records: list[RequestRecord],
        url: str,
        on_level: Callable[[str, str], None] | None,
        on_record: Callable[[RequestRecord], None] | None,
    ) -> None:
        self.records, self.url, self.on_level, self.on_record = records, url, on_level, on_record

    def __call__(self, rec: RequestRecord) -> None:
        new_level = not self.records or self.records[-1].level != rec.level
        if new_level and self.on_level is not None:
            self.on_level(self.url, rec.level)
        self.records.append(rec)
        if self.on_record is not None:
            self.on_record(rec)
