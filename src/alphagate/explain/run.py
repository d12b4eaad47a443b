"""``alphagate explain``: why a speculative candidate's tail moved against its baseline, level by
level, and what would move it back.

For each load level of a bench A/B: (1) the candidate's requests become the simulator's inputs
(:mod:`~alphagate.explain.replay`); (2) the largest batch each side held is read from the data;
(3) the requests are replayed with every subset of the mechanisms removed
(:mod:`~alphagate.explain.lattice`) and each figure's change is taken apart
(:mod:`~alphagate.explain.attribution`); (4) the remedies are replayed and ranked
(:mod:`~alphagate.explain.remedies`); (5) the candidate's worst requests are laid out chunk by
chunk (:mod:`~alphagate.explain.timelines`).
"""

from __future__ import annotations

import math

import numpy as np
from pydantic import Field

from alphagate.bench.records import BenchResult, LevelSummary, RequestRecord
from alphagate.core.errors import ConfigError
from alphagate.core.records import Frozen
from alphagate.explain.attribution import attribute, interval
from alphagate.explain.lateness import gap_lateness
from alphagate.explain.lattice import Figures, Lattice, figures, tail_figures
from alphagate.explain.records import (
    EFFECTS,
    METRICS,
    ExplainResult,
    Factor,
    LevelExplanation,
    Mechanism,
    Metric,
    MetricExplanation,
)
from alphagate.explain.remedies import Context, remedies
from alphagate.explain.replay import (
    LevelReplay,
    Runs,
    level_replay,
    measured,
    observed_batch,
    side_runs,
)
from alphagate.explain.samples import Variant, measured_samples, replay, resamples
from alphagate.explain.timelines import worst_timelines
from alphagate.measure.estimate import AcceptanceEstimate
from alphagate.sim.cost import StepCostModel, build_cost_model
from alphagate.sim.workload import unconditional_table
from alphagate.specs.deployment import ResolvedDeployment

__all__ = ["ExplainConfig", "explain_bench"]

#: a simulated baseline this far (×) from the measured one is reported as a fidelity problem
FIDELITY = 1.25


class ExplainConfig(Frozen):
    """How hard ``explain`` looks."""

    bootstrap: int = 200
    seeds: int = 2
    seed: int = 0
    worst: int = 3
    levels: tuple[str, ...] | None = None
    p99_budget: float = Field(
        default=1.0,
        gt=0,
        description="a remedy fixes the tail when its P99 ITL per token and P99 TTFT are at most "
        "this × the baseline's",
    )


def _load(level: LevelSummary, runs: Runs) -> int:
    """The level's concurrency, or (open loop) the most requests seen at once."""
    return level.concurrency if level.concurrency is not None else max(observed_batch(runs), 1)


#: a side whose client saw fewer requests streaming at once than this share of what the replay
#: without a cap streams (and at least one fewer) was held to what it saw
HELD = 0.9


def _cap(plan: LevelReplay, cost: StepCostModel, runs: Runs, k: int, ceiling: int) -> int:
    """The largest batch one side held: the most requests the client saw streaming at once,
    when the replay without a cap streams clearly more of them at once (a queue the prefills
    alone do not make), else ``ceiling``."""
    seen = observed_batch(runs)
    if seen >= min(_load(plan.level, runs), ceiling):
        return ceiling
    free = replay(plan, Variant(cost, k, unconditional_table(plan.classes, k), ceiling), seeds=1)
    return seen if seen < min(HELD * free.peak_streams, free.peak_streams - 1) else ceiling


