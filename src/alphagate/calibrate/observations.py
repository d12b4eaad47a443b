"""What calibration fits to: one measured level of a closed-loop load, read from saved results.

An :class:`Observation` is a level run at a fixed concurrency against one server configuration
(K = 0 without speculation): its requests' prompt and output lengths, the acceptance it showed,
the mean engine step its decoding sequences saw, and its mean TTFT. The mean step is the decode
time of the requests (first to last token) over their decode steps — output tokens after the
first without speculation, vLLM's ``num_drafts`` with it (one per sequence per step) — rather
than the mean gap between streamed chunks, because a server may stream two steps' tokens in one
chunk when its front end falls behind (vLLM's CPU build does). Readers:

- ``alphagate bench`` results: ``summary.json`` with its ``requests.jsonl`` (per-request lengths);
  K and α by position from the level's ``/metrics`` counter deltas;
- ``vllm bench serve --save-result`` JSON: the totals and means it saves (``mean_tpot_ms``,
  ``std_tpot_ms``, ``mean_ttft_ms``, ``total_input_tokens``, ``total_output_tokens``,
  ``max_concurrency``, and ``spec_decode_num_drafts`` and
  ``spec_decode_per_position_acceptance_rates`` when the server speculates);
- ``vllm bench sweep serve`` output: its experiment folder holds one folder per (server, bench)
  parameter combination, ``SERVE-<name>-BENCH-<name>/``, with one ``vllm bench serve`` result per
  run, ``run=<n>.json`` (its parameters merged in), and their list in ``summary.json``
  (``vllm/benchmarks/sweep/serve.py``: ``_get_comb_base_path``, ``_get_comb_run_path``). Every
  run of every combination under the folder given is one observation; ``warmup.json`` and the
  ``*.failure.json`` of failed runs are not read.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from alphagate.bench.records import BenchResult, LevelSummary, RequestRecord
from alphagate.core.errors import ConfigError, invalid, validation_problem
from alphagate.sim.results import Distribution
from alphagate.theory.acceptance import conditional_from_unconditional

IntArray = npt.NDArray[np.int64]

__all__ = [
    "Observation",
    "observations_from_bench",
    "observations_from_result",
    "observations_from_vllm_bench",
    "read_observations",
]

#: z of the 90th percentile of a normal: (p90 − p50) / 1.2816 estimates a standard deviation.
_Z90 = 1.2816


@dataclass(frozen=True)
class Observation:
    """One closed-loop level against one server configuration."""

    label: str
    source: str
    concurrency: int
    k: int
    alpha_by_pos: tuple[float, ...] | None  # conditional α per position, K > 0
    prompt_tokens: IntArray  # [requests]
    output_tokens: IntArray  # [requests]
    step_ms: float | None  # mean engine step seen by the decoding sequences
    step_samples: float  # decode steps of all requests
    step_cv: float  # standard deviation ÷ mean of one step's gap
    ttft_ms: float | None
    ttft_samples: float
    ttft_cv: float


def _cv(d: Distribution | None, std: float | None = None) -> float:
    """Coefficient of variation of one sample: from a given standard deviation, else from the
    spread between the median and the 90th percentile; kept in [0.02, 2]."""
    if d is None or not d.mean:
        return 1.0
    if std is None:
        std = max((d.p90 or d.mean) - (d.p50 or d.mean), 0.0) / _Z90
    return float(min(max(std / d.mean, 0.02), 2.0))


def _alpha(per_position: list[float]) -> tuple[float, ...]:
    """Conditional α per position from vLLM's unconditional per-position rates (NaN → 0)."""
    cond = conditional_from_unconditional(np.asarray(per_position, dtype=np.float64))
    return tuple(0.0 if not math.isfinite(float(a)) else float(min(max(a, 0.0), 1.0)) for a in cond)


def _level_records(records: list[RequestRecord], lv: LevelSummary) -> list[RequestRecord]:
    return [
        r
        for r in records
        if r.target == lv.target and r.level == lv.level and r.ok and not r.warmup
    ]


def observations_from_bench(summary: Path) -> list[Observation]:
    """Every closed-loop level of an ``alphagate bench`` run (``summary.json``); a summary or
    records file that is not what bench writes raises :class:`ConfigError` naming it."""
    try:
        result = BenchResult.model_validate(json.loads(summary.read_text(encoding="utf-8")))
    except ValidationError as exc:
        raise invalid(summary, "alphagate bench summary", exc) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, ValueError) as exc:
        raise ConfigError(f"{summary}: not a readable alphagate bench summary ({exc})") from None
    jsonl, looked = result.records_path(summary)
    if jsonl is None:
        raise ConfigError(
            f"{summary}: its requests.jsonl is missing (looked at {', '.join(map(str, looked))}); "
            "calibration needs each request's prompt and output tokens"
        )
    records = []
    try:
        text = jsonl.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{jsonl}: not a readable records file ({exc})") from None
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = RequestRecord.model_validate_json(line)
        except ValidationError as exc:
            raise ConfigError(
                f"{jsonl}, line {n}: not a bench request record (cut short, or edited?): "
                f"{validation_problem(exc)}"
            ) from None
        if rec.run_id == result.run_id:
            records.append(rec)
    return observations_from_result(result, records, str(summary))


