"""The bench's typed configuration: load levels and one run's targets, request shape and fault
limits (:class:`BenchConfig`), validated once and handed to the runner; and the rules of a run
that the CLI and the Python API share — one load shape per run (:func:`check_load_shape`), the
targets (:func:`targets_for`), the largest sweep (:func:`check_sweep`), how long a trace's
replay may take (:func:`check_replay`) and how many worker processes have work
(:func:`useful_workers`). Each refusal is a :class:`~alphagate.core.errors.ConfigError` naming
the field (and so the flag) at fault."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar, Literal, NamedTuple

from pydantic import Field, SecretStr, model_validator

from alphagate.bench.slo import SLO
from alphagate.bench.sweep import Sweep
from alphagate.core.errors import ConfigError
from alphagate.core.records import Frozen

if TYPE_CHECKING:
    from alphagate.bench.dataset import Prompt

__all__ = [
    "MAX_CONCURRENCY",
    "MAX_REPLAY_S",
    "BenchConfig",
    "Level",
    "Replay",
    "Workers",
    "check_load_shape",
    "check_replay",
    "check_sweep",
    "check_warmup",
    "levels_for",
    "targets_for",
    "useful_workers",
]

#: the most users (requests in flight) one level may have
MAX_CONCURRENCY = 100_000
#: the longest trace replay (wall seconds, after its time scale) run without a limit that ends
#: it sooner
MAX_REPLAY_S = 86_400.0


class Level(Frozen):
    """One load level: closed-loop ``concurrency``, open-loop ``rate``, or a trace replayed at
    ``time_scale`` (the last two capped by ``concurrency`` when given)."""

    label: str
    concurrency: int | None = Field(default=None, ge=1)
    rate: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    time_scale: float | None = Field(
        default=None,
        gt=0,
        allow_inf_nan=False,
        description="trace replay: wall seconds per trace second (0.1 = ten times faster)",
    )
    requests: int | None = Field(
        default=None, ge=1, description="requests to send (cycling the prompts); None: each once"
    )


class BenchConfig(Frozen):
    """One bench run: targets, load levels, request shape and fault limits."""

    targets: tuple[tuple[str, str], ...]  # (name, base URL): ("default", u) or baseline + candidate
    endpoint: Literal["completions", "chat"] = "completions"
    model: str | None = None
    api_key: SecretStr | None = Field(default=None, exclude=True)
    headers: dict[str, str] = Field(default_factory=dict)
    levels: tuple[Level, ...]
    num_prompts: int = Field(default=200, ge=1)
    duration_s: float | None = Field(default=None, gt=0)
    burstiness: float = Field(default=1.0, gt=0)
    warmup: int = Field(default=0, ge=0)
    seed: int = 0
    timeout_s: float = Field(default=60.0, gt=0, description="seconds without data: a stall")
    request_timeout_s: float | None = Field(
        default=None,
        gt=0,
        allow_inf_nan=False,
        description="the most seconds one request may take in all; None: timeout_s + "
        "SECONDS_PER_TOKEN × its max_tokens (DEFAULT_MAX_TOKENS when it has none)",
    )
    metrics_urls: tuple[str, ...] | None = None  # None: <target>/metrics
    scrape_metrics: bool = True
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    send_class: bool = True
    dataset: str | None = Field(
        default=None, description="the dataset the prompts came from (a path or synthetic:…)"
    )
    only_class: str | None = Field(default=None, description="the one class sent, if any")
    repeats: int = Field(
        default=1,
        ge=1,
        le=100,
        description="runs of each level per target; an A/B alternates them (baseline, "
        "candidate, candidate, baseline, …) so that drifts of the machine fall on both sides",
    )
    max_errors: int | None = Field(default=None, ge=1, description="stop the run after N failures")
    max_error_rate: float | None = Field(
        default=None, ge=0.0, le=1.0, description="stop when failures ÷ requests exceed this"
    )
    max_duration_s: float | None = Field(
        default=None,
        gt=0,
        allow_inf_nan=False,
        description="stop sending after this many seconds in all",
    )
    slo: SLO | None = Field(default=None, description="count goodput under these bounds")
    sweep: Sweep | None = Field(
        default=None, description="search each target's knee instead of running fixed levels"
    )
    save_text: bool = Field(
        default=False,
        description="keep each request's prompt and output (text, and token ids where the "
        "server returns them) in its record: a request log for measure offline",
    )
    probe_send_time: bool = Field(
        default=False,
        description="record each chunk's delivery delay from the twin's alphagate_sent_s "
        "(twin --emit-send-time): the latency the client adds, for benchmarks",
    )

    #: requests a level must have finished before the error rate can stop it
    MIN_REQUESTS_FOR_RATE: ClassVar[int] = 20
    #: the default deadline's allowance per token asked for: a server slower than one token a
    #: second on average, after its first byte came within ``timeout_s``, is not serving
    SECONDS_PER_TOKEN: ClassVar[float] = 1.0
    #: the tokens a request without ``max_tokens`` is taken to ask for (the server decides)
    DEFAULT_MAX_TOKENS: ClassVar[int] = 4096

    def request_deadline_s(self, max_tokens: int | None) -> float:
        """The total time one request may take: ``request_timeout_s``, else ``timeout_s`` +
        ``SECONDS_PER_TOKEN`` × its ``max_tokens``."""
        if self.request_timeout_s is not None:
            return self.request_timeout_s
        tokens = self.DEFAULT_MAX_TOKENS if max_tokens is None else max_tokens
        return self.timeout_s + self.SECONDS_PER_TOKEN * tokens

    @model_validator(mode="after")
    def _load(self) -> BenchConfig:
        if self.sweep is not None and self.slo is None:
            raise ValueError("a sweep searches for the load at which an SLO breaks: give an SLO")
        if self.sweep is None and not self.levels:
            raise ValueError("give at least one load level, or a sweep")
        if self.sweep is not None:
            check_sweep(self.sweep)
        check_warmup(self.warmup, self.num_prompts)
        return self


def levels_for(
    concurrency: list[int] | None, rate: float | None, time_scale: float | None = None
) -> tuple[Level, ...]:
    """Closed-loop levels ``c<N>``; with a rate, open-loop ``r<R>``; with a time scale, the trace
    replayed (``trace``); the last two capped at each concurrency given (``r<R>-c<N>``)."""
    if time_scale is not None:
        if concurrency:
            return tuple(
                Level(label=f"trace-c{c}", concurrency=c, time_scale=time_scale)
                for c in concurrency
            )
        return (Level(label="trace", time_scale=time_scale),)
    if rate is not None:
        if concurrency:
            return tuple(
                Level(label=f"r{rate:g}-c{c}", concurrency=c, rate=rate) for c in concurrency
            )
        return (Level(label=f"r{rate:g}", rate=rate),)
    return tuple(Level(label=f"c{c}", concurrency=c) for c in (concurrency or [1]))


def targets_for(
    url: str | None, baseline: str | None, candidate: str | None
) -> tuple[tuple[str, str], ...]:
    """The run's targets: one (``default``), or a baseline and a candidate."""
    if url and (baseline or candidate):
        raise ConfigError("give --url, or --baseline-url with --candidate-url", "url")
    if url:
        return (("default", url),)
    if baseline and candidate:
        return (("baseline", baseline), ("candidate", candidate))
    raise ConfigError("give --url, or both --baseline-url and --candidate-url", "url")


