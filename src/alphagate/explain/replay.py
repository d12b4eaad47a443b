"""A bench A/B level as the simulator replays it: the candidate's requests run by run (their
order, prompt and output lengths from the server's ``usage``, classes, and open-loop send times),
the candidate's K and acceptance per class and position, and what each side held at once.

Acceptance comes from the best source the run has, in order: the server's per-request counts
(vLLM ``--per-request-spec-decode-metrics``), its ``/metrics`` counters over the level (or saved
scrapes), and last the sizes of the streamed chunks (one chunk per engine step,
:func:`alphagate.bench.chunks.chunk_acceptance`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from alphagate.bench.chunks import chunk_acceptance
from alphagate.bench.records import LevelSummary, RequestRecord
from alphagate.core.errors import ConfigError
from alphagate.core.traffic import TrafficClass
from alphagate.measure.estimate import AcceptanceEstimate
from alphagate.sim.workload import ClosedLoop, OpenLoop, RequestSet
from alphagate.specs.workload import EmpiricalLength, WorkloadConfig

__all__ = [
    "DEFAULT_CLASS",
    "LevelReplay",
    "Runs",
    "candidate_k",
    "class_alphas",
    "level_replay",
    "measured",
    "observed_batch",
    "peak_overlap",
    "side_runs",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
#: one side's finished requests of a level, by run (``--repeats``), in send order
Runs = dict[int, list[RequestRecord]]
#: the class of a request the dataset gave none
DEFAULT_CLASS = "default"


def side_runs(records: Iterable[RequestRecord], target: str, level: str) -> Runs:
    """The finished requests of one side of a level, by run, in the order they were sent; only
    those with the server's token counts. Warm-up requests are kept (they loaded the server the
    measured ones met); :func:`measured` marks the others."""
    out: Runs = {}
    for r in records:
        mine = r.target == target and r.level == level and r.ok
        if mine and r.prompt_tokens and r.output_tokens:
            out.setdefault(r.repeat, []).append(r)
    return {k: sorted(v, key=lambda r: r.send_s) for k, v in sorted(out.items())}


def measured(records: list[RequestRecord]) -> npt.NDArray[np.bool_]:
    """Which of ``records`` are measurements (not warm-up), shape ``[n]``."""
    return np.asarray([not r.warmup for r in records], dtype=bool)


def candidate_k(level: LevelSummary, runs: Runs) -> tuple[int, str]:
    """The candidate's K (the largest, for a batch-size schedule) and where it came from."""
    ks = {r.spec.k for rs in runs.values() for r in rs if r.spec is not None and r.spec.k}
    if ks:
        return max(ks), "the server's per-request counts (num_spec_tokens)"
    if level.acceptance is not None and level.acceptance.k:
        return level.acceptance.k, "the server's /metrics counters"
    top = max((t for rs in runs.values() for r in rs for t in r.chunk_tokens[1:-1]), default=1)
    if top <= 1:
        raise ConfigError(
            f"level {level.level}: the candidate never streamed a chunk of more than one token, "
            "and its server reported no speculative counts: it does not look speculative"
        )
    return top - 1, "the largest streamed chunk (K + 1 tokens when every draft is accepted)"


def _alphas(est: AcceptanceEstimate, k: int) -> tuple[float, ...] | None:
    """Conditional α per position 1..k from an estimate: its per-position figures where every
    position has one, else its i.i.d. α (None: neither)."""
    by_pos = est.alpha_by_pos
    if est.k == k and len(by_pos) == k and all(a is not None for a in by_pos):
        return tuple(float(min(max(a or 0.0, 0.0), 1.0)) for a in by_pos)
    if est.alpha_iid is not None:
        return (float(est.alpha_iid),) * k
    return None


def class_alphas(
    level: LevelSummary, runs: Runs, k: int, metrics: AcceptanceEstimate | None = None
) -> tuple[dict[str, tuple[float, ...]], str]:
    """α per position for each class of the level's requests, and the source (see the module
    docstring); a class without a figure of its own takes the level's."""
    names = sorted({r.cls or DEFAULT_CLASS for rs in runs.values() for r in rs})
    ra = level.request_acceptance
    overall: tuple[float, ...] | None = None
    source = ""
    for est, where in (
        (ra.overall if ra else None, "the server's per-request counts"),
        (level.acceptance, "the server's /metrics counters over the level"),
        (metrics, "the saved /metrics scrapes"),
    ):
        if est is not None and est.num_drafts > 0 and (a := _alphas(est, k)) is not None:
            overall, source = a, where
            break
    if overall is None:
        est, _ = chunk_acceptance([r for rs in runs.values() for r in rs], k)
        overall = _alphas(est, k) or (0.0,) * k
        source = "the sizes of the streamed chunks"
    per_class = dict(ra.classes) if ra is not None and source.endswith("per-request counts") else {}
    out = {}
    for name in names:
        own = per_class.get(name)
        out[name] = (_alphas(own, k) if own is not None and own.num_drafts > 0 else None) or overall
    return out, source