def observations_from_result(
    result: BenchResult, records: list[RequestRecord], source: str, *, skip: tuple[str, ...] = ()
) -> list[Observation]:
    """Every closed-loop level of a bench result, with its request records."""
    out = []
    for lv in result.levels:
        if lv.concurrency is None or lv.rate is not None or lv.time_scale is not None:
            continue  # open loop and trace replay have no fixed batch
        if lv.level in skip:
            continue
        recs = _level_records(records, lv)
        if not recs or any(r.prompt_tokens is None or r.output_tokens is None for r in recs):
            raise ConfigError(
                f"{source}: level {lv.level} ({lv.target}) has requests without usage counts; "
                "the server must report usage (alphagate bench asks for it)"
            )
        acc = lv.acceptance
        spec = acc is not None and acc.num_drafts > 0 and acc.k
        k = int(acc.k) if spec and acc is not None and acc.k else 0
        per_chunk = lv.overall.mean_tokens_per_chunk or 1.0
        # more than one token per chunk: speculation, or a loaded server whose stream merged
        # tokens; only the engine's own /metrics without spec-decode counters tells them apart
        if k == 0 and per_chunk > 1.02 and lv.speculating is not False:
            raise ConfigError(
                f"{source}: level {lv.level} streamed {per_chunk:.2f} tokens per chunk — the "
                "server speculates — but no spec-decode counters were read; give its /metrics "
                "(--metrics-url) so that K and the acceptance are known"
            )
        alpha = _alpha(acc.per_position_acceptance) if spec and acc is not None else None
        o = lv.overall
        decode_s = sum(r.chunk_times_s[-1] - r.chunk_times_s[0] for r in recs if r.chunk_times_s)
        if k and acc is not None:
            steps = float(acc.num_drafts)  # one per sequence per speculative step
        else:
            steps = float(
                sum(
                    (r.output_tokens or 1) - (r.chunk_tokens[0] if r.chunk_tokens else 1)
                    for r in recs
                )
            )
        out.append(
            Observation(
                label=f"{lv.target} {lv.level}" if lv.target != "default" else lv.level,
                source=source,
                concurrency=int(lv.concurrency),
                k=k,
                alpha_by_pos=alpha,
                prompt_tokens=np.asarray([r.prompt_tokens for r in recs], dtype=np.int64),
                output_tokens=np.asarray([r.output_tokens for r in recs], dtype=np.int64),
                step_ms=1e3 * decode_s / steps if steps > 0 else None,
                step_samples=steps,
                step_cv=_cv(o.itl_per_chunk_ms),
                ttft_ms=o.ttft_ms.mean,
                ttft_samples=o.ttft_ms.samples,
                ttft_cv=_cv(o.ttft_ms),
            )
        )
    if not out:
        raise ConfigError(f"{source}: no closed-loop level (--concurrency) to calibrate from")
    return out


_Count = Annotated[float, Field(ge=0.0, allow_inf_nan=False)]
_Ms = Annotated[float, Field(ge=0.0, allow_inf_nan=False)]
_Spread = Annotated[float, Field(ge=0.0, allow_inf_nan=False)]
#: the most requests one saved run may describe (each becomes a simulated request of the fit)
MAX_SAVED_REQUESTS = 1_000_000
#: the longest mean prompt or output a saved run may report, in tokens
MAX_MEAN_TOKENS = 10_000_000


class _VllmBenchResult(BaseModel):
    """The fields of a ``vllm bench serve --save-result`` file calibration reads, checked (the
    file's other fields are ignored)."""

    model_config = ConfigDict(frozen=True, extra="ignore", strict=True)

    max_concurrency: int | None = Field(default=None, ge=1, le=1_000_000)
    request_rate: float | str | None = None
    completed: int = Field(default=0, ge=0, le=MAX_SAVED_REQUESTS)
    total_input_tokens: _Count = 0.0
    total_output_tokens: _Count = 0.0
    mean_tpot_ms: _Ms | None = None
    std_tpot_ms: _Spread | None = None
    mean_ttft_ms: _Ms | None = None
    std_ttft_ms: _Spread | None = None
    spec_decode_num_drafts: _Count | None = None
    spec_decode_per_position_acceptance_rates: (
        list[Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]] | None
    ) = None


