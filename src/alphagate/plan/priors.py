"""Documented prior ranges of the conditional acceptance α, per drafting method and traffic kind.

These stand in for a measurement until Stage 2 of the rollout measures α on real traffic; every
plan that uses one says so. Sources:

- EAGLE-3 (Li et al. 2025, arXiv 2503.01840): τ 5.6–6.1 at tree depth 8 on chat benchmarks,
  a chain-equivalent α ≈ 0.88–0.90 at temperature 0 and lower at temperature 1; heads measured with
  proper rejection sampling at T = 1 (HF card nebius/EAGLE3-Llama-3.3-70B-Instruct) give τ 2.8–3.9
  at K = 7 on MT-bench, α ≈ 0.6–0.75 — hence 0.6–0.8 for a general head on chat and 0.4–0.6 for a
  general head on domain or code traffic it was not trained on;
- EAGLE-1 (Li et al. 2024, arXiv 2401.15077) and vLLM PR #16035: τ 1.9–2.1 at K = 2–4 on MT-bench;
- classic draft models: Leviathan et al. 2023 Table 3 (α 0.6–0.8 for same-family drafts, much lower
  across families), and vLLM users' reports of 0.3–0.5 for small general drafts;
- n-gram: vLLM PR #24344 (per-position 0.81 → 0.66 on code edits, blazedit; low on open chat);
- MTP: published first-position acceptance of native MTP modules ≈ 0.8–0.9.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ["PRIORS", "Prior", "prior_for", "traffic_kind"]


@dataclass(frozen=True)
class Prior:
    low: float
    high: float
    note: str

    @property
    def mid(self) -> float:
        return 0.5 * (self.low + self.high)


PRIORS: Final[dict[tuple[str, str], Prior]] = {
    ("eagle3", "chat"): Prior(0.6, 0.8, "EAGLE-3 head on general chat"),
    ("eagle3", "domain"): Prior(0.4, 0.6, "general EAGLE-3 head on domain traffic"),
    ("eagle3", "code"): Prior(0.4, 0.6, "general EAGLE-3 head on code"),
    ("eagle3", "copy"): Prior(0.5, 0.7, "EAGLE-3 head on copy-heavy traffic (RAG, summarisation)"),
    ("eagle", "chat"): Prior(0.5, 0.6, "EAGLE-1 head on general chat"),
    ("eagle", "domain"): Prior(0.35, 0.5, "EAGLE-1 head on domain traffic"),
    ("eagle", "code"): Prior(0.35, 0.5, "EAGLE-1 head on code"),
    ("eagle", "copy"): Prior(0.4, 0.6, "EAGLE-1 head on copy-heavy traffic"),
    ("draft_model", "chat"): Prior(0.3, 0.5, "classic draft model on general chat"),
    ("draft_model", "domain"): Prior(0.25, 0.45, "classic draft model on domain traffic"),
    ("draft_model", "code"): Prior(0.3, 0.5, "classic draft model on code"),
    ("draft_model", "copy"): Prior(0.3, 0.5, "classic draft model on copy-heavy traffic"),
    ("mtp", "chat"): Prior(0.7, 0.85, "native MTP module on general chat"),
    ("mtp", "domain"): Prior(0.6, 0.8, "native MTP module on domain traffic"),
    ("mtp", "code"): Prior(0.6, 0.8, "native MTP module on code"),
    ("mtp", "copy"): Prior(0.65, 0.85, "native MTP module on copy-heavy traffic"),
    ("ngram", "chat"): Prior(0.05, 0.2, "n-gram lookup on open-ended chat (little to copy)"),
    ("ngram", "domain"): Prior(0.1, 0.3, "n-gram lookup on domain traffic"),
    ("ngram", "code"): Prior(0.3, 0.6, "n-gram lookup on code (edits repeat the input)"),
    ("ngram", "copy"): Prior(
        0.4, 0.7, "n-gram lookup on copy-heavy traffic (RAG, summarisation, edits)"
    ),
}

_KIND_WORDS: Final[dict[str, tuple[str, ...]]] = {
    "chat": ("chat", "general", "conversation", "assistant", "sharegpt"),
    "code": ("code", "coding", "program", "sql"),
    "copy": ("rag", "summar", "extract", "edit", "rewrite", "doc", "retriev"),
}


def traffic_kind(class_name: str) -> str:
    """chat, code, copy (copy-heavy) or domain, from a class name."""
    name = class_name.lower()
    for kind, words in _KIND_WORDS.items():
        if any(w in name for w in words):
            return kind
    return "domain"


def prior_for(method: str, class_name: str) -> Prior:
    return PRIORS[(method, traffic_kind(class_name))]
