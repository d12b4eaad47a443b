"""The glossary: the three acceptance quantities and the cost ratios, in one wording.

alphagate keeps three acceptance quantities apart everywhere:

- ``alpha`` (α): the *conditional* probability that a draft token is accepted given that all
  earlier draft tokens in the same block were accepted (Leviathan et al. 2023, Def. 3.2 and
  Cor. 3.6). ``alpha_by_pos`` is the position-dependent version (EAGLE's n-α).
- ``draft_acceptance_rate`` (ρ): accepted draft tokens ÷ drafted tokens. This is what vLLM calls
  "Avg Draft acceptance rate" — an *unconditional*, position-averaged fraction.
- ``mean_acceptance_length`` (τ): tokens emitted per target pass *including the bonus token*,
  ``1 + accepted ÷ drafts`` (vLLM ``vllm/v1/spec_decode/metrics.py``; EAGLE §4).

Every printed number says which of the three it is; :data:`GLOSSARY` holds the wording.
"""

from __future__ import annotations

from typing import Final

__all__ = ["GLOSSARY"]


GLOSSARY: Final[dict[str, str]] = {
    "alpha": (
        "α — conditional per-token acceptance probability (Leviathan et al. 2023): the chance a "
        "draft token is accepted given the earlier drafts in its block were."
    ),
    "draft_acceptance_rate": (
        "ρ — accepted draft tokens ÷ drafted tokens (vLLM's 'Avg Draft acceptance rate'): "
        "unconditional, averaged over positions. ρ = (τ − 1) / K."
    ),
    "mean_acceptance_length": (
        "τ — tokens emitted per target pass including the bonus token (vLLM 'Mean acceptance "
        "length', SGLang 'accept len'): τ = 1 + accepted ÷ drafts."
    ),
    "expected_tokens_per_pass": (
        "E — expected tokens per target pass: (1 − α^(K+1)) / (1 − α) for i.i.d. α "
        "(Leviathan Eq. 1). Equal to τ in expectation."
    ),
    "draft_cost": (
        "c — time of one draft forward ÷ time of one plain target decode step (Leviathan Def. 3.7)."
    ),
    "verify_cost": (
        "v — time of one target pass over K+1 tokens per sequence ÷ one plain decode step "
        "(Leviathan assumes v = 1)."
    ),
}
