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

How long it takes: a level costs ``requests_per_user × output_tokens`` engine steps (fewer with
speculation), so with the defaults (8 requests per user, 128 output tokens) about 1,000 steps per
level and server — ~7 s per level on an 8B model on an H100 (≈ 7 ms per step), and the sweep
(3 concurrencies on one baseline and one speculative server) about a minute.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Final

from pydantic import Field, SecretStr

from alphagate.bench.dataset import DatasetError, Prompt, load_prompts
from alphagate.bench.records import BenchResult, RequestRecord
from alphagate.bench.run import run_bench
from alphagate.bench.runner import BenchConfig, Level
from alphagate.calibrate.observations import Observation, observations_from_result
from alphagate.core.errors import ConfigError
from alphagate.core.records import Frozen

__all__ = ["MIN_REQUESTS", "LiveSweep", "SweepRun", "run_live_sweep"]

MIN_REQUESTS: Final = 8
WARMUP: Final = "warmup"
PROBE: Final = "prefill-probe"
PROBE_OUTPUT: Final = 8


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
    timeout_s: float = Field(default=120.0, gt=0)
    seed: int = Field(default=0, ge=0)

    def requests(self, concurrency: int) -> int:
        return max(MIN_REQUESTS, self.requests_per_user * concurrency)


class SweepRun(Frozen):
    """One server's bench run, as ``alphagate bench`` would have written it."""

    url: str
    result: BenchResult
    records: list[RequestRecord]


def run_live_sweep(
    sweep: LiveSweep,
    *,
    on_level: Callable[[str, str], None] | None = None,
    on_record: Callable[[RequestRecord], None] | None = None,
) -> tuple[list[Observation], list[SweepRun]]:
    """Measure every concurrency on every server; returns the observations and the runs."""
    if sweep.metrics_urls is not None and len(sweep.metrics_urls) != len(sweep.urls):
        raise ConfigError("give one --metrics-url per --url, in the same order")
    if not sweep.concurrencies and sweep.prefill_probe_tokens is None:
        raise ConfigError("nothing to measure: no concurrency level and no prefill probe")
    warm = (
        (Level(label=WARMUP, concurrency=1, requests=sweep.warmup_requests),)
        if sweep.warmup_requests
        else ()
    )
    main = (
        *warm,
        *(
            Level(label=f"c{c}", concurrency=c, requests=sweep.requests(c))
            for c in sweep.concurrencies
        ),
    )
    # (levels, prompt words, output tokens, prompts from --dataset)
    shapes = [(main, sweep.prompt_tokens, sweep.output_tokens, True)] if sweep.concurrencies else []
    if sweep.prefill_probe_tokens is not None:
        probe = (Level(label=PROBE, concurrency=1, requests=MIN_REQUESTS),)
        shapes.append((probe, sweep.prefill_probe_tokens, PROBE_OUTPUT, False))
    observations: list[Observation] = []
    runs: list[SweepRun] = []
    for i, url in enumerate(sweep.urls):
        for j, (levels, n_in, n_out, from_dataset) in enumerate(shapes):
            n = max(lv.requests or 1 for lv in levels)
            prompts = _prompts(sweep, n, n_in, n_out, from_dataset)
            cfg = BenchConfig(
                targets=(("default", url),),
                model=sweep.model,
                api_key=sweep.api_key,
                levels=levels,
                num_prompts=n,
                seed=sweep.seed,
                timeout_s=sweep.timeout_s,
                metrics_urls=(sweep.metrics_urls[i],) if sweep.metrics_urls else None,
            )
            records: list[RequestRecord] = []
            sink = _Collector(records, url, on_level, on_record)
            result = run_bench(cfg, prompts, run_id=f"calibrate-{i}-{j}", sink=sink)
            failure = result.failure(0.05)
            if failure is not None or result.interrupted:
                raise ConfigError(f"{url}: the sweep did not complete ({failure or 'interrupted'})")
            runs.append(SweepRun(url=url, result=result, records=records))
            observations += observations_from_result(result, records, url, skip=(WARMUP,))
    return observations, runs


def _prompts(sweep: LiveSweep, n: int, n_in: int, n_out: int, from_dataset: bool) -> list[Prompt]:
    if not from_dataset or sweep.dataset is None:
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