def observations_from_vllm_bench(
    path: Path, data: dict[str, Any], name: str | None = None
) -> list[Observation]:
    """One ``vllm bench serve --save-result`` run (closed loop: ``--max-concurrency``), labelled
    ``name`` (default: the file's stem); a field of the wrong type or out of range raises
    :class:`ConfigError` naming it."""
    try:
        r = _VllmBenchResult.model_validate(data)
    except ValidationError as exc:
        raise invalid(path, "vllm bench serve result", exc) from None
    rate = r.request_rate
    finite_rate = isinstance(rate, float) and math.isfinite(rate)
    if r.max_concurrency is None or finite_rate or (isinstance(rate, str) and rate != "inf"):
        raise ConfigError(
            f"{path}: calibration needs a closed-loop run (vllm bench serve --max-concurrency N "
            "with the default request rate inf)"
        )
    conc, n = r.max_concurrency, r.completed
    if n <= 0:
        raise ConfigError(f"{path}: no completed requests")
    prompt, output = r.total_input_tokens / n, r.total_output_tokens / n
    if max(prompt, output) > MAX_MEAN_TOKENS:
        raise ConfigError(
            f"{path}: {max(prompt, output):,.0f} tokens per request (total_input_tokens or "
            f"total_output_tokens ÷ completed) is more than {MAX_MEAN_TOKENS:,}: not a real run"
        )
    per = r.spec_decode_per_position_acceptance_rates
    spec = bool(per) and bool(r.spec_decode_num_drafts)
    alpha = _alpha(list(per)) if spec and per else None
    tpot, ttft = r.mean_tpot_ms or None, r.mean_ttft_ms or None  # 0: none measured
    tpot_std, ttft_std = r.std_tpot_ms, r.std_ttft_ms
    # TPOT = (E2E − TTFT) ÷ (output − 1): one step per token without speculation; with it, the
    # decode time of a request over its steps (drafts per request)
    steps_per_request = (r.spec_decode_num_drafts or 0.0) / n if alpha else max(output - 1.0, 1.0)
    step = (
        tpot * max(output - 1.0, 1.0) / steps_per_request
        if tpot is not None and steps_per_request > 0
        else None
    )
    return [
        Observation(
            label=f"{name or path.stem} c{conc}",
            source=str(path),
            concurrency=conc,
            k=len(alpha) if alpha else 0,
            alpha_by_pos=alpha,
            prompt_tokens=np.full(n, max(1, round(prompt)), dtype=np.int64),
            output_tokens=np.full(n, max(1, round(output)), dtype=np.int64),
            step_ms=step,
            step_samples=n * steps_per_request,
            step_cv=min(max((tpot_std or tpot or 1.0) / (tpot or 1.0), 0.02), 2.0),
            ttft_ms=ttft,
            ttft_samples=float(n),
            ttft_cv=min(max((ttft_std or ttft or 1.0) / (ttft or 1.0), 0.02), 2.0),
        )
    ]


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: not a readable JSON file ({exc})") from None


def _is_vllm_bench(data: Any) -> bool:
    return isinstance(data, dict) and ("mean_tpot_ms" in data or "max_concurrency" in data)


def _sweep_runs(folder: Path) -> list[Path]:
    """The ``run=<n>.json`` files of a ``vllm bench sweep serve`` experiment folder (or of one
    combination's folder), in combination then run order."""

    def order(p: Path) -> tuple[str, int]:
        n = p.stem.removeprefix("run=")
        return p.parent.name, int(n) if n.isdigit() else -1

    runs = [*folder.glob("run=*.json"), *folder.glob("*/run=*.json")]
    return sorted((p for p in runs if not p.name.endswith(".failure.json")), key=order)


def _sweep_observations(folder: Path, runs: list[Path]) -> list[Observation]:
    out = []
    for run in runs:
        data = _read_json(run)
        if not _is_vllm_bench(data):
            raise ConfigError(f"{run}: not a vllm bench serve result (in a vllm bench sweep)")
        comb = run.parent.name if run.parent != folder else folder.name
        out += observations_from_vllm_bench(run, data, f"{comb} {run.stem}")
    return out


def read_observations(path: Path) -> list[Observation]:
    """Observations from an alphagate bench ``summary.json`` (or its folder), a vllm bench serve
    result, or a vllm bench sweep serve folder (every run under it)."""
    if path.is_dir():
        summary = path / "summary.json"
        runs = _sweep_runs(path)
        if runs and not (summary.is_file() and _is_bench_summary(_read_json(summary))):
            return _sweep_observations(path, runs)
        if not summary.is_file():
            raise ConfigError(
                f"{path}: no summary.json (an alphagate bench --out folder) and no run=<n>.json "
                "under it (a vllm bench sweep serve folder)"
            )
        path = summary
    if not path.is_file():
        raise ConfigError(f"{path}: no such file")
    data = _read_json(path)
    if _is_bench_summary(data):
        return observations_from_bench(path)
    if _is_vllm_bench(data):
        return observations_from_vllm_bench(path, data)
    if isinstance(data, list) and data and all(_is_vllm_bench(x) for x in data):
        # a sweep combination's summary.json: the list of its runs
        return [
            o
            for i, x in enumerate(data)
            for o in observations_from_vllm_bench(path, x, f"{path.parent.name} run={i}")
        ]
    raise ConfigError(
        f"{path}: neither an alphagate bench summary nor a vllm bench serve result (nor a vllm "
        "bench sweep serve folder or summary)"
    )


def _is_bench_summary(data: Any) -> bool:
    return isinstance(data, dict) and data.get("verb") == "bench"