def peak_overlap(starts: FloatArray, ends: FloatArray) -> int:
    """The most intervals [start, end) open at once (an end before a start at the same time)."""
    times = np.concatenate([starts, ends])
    step = np.concatenate([np.ones(starts.size), -np.ones(ends.size)])
    order = np.lexsort((step, times))
    return int(np.cumsum(step[order]).max(initial=0))


def observed_batch(runs: Runs) -> int:
    """The most requests the client saw streaming at once (first token to last): a lower bound
    on what the server held."""
    return max(
        (
            peak_overlap(
                np.asarray([r.send_s + (r.ttft_s or 0.0) for r in recs]),
                np.asarray([r.send_s + (r.e2e_s or 0.0) for r in recs]),
            )
            for recs in runs.values()
        ),
        default=0,
    )


@dataclass(frozen=True)
class LevelReplay:
    """The candidate's requests of one level, ready to replay: one request set per run."""

    level: LevelSummary
    runs: list[RequestSet]
    arrivals: list[ClosedLoop | OpenLoop]
    records: list[RequestRecord]  # the candidate's, in replay order: request i of the sets
    classes: tuple[TrafficClass, ...]
    workload: WorkloadConfig
    k: int
    k_source: str
    alpha_source: str
    ids: list[IntArray]  # each run's requests' indices among ``records``

    @property
    def n(self) -> int:
        return len(self.records)

    def subset(self, keep: npt.NDArray[np.bool_], users: int | None) -> LevelReplay:
        """The requests ``keep`` marks (shape ``[n]``), each run's kept in order, sent by
        ``users`` closed-loop users (an open loop keeps its send times)."""
        runs, arrivals, ids = [], [], []
        for reqs, arr, idx in zip(self.runs, self.arrivals, self.ids, strict=True):
            mask = keep[idx]
            if not mask.any():
                continue
            sel = np.nonzero(mask)[0]
            runs.append(
                RequestSet(
                    reqs.prompt_len[sel], reqs.output_len[sel], reqs.class_idx[sel],
                    reqs.arrival_s[sel],
                )
            )  # fmt: skip
            fits = isinstance(arr, ClosedLoop) and users is not None
            arrivals.append(ClosedLoop(users=users) if fits and users is not None else arr)
            ids.append(idx[sel])
        return replace(self, runs=runs, arrivals=arrivals, ids=ids)


def _arrivals(
    level: LevelSummary, recs: list[RequestRecord]
) -> tuple[ClosedLoop | OpenLoop, FloatArray]:
    """A run's arrivals: closed loop at the level's concurrency, else its send times."""
    if level.concurrency is not None and level.rate is None and level.time_scale is None:
        return ClosedLoop(users=level.concurrency), np.full(len(recs), np.nan)
    at = np.asarray([r.scheduled_s if r.scheduled_s is not None else r.send_s for r in recs])
    at = np.asarray(at - at.min(), dtype=np.float64)
    span = float(at.max())
    rate = level.rate or (len(recs) / span if span > 0 else 1.0)
    return OpenLoop(rate=rate), at


def level_replay(
    level: LevelSummary, runs: Runs, metrics: AcceptanceEstimate | None = None
) -> LevelReplay:
    """The candidate side of ``level`` (its ``runs``) as the simulator's inputs."""
    if not runs:
        raise ConfigError(f"level {level.level}: the candidate finished no measured request")
    k, k_source = candidate_k(level, runs)
    alphas, alpha_source = class_alphas(level, runs, k, metrics)
    names = sorted(alphas)
    records = [r for rs in runs.values() for r in rs]
    out_tokens = {n: sum(r.output_tokens or 0 for r in records if (r.cls or DEFAULT_CLASS) == n)
                  for n in names}  # fmt: skip
    total = sum(out_tokens.values())
    classes = tuple(
        TrafficClass(name=n, share=out_tokens[n] / total, alpha_by_pos=alphas[n]) for n in names
    )
    sets: list[RequestSet] = []
    arrivals: list[ClosedLoop | OpenLoop] = []
    ids: list[IntArray] = []
    for recs in runs.values():
        ids.append(np.arange(len(recs), dtype=np.int64) + sum(s.n for s in sets))
        arr, at = _arrivals(level, recs)
        sets.append(
            RequestSet(
                prompt_len=np.asarray([r.prompt_tokens for r in recs], dtype=np.int64),
                output_len=np.asarray([r.output_tokens for r in recs], dtype=np.int64),
                class_idx=np.asarray(
                    [names.index(r.cls or DEFAULT_CLASS) for r in recs], dtype=np.int64
                ),
                arrival_s=at,
            )
        )
        arrivals.append(arr)
    workload = WorkloadConfig(
        prompt_len=EmpiricalLength(values=tuple(int(r.prompt_tokens or 1) for r in records)),
        output_len=EmpiricalLength(values=tuple(int(r.output_tokens or 1) for r in records)),
        classes=classes,
    )
    return LevelReplay(
        level, sets, arrivals, records, classes, workload, k, k_source, alpha_source, ids
    )