def _caps(
    plan: LevelReplay, cost: StepCostModel, runs: tuple[Runs, Runs], max_num_seqs: int
) -> tuple[tuple[int, int], str]:
    """Each side's largest batch: what the data show it held, at most what the deployment holds
    on these requests (:meth:`~alphagate.sim.cost.StepCostModel.arm_caps`: ``max_num_seqs``, or
    less where its KV room — the candidate's shared with the drafter — fits fewer)."""
    ceiling = cost.arm_caps(plan.k, plan.workload.mean_sequence_tokens(), max_num_seqs)
    base = _cap(plan, cost, runs[0], 0, ceiling.baseline)
    cand = _cap(plan, cost, runs[1], plan.k, ceiling.speculative)
    held = (ceiling.baseline, ceiling.speculative)
    if (base, cand) == held == (max_num_seqs, max_num_seqs):
        return (base, cand), f"neither side was seen held below --max-num-seqs {max_num_seqs}"
    if (base, cand) == held:
        return (base, cand), (
            f"what each side's KV room holds on these requests ({ceiling.baseline} without "
            f"the drafter, {ceiling.speculative} with it); neither was seen held below it"
        )
    return (base, cand), (
        "the most requests seen streaming at once, where a queue of that size reproduces the "
        "measured TTFT"
    )


def _why(label: str, ratio: float, factors: list[Factor]) -> str:
    """``ITL/token P99 rose 1.19×: 71% rejection streaks (…), 29% verify-step growth``."""
    rising = [f for f in factors if f.share is not None]
    if ratio <= 1 or not rising:
        return f"{label} did not rise ({ratio:.2f}×)"
    top = rising[0]
    parts = [f"{round(100 * (f.share or 0))}% {f.label}" for f in rising]
    effect = "; ".join(EFFECTS[m] for m in top.mechanisms)
    return f"{label} rose {ratio:.2f}×: " + ", ".join(parts) + f" — {effect}"


def _metric(
    metric: Metric,
    lattice: Lattice,
    players: list[Mechanism],
    measured: tuple[Figures, Figures],
) -> MetricExplanation:
    base, cand = measured
    log_measured = np.log(cand[metric] / base[metric])
    att = attribute(players, lambda s: lattice.log_ratio(metric, s), log_measured)
    sim_b, sim_c = lattice.baseline()[metric][0], lattice.candidate()[metric][0]
    return MetricExplanation(
        metric=metric,
        label=METRICS[metric],
        baseline_ms=float(base[metric][0]),
        candidate_ms=float(cand[metric][0]),
        ratio=float(math.exp(log_measured[0])),
        ratio_interval=interval(log_measured, np.exp),
        simulated_baseline_ms=float(sim_b),
        simulated_candidate_ms=float(sim_c),
        simulated_ratio=float(sim_c / sim_b),
        engine_ratio=float(np.exp(lattice.log_ratio(metric, frozenset({"client"}))[0])),
        gain=float(math.exp(att.gain[0])),
        residual=float(math.exp(att.residual[0])),
        residual_interval=interval(att.residual, np.exp),
        factors=att.factors,
        inseparable=att.inseparable,
        why=_why(METRICS[metric], math.exp(log_measured[0]), att.factors),
    )


def _notes(
    level: LevelSummary, base: LevelSummary | None, metrics: list[MetricExplanation]
) -> list[str]:
    notes = []
    for lv in (base, level):
        if lv is not None and lv.validity is not None and lv.validity.distorted:
            why = "; ".join(lv.validity.reasons) or "see its validity figures"
            notes.append(
                f"the {lv.target} run was distorted ({why}): part of the change is the client's"
            )
    for m in metrics:
        for side, sim, meas in (
            ("baseline", m.simulated_baseline_ms, m.baseline_ms),
            ("candidate", m.simulated_candidate_ms, m.candidate_ms),
        ):
            if meas > 0 and not 1 / FIDELITY <= sim / meas <= FIDELITY:
                notes.append(
                    f"{m.label}: the simulated {side} ({sim:.1f} ms) is {sim / meas:.2f}× the "
                    f"measured ({meas:.1f} ms): the step-time model does not fit this server "
                    "there (alphagate calibrate fits it; explain --calibration uses the profile)"
                )
    return notes


