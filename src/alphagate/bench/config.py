"""The bench's typed configuration: load levels and one run's targets, request shape and fault
limits (:class:`BenchConfig`), validated once and handed to the runner."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, SecretStr, model_validator

from alphagate.bench.slo import SLO
from alphagate.bench.sweep import Sweep
from alphagate.core.records import Frozen

__all__ = ["BenchConfig", "Level", "levels_for"]


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