def check_load_shape(
    *, trace: bool, dataset: bool, rate: bool, sweep: bool, concurrency: bool, slo: bool
) -> None:
    """One load shape per run: levels, a rate, a sweep or a trace (each argument: whether it
    was given)."""
    if trace:
        for given, name in ((dataset, "dataset"), (rate, "rate"), (sweep, "sweep")):
            if given:
                raise ConfigError(
                    f"a trace brings its own requests and arrival times; drop --{name}", "trace"
                )
    if sweep:
        if not slo:
            raise ConfigError(
                "a sweep searches for the load at which the SLO breaks: give --slo", "sweep"
            )
        for given, name in ((rate, "rate"), (concurrency, "concurrency")):
            if given:
                raise ConfigError(f"--sweep chooses the loads itself; drop --{name}", "sweep")


def check_sweep(sweep: Sweep) -> None:
    """A concurrency sweep stays within :data:`MAX_CONCURRENCY` users."""
    if sweep.kind == "concurrency" and sweep.hi > MAX_CONCURRENCY:
        raise ConfigError(
            f"{sweep.hi:g} is above the largest concurrency, {MAX_CONCURRENCY:,}", "sweep"
        )


def check_warmup(warmup: int, n_requests: int) -> None:
    """The requests a level leaves out of its statistics leave some to measure."""
    if warmup >= n_requests:
        raise ConfigError(
            f"--warmup {warmup} leaves no request of the {n_requests} to measure", "warmup"
        )


class Replay(NamedTuple):
    """How long a trace's replay takes: the wall seconds to its last request, and the limit
    that ends it sooner (infinite when none does)."""

    span_s: float
    limit_s: float


def check_replay(
    prompts: Sequence[Prompt],
    time_scale: float,
    *,
    max_duration_s: float | None = None,
    duration_s: float | None = None,
) -> Replay:
    """A trace's replay takes its span × ``time_scale``: past :data:`MAX_REPLAY_S` it is
    refused unless a limit ends it sooner."""
    span = max((p.arrival_s or 0.0) for p in prompts) * time_scale
    limit = min(x for x in (max_duration_s, duration_s, math.inf) if x is not None)
    if span > MAX_REPLAY_S and limit > MAX_REPLAY_S:
        raise ConfigError(
            f"replaying it takes {span:,.0f} s ({span / 86_400:,.1f} days) at --time-scale "
            f"{time_scale:g}: its last request is sent then. Above {MAX_REPLAY_S:,.0f} s (24 h) "
            "give --time-scale (0.01 replays 100× faster) or --max-duration to end it sooner",
            "trace",
        )
    return Replay(span, limit)


class Workers(NamedTuple):
    """The worker processes that have work, and why fewer than asked for (empty when not)."""

    processes: int
    why: str


def useful_workers(workers: int, cfg: BenchConfig, n_requests: int) -> Workers:
    """No more worker processes than requests a level sends, nor than users (or the cap on
    requests in flight) a level has: the rest would sit idle."""
    if workers == 1 or cfg.sweep is not None:  # a sweep's levels differ: each is split as it comes
        return Workers(workers, "")
    useful, why = workers, ""
    if n_requests < useful:
        useful, why = n_requests, f"{n_requests} request{'s' * (n_requests > 1)} per level"
    caps = [lv.concurrency for lv in cfg.levels]
    top = max((c for c in caps if c is not None), default=None)
    if top is not None and None not in caps and top < useful:  # closed loops, or capped
        useful, why = top, f"at most {top} request{'s' * (top > 1)} in flight"
    return Workers(useful, why)
