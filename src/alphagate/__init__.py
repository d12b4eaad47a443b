"""alphagate — measure α before you flip the flag.

Models, simulates, measures, benchmarks, gates and plans speculative decoding (EAGLE-3, EAGLE,
draft models, n-gram, MTP) for vLLM and SGLang deployments.

The public API, loaded on first use (``import alphagate`` stays instant)::

    import alphagate as ag

    ag.speedup(0.7, 5)                                    # closed form: 2.941×
    ag.simulate(ag.SweepConfig(alphas=(0.7,), concurrencies=(1, 64)))
    ag.build_plan(ag.PlanRequest(workload=ag.WorkloadConfig(classes=(ag.TrafficClass(
        name="chat", share=1.0, alpha=0.7),)), concurrency=64))
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

#: public name → module that defines it
_EXPORTS: dict[str, str] = {
    # closed forms (Leviathan et al. 2023) and the three acceptance quantities
    "expected_tokens_per_pass": "alphagate.theory",
    "speedup": "alphagate.theory",
    "alpha_breakeven": "alphagate.theory",
    "alpha_for_speedup": "alphagate.theory",
    "optimal_k": "alphagate.theory",
    "blend": "alphagate.theory",
    "draft_acceptance_rate": "alphagate.theory",
    "mean_acceptance_length": "alphagate.theory",
    "alpha_from_draft_acceptance_rate": "alphagate.theory",
    "alpha_from_mean_acceptance_length": "alphagate.theory",
    # configuration
    "TrafficClass": "alphagate.core.traffic",
    "DeploymentConfig": "alphagate.specs.deployment",
    "WorkloadConfig": "alphagate.specs.workload",
    "drafter_for": "alphagate.specs.deployment",
    # simulation
    "SweepConfig": "alphagate.sim.sweep",
    "SweepResult": "alphagate.sim.sweep",
    "simulate": "alphagate.sim.sweep",
    # plans
    "PlanRequest": "alphagate.plan.records",
    "Plan": "alphagate.plan.records",
    "build_plan": "alphagate.api",
    # benchmarks and results
    "BenchConfig": "alphagate.bench.config",
    "Level": "alphagate.bench.config",
    "BenchResult": "alphagate.bench.records",
    "RequestRecord": "alphagate.bench.records",
    "run_bench": "alphagate.bench.run",
    "Speedups": "alphagate.sim.results",
    "SLO": "alphagate.bench.slo",
    "parse_slo": "alphagate.bench.slo",
    "Sweep": "alphagate.bench.sweep",
    "load_trace": "alphagate.bench.trace",
    # measuring acceptance, and the gate
    "AcceptanceEstimate": "alphagate.measure.estimate",
    "estimate": "alphagate.measure.estimate",
    "MeasureResult": "alphagate.measure.results",
    "LiveConfig": "alphagate.measure.live",
    "measure_live": "alphagate.measure.live",
    "PrometheusQuery": "alphagate.measure.prometheus",
    "measure_prometheus": "alphagate.measure.prometheus",
    "measure_logs": "alphagate.measure.logs",
    "Rule": "alphagate.gate.rules",
    "RuleSet": "alphagate.gate.rules",
    "rules_from_plan": "alphagate.gate.rules",
    "rule_set": "alphagate.gate.rules",
    "Evidence": "alphagate.gate.evidence",
    "evaluate": "alphagate.gate.evaluate",
    "GateResult": "alphagate.gate.evaluate",
}

__all__ = ["__version__", *sorted(_EXPORTS)]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'alphagate' has no attribute {name!r}")


def __dir__() -> list[str]:
    return __all__
