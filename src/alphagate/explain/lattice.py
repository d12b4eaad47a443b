"""The counterfactual replays of one level and their tail figures in every resample.

:class:`Lattice` replays the level's requests once per server configuration it is asked for
(cached) — the candidate with any subset of the mechanisms removed, the baseline with prefills
in or apart — and turns each replay into the figures :mod:`alphagate.explain.attribution` takes
apart: P99 and P99.9 ITL per token, P99 TTFT, per resample of the requests — each with the
lateness each side's client measured added to the replays' gaps, unless the client's part is the
one removed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from alphagate.explain.lateness import with_lateness
from alphagate.explain.records import Mechanism, Metric
from alphagate.explain.replay import LevelReplay
from alphagate.explain.samples import (
    Samples,
    Variant,
    decode_priced,
    quantiles,
    replay,
    tail_means,
)
from alphagate.sim.cost import StepCostModel
from alphagate.sim.workload import unconditional_table

__all__ = ["TAIL_FROM", "Figures", "Lattice", "figures", "tail_figures"]

FloatArray = npt.NDArray[np.float64]
#: every figure, per resample (row 0: the data as they are)
Figures = dict[Metric, FloatArray]
#: the quantile above which :func:`tail_figures` takes its means
TAIL_FROM = 0.95


def figures(
    samples: Samples,
    counts: FloatArray,
    *,
    even: bool = False,
    lateness: FloatArray | None = None,
) -> Figures:
    """The tail figures (ms) of ``samples`` in every resample ``counts``; ``even``: each
    request's tokens spread evenly over its chunks (no rejection streaks); ``lateness``: the
    gaps as a client that measured this lateness would have seen them
    (:func:`~alphagate.explain.lateness.with_lateness`)."""
    weights = samples.mean_tokens if even else samples.tokens
    gaps = with_lateness(samples.gap_s, lateness)
    itl = quantiles(gaps / weights, weights, samples.request, counts, [0.99, 0.999])
    ones = np.ones_like(samples.ttft_s)
    ttft = quantiles(samples.ttft_s, ones, samples.ttft_request, counts, [0.99])
    return {
        "itl_per_token_p99_ms": itl[0] * 1e3,
        "itl_per_token_p99_9_ms": itl[1] * 1e3,
        "ttft_p99_ms": ttft[0] * 1e3,
    }


def tail_figures(
    samples: Samples, counts: FloatArray, *, lateness: FloatArray | None = None
) -> Figures:
    """The mean above the :data:`TAIL_FROM` quantile (ms) of what each figure is a quantile of —
    ITL per token, weighted by tokens, for both ITL figures; TTFT per request — in every
    resample: a tail statistic that does not jump where the distribution does."""
    gaps = with_lateness(samples.gap_s, lateness)
    itl = tail_means(gaps / samples.tokens, samples.tokens, samples.request, counts, TAIL_FROM)
    ones = np.ones_like(samples.ttft_s)
    ttft = tail_means(samples.ttft_s, ones, samples.ttft_request, counts, TAIL_FROM)
    return {
        "itl_per_token_p99_ms": itl * 1e3,
        "itl_per_token_p99_9_ms": itl * 1e3,
        "ttft_p99_ms": ttft * 1e3,
    }


@dataclass
class Lattice:
    """Replays of one level's requests (see the module docstring), cached per configuration."""

    plan: LevelReplay
    cost: StepCostModel
    caps: tuple[int, int]  # the largest batch: baseline, candidate
    counts: FloatArray  # [n_resamples, n_requests]
    lateness: tuple[FloatArray, FloatArray]  # each side's measured gap lateness (s)
    seeds: int = 2
    seed: int = 0
    _samples: dict[tuple[object, ...], Samples] = field(default_factory=dict)
    _figures: dict[tuple[object, ...], Figures] = field(default_factory=dict)

    def run(self, variant: Variant, key: tuple[object, ...]) -> Samples:
        """The replay of ``variant`` (cached under ``key``)."""
        if key not in self._samples:
            self._samples[key] = replay(self.plan, variant, seeds=self.seeds, seed=self.seed)
        return self._samples[key]

    def candidate_variant(self, removed: frozenset[Mechanism] = frozenset()) -> Variant:
        """The candidate with the mechanisms in ``removed`` taken out (rejection is removed
        from its figures, not its replay)."""
        k = self.plan.k
        return Variant(
            cost=decode_priced(self.cost) if "verify" in removed else self.cost,
            k=k,
            table=unconditional_table(self.plan.classes, k),
            cap=self.caps[0] if "capacity" in removed else self.caps[1],
            prefill_apart="prefill" in removed,
        )

    def baseline_variant(self, removed: frozenset[Mechanism] = frozenset()) -> Variant:
        return Variant(
            cost=self.cost,
            k=0,
            table=unconditional_table(self.plan.classes, 0),
            cap=self.caps[0],
            prefill_apart="prefill" in removed,
        )

    def candidate(self, removed: frozenset[Mechanism] = frozenset()) -> Figures:
        key = ("candidate", *sorted(removed))
        if key not in self._figures:
            replay_key = ("candidate", *sorted(removed - {"rejection"}))
            samples = self.run(self.candidate_variant(removed), replay_key)
            late = None if "client" in removed else self.lateness[1]
            self._figures[key] = figures(
                samples, self.counts, even="rejection" in removed, lateness=late
            )
        return self._figures[key]

    def candidate_tail(self) -> Figures:
        """:func:`tail_figures` of the candidate's replay, with its client's lateness."""
        key = ("candidate-tail",)
        if key not in self._figures:
            samples = self.run(self.candidate_variant(), ("candidate",))
            self._figures[key] = tail_figures(samples, self.counts, lateness=self.lateness[1])
        return self._figures[key]

    def baseline(self, removed: frozenset[Mechanism] = frozenset()) -> Figures:
        replay_key = ("baseline", "prefill" in removed)
        key = (*replay_key, "client" in removed)
        if key not in self._figures:
            samples = self.run(self.baseline_variant(removed), replay_key)
            late = None if "client" in removed else self.lateness[0]
            self._figures[key] = figures(samples, self.counts, lateness=late)
        return self._figures[key]

    def chunk_rates(self) -> tuple[float, float]:
        """Chunks per second the replays of the baseline and the candidate stream."""
        base = self.run(self.baseline_variant(), ("baseline", False))
        cand = self.run(self.candidate_variant(), ("candidate",))
        return base.chunk_rate, cand.chunk_rate

    def log_ratio(self, metric: Metric, removed: frozenset[Mechanism]) -> FloatArray:
        """g(S): log(candidate ÷ baseline) of ``metric`` with ``removed`` taken out."""
        return np.log(self.candidate(removed)[metric] / self.baseline(removed)[metric])
