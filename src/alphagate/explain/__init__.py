"""``alphagate explain``: why a speculative candidate's tail latency moved against its baseline
— taken apart by mechanism over counterfactual replays of the same requests — and the remedies
that would move it back, each replayed and ranked (:mod:`alphagate.explain.run`)."""

from alphagate.explain.records import ExplainResult, LevelExplanation, Remedy
from alphagate.explain.run import ExplainConfig, explain_bench

__all__ = ["ExplainConfig", "ExplainResult", "LevelExplanation", "Remedy", "explain_bench"]
