"""Running scenarios: pick the fast closed-loop path or the step-by-step engine, pair baselines.

Randomness: one :class:`numpy.random.Generator` is split with ``spawn`` into one child per
scenario, so a scenario's draws do not depend on what else runs beside it. Same seed ⇒ same output.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from alphagate.sim.closed_loop import fast_path_applies, run_closed_loop
from alphagate.sim.cost import StepCostModel
from alphagate.sim.engine import RunTrace, Scenario, run_engine
from alphagate.sim.results import SimSummary, Speedups, speedups, summarize
from alphagate.sim.workload import RequestSet

__all__ = ["BaselineRuns", "PairedRun", "run_paired", "run_scenarios"]


def run_scenarios(
    cost: StepCostModel,
    scenarios: list[Scenario],
    rng: np.random.Generator,
    *,
    record_chunks: bool = False,
    force_engine: bool = False,
) -> list[RunTrace]:
    """Simulate every scenario; closed-loop ones take the step-space path unless ``force_engine``."""
    return [
        run_closed_loop(cost, sc, child, record_chunks=record_chunks)
        if not force_engine and fast_path_applies(sc, cost)
        else run_engine(cost, sc, child, record_chunks=record_chunks)
        for sc, child in zip(scenarios, rng.spawn(len(scenarios)), strict=True)
    ]


@dataclass(frozen=True)
class PairedRun:
    """A speculative scenario, its no-speculation twin, and their comparison."""

    spec: SimSummary
    baseline: SimSummary
    speedup: Speedups
    spec_trace: RunTrace
    baseline_trace: RunTrace


def run_paired(
    cost: StepCostModel,
    scenario: Scenario,
    rng: np.random.Generator,
    *,
    baseline_max_num_seqs: int | None = None,
    record_chunks: bool = False,
    baselines: BaselineRuns | None = None,
) -> PairedRun:
    """Run ``scenario`` and the same scenario with K = 0 (same requests, arrivals, lengths).

    Each arm holds its own largest batch: ``scenario.max_num_seqs`` the speculative server's,
    ``baseline_max_num_seqs`` the baseline's (None: the same), which holds more sequences where
    the drafter's KV takes room from the speculative one
    (:meth:`~alphagate.sim.cost.StepCostModel.arm_caps`).

    ``baselines``: baseline runs kept between calls. On the closed-loop path a run without
    speculation draws no random numbers and never reads the classes' acceptance, so the
    baseline of the same requests, cap and cost model is one run whatever the K and α beside it
    (a K sweep, a break-even search); the speculative arm's random numbers are the same as when
    both arms run (the first child of ``rng.spawn``).
    """
    base_sc = Scenario(
        k=0,
        arrivals=scenario.arrivals,
        requests=scenario.requests,
        unconditional=scenario.unconditional,
        max_num_seqs=baseline_max_num_seqs or scenario.max_num_seqs,
        label=f"{scenario.label} baseline".strip(),
    )
    held = None if baselines is None else baselines.get(cost, base_sc, record_chunks)
    if held is None:
        spec_t, base_t = run_scenarios(cost, [scenario, base_sc], rng, record_chunks=record_chunks)
        base_s = summarize(base_t)
        if baselines is not None:
            baselines.keep(cost, base_sc, record_chunks, base_t, base_s)
    else:
        (spec_t,) = run_scenarios(cost, [scenario], rng, record_chunks=record_chunks)
        base_t, base_s = held
    spec_s = summarize(spec_t)
    return PairedRun(spec_s, base_s, speedups(spec_s, base_s), spec_t, base_t)


class BaselineRuns:
    """Baseline runs kept between :func:`run_paired` calls, where one run serves them all: on
    the closed-loop path a run without speculation draws no random numbers and never reads the
    classes' acceptance, so the baseline of the same requests, cap and cost model is the same
    whatever the K and α beside it (a K sweep, a break-even search). The speculative arm's
    random numbers stay those of a run of both arms (the first child of ``rng.spawn``)."""

    def __init__(self) -> None:
        # keyed by identity; the entry holds the cost model and the lengths, so no id is reused
        self._runs: dict[tuple[object, ...], _Held] = {}

    @staticmethod
    def _key(cost: StepCostModel, base: Scenario, record_chunks: bool) -> tuple[object, ...]:
        req = base.requests
        return (id(cost), id(req.prompt_len), id(req.output_len), base.arrivals,
                base.max_num_seqs, record_chunks)  # fmt: skip

    def get(
        self, cost: StepCostModel, base: Scenario, record_chunks: bool
    ) -> tuple[RunTrace, SimSummary] | None:
        held = self._runs.get(self._key(cost, base, record_chunks))
        return None if held is None else (held.trace, held.summary)

    def keep(
        self,
        cost: StepCostModel,
        base: Scenario,
        record_chunks: bool,
        trace: RunTrace,
        summary: SimSummary,
    ) -> None:
        if fast_path_applies(base, cost):
            self._runs[self._key(cost, base, record_chunks)] = _Held(
                cost, base.requests, trace, summary
            )


@dataclass(frozen=True)
class _Held:
    cost: StepCostModel
    requests: RequestSet
    trace: RunTrace
    summary: SimSummary