def _level(
    result: BenchResult,
    records: list[RequestRecord],
    label: str,
    resolved: ResolvedDeployment,
    cfg: ExplainConfig,
    metrics: AcceptanceEstimate | None,
) -> LevelExplanation | None:
    by = {(lv.target, lv.level): lv for lv in result.levels}
    cand_level, base_level = by.get(("candidate", label)), by.get(("baseline", label))
    base_runs = side_runs(records, "baseline", label)
    cand_runs = side_runs(records, "candidate", label)
    if cand_level is None or not base_runs or not cand_runs:
        return None
    plan = level_replay(cand_level, cand_runs, metrics)
    cost = build_cost_model(resolved)
    caps, cap_source = _caps(plan, cost, (base_runs, cand_runs), resolved.config.max_num_seqs)
    rng = np.random.default_rng(cfg.seed)
    counts = resamples(measured(plan.records), cfg.bootstrap, rng)
    base_records = [r for rs in base_runs.values() for r in rs]
    lateness = (
        gap_lateness(None if base_level is None else base_level.validity, seed=cfg.seed),
        gap_lateness(cand_level.validity, seed=cfg.seed + 1),
    )
    lattice = Lattice(plan, cost, caps, counts, lateness, cfg.seeds, cfg.seed)
    base_counts = resamples(measured(base_records), cfg.bootstrap, rng)
    cand_samples = measured_samples(plan.records)
    seen = (
        figures(measured_samples(base_records), base_counts),
        figures(cand_samples, lattice.counts),
    )
    players: list[Mechanism] = ["rejection", "verify", "prefill", "client"]
    if caps[0] != caps[1]:
        players.append("capacity")
    explained = [_metric(m, lattice, players, seen) for m in METRICS]
    tail = tail_figures(cand_samples, lattice.counts)
    ctx = Context(
        lattice, resolved, seen[1], seen[0], tail, result.model, _load(cand_level, cand_runs),
        cfg.p99_budget,
    )  # fmt: skip
    return LevelExplanation(
        level=label,
        concurrency=cand_level.concurrency,
        rate=cand_level.rate,
        requests=plan.n,
        k=plan.k,
        k_source=plan.k_source,
        classes={c.name: [float(a) for a in c.conditional(plan.k)] for c in plan.classes},
        alpha_source=plan.alpha_source,
        batch_cap=caps,
        batch_cap_source=cap_source,
        metrics=explained,
        remedies=remedies(ctx),
        worst=worst_timelines(plan.records, plan.k, cfg.worst),
        notes=_notes(cand_level, base_level, explained),
    )


def explain_bench(
    result: BenchResult,
    records: list[RequestRecord],
    resolved: ResolvedDeployment,
    *,
    source: str,
    config: ExplainConfig | None = None,
    calibration: str | None = None,
    metrics: AcceptanceEstimate | None = None,
) -> ExplainResult:
    """Every level of the A/B ``result`` (its ``records``) explained on the step-time model of
    ``resolved``; ``metrics``: acceptance from saved ``/metrics`` scrapes, for a run whose bench
    scraped none. Raises :class:`ConfigError` for a run that is not an A/B."""
    cfg = config or ExplainConfig()
    labels = list(dict.fromkeys(lv.level for lv in result.levels if lv.target == "candidate"))
    if not labels or not any(lv.target == "baseline" for lv in result.levels):
        raise ConfigError(
            f"{source}: not an A/B (bench --baseline-url … --candidate-url …): explain compares "
            "a speculative candidate with its baseline"
        )
    if cfg.levels is not None:
        unknown = [x for x in cfg.levels if x not in labels]
        if unknown:
            raise ConfigError(
                f"{source}: no level {', '.join(unknown)} (it has {', '.join(labels)})", "level"
            )
        labels = [x for x in labels if x in cfg.levels]
    levels = [_level(result, records, label, resolved, cfg, metrics) for label in labels]
    return ExplainResult(
        bench=source,
        run_id=result.run_id,
        deployment=resolved.describe(),
        calibration=calibration,
        levels=[lv for lv in levels if lv is not None],
        bootstrap=cfg.bootstrap,
        notes=[
            f"level {label}: one side has no finished request"
            for label, lv in zip(labels, levels, strict=True)
            if lv is None
        ],
    )
