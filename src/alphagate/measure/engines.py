"""Which engine, and which version of it, a reading came from — and what its acceptance figures
mean there. Acceptance figures change meaning between versions, and a reading of one server must
not be compared with another's as if they were the same quantity.

Where the engine and version are read:

- vLLM: ``GET /version`` (``{"version": "0.32.0"}``, ``vllm/entrypoints/serve/instrumentator/
  basic.py``); its log's header (the logo's ``version 0.32.0``, or ``vLLM server version 0.32.0,
  serving model …`` without it, ``vllm/entrypoints/serve/utils/api_utils.py``; ``Initializing a
  V1 LLM engine (v0.32.0)``, ``vllm/v1/engine/core.py``);
- SGLang: ``GET /get_server_info`` (``version`` and every server argument, among them
  ``speculative_num_steps``, ``speculative_eagle_topk`` and ``speculative_num_draft_tokens``;
  ``python/sglang/srt/entrypoints/http_server.py``); its log's ``server_args=ServerArgs(…)`` line
  (the arguments, no version; ``entrypoints/engine.py``); and the names of its per-request
  ``meta_info`` keys, which date a server: ``spec_accept_token_num`` / ``spec_draft_token_num``
  up to 0.5.10, ``spec_accepted_drafts`` / ``spec_proposed_drafts`` in 0.5.11 (PR #23530),
  ``spec_num_correct_drafts`` / ``spec_num_proposed_drafts`` / ``spec_correct_drafts_histogram``
  from 0.5.12 (PR #24081). The counts behind every generation of keys are the same: accepted
  drafts (no bonus token) and ``verify passes × (num_draft_tokens − 1)`` proposed.

What SGLang's *accept rate* means (its ``Decode batch`` log line and its ``sglang:spec_accept_rate``
gauge; ``python/sglang/srt/observability/scheduler_metrics_mixin.py``): before PR #23530 (up to
0.5.10) it was ``(accepted + passes) ÷ (passes · num_draft_tokens)`` — the bonus token counted as
accepted, the verified root as proposed — which is the accept length ÷ num_draft_tokens and
overstates the rate by ``(k − m) ÷ (k (k + 1))`` at k = num_draft_tokens − 1 drafts and m
accepted; from 0.5.11 it is ``accepted ÷ (passes · (num_draft_tokens − 1))``
(:func:`current_accept_rate` converts). With ``eagle_topk`` > 1 that divides by every node of a
draft tree, not by the drafts of one chain: not a chain's ρ (:func:`definition`).
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field

from alphagate.core.records import Frozen

__all__ = [
    "SGLANG_RATE_FIXED",
    "EngineInfo",
    "current_accept_rate",
    "definition",
    "from_log_line",
    "from_meta_keys",
    "from_sglang_server_info",
    "from_vllm_version",
    "parse_version",
]

Engine = Literal["vllm", "sglang"]
#: the first SGLang release whose accept rate is accepted ÷ proposed drafts (PR #23530)
SGLANG_RATE_FIXED = (0, 5, 11)
_VERSION = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")
_VLLM_HEADER = re.compile(
    r"(?:vLLM server version |V1 LLM engine \(v|█ +version )(?P<v>\d+\.\d+[\w.+-]*)"
)
_SGLANG_ARGS = re.compile(r"server_args=ServerArgs\((?P<args>.*)\)")
_SPEC_ARG = re.compile(r"\bspeculative_(num_steps|eagle_topk|num_draft_tokens)=(\d+)")
#: the meta_info key of accepted drafts, by the SGLang versions that use it
_META_GENERATIONS = (
    ("spec_num_correct_drafts", "≥ 0.5.12"),
    ("spec_accepted_drafts", "0.5.11"),
    ("spec_accept_token_num", "≤ 0.5.10"),
)


class EngineInfo(Frozen):
    """The engine and version a reading came from, and how that was learnt."""

    engine: Engine | None = Field(description="None: the source did not say")
    version: str | None = Field(
        default=None, description="as the engine reports it, or a range (≤ 0.5.10)"
    )
    source: str = Field(description="where it was read: GET /version, a log header, …")
    num_steps: int | None = Field(default=None, description="SGLang --speculative-num-steps")
    eagle_topk: int | None = Field(default=None, description="SGLang --speculative-eagle-topk")
    num_draft_tokens: int | None = Field(
        default=None, description="SGLang --speculative-num-draft-tokens"
    )

    def label(self) -> str:
        """``vLLM 0.32.0 (GET /version)``; ``unknown engine (…)``."""
        name = {"vllm": "vLLM", "sglang": "SGLang", None: "unknown engine"}[self.engine]
        return f"{name}{f' {self.version}' if self.version else ''} ({self.source})"


def parse_version(text: str | None) -> tuple[int, int, int] | None:
    """``0.5.10.post1`` → (0, 5, 10); None for no version."""
    m = _VERSION.search(text or "")
    if m is None:
        return None
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def from_vllm_version(body: Any) -> EngineInfo | None:
    """vLLM's ``GET /version`` body (``{"version": …}``), or None for another."""
    v = body.get("version") if isinstance(body, dict) else None
    if not isinstance(v, str) or parse_version(v) is None or "model_path" in body:
        return None
    return EngineInfo(engine="vllm", version=v, source="GET /version")


def _int(x: Any) -> int | None:
    return x if isinstance(x, int) and not isinstance(x, bool) else None


def from_sglang_server_info(body: Any) -> EngineInfo | None:
    """SGLang's ``GET /get_server_info`` body (its version and server arguments), or None."""
    if not isinstance(body, dict) or ("internal_states" not in body and "model_path" not in body):
        return None
    v = body.get("version")
    return EngineInfo(
        engine="sglang",
        version=v if isinstance(v, str) else None,
        source="GET /get_server_info",
        num_steps=_int(body.get("speculative_num_steps")),
        eagle_topk=_int(body.get("speculative_eagle_topk")),
        num_draft_tokens=_int(body.get("speculative_num_draft_tokens")),
    )


def from_log_line(text: str) -> EngineInfo | None:
    """A server log's header line: vLLM's version, or SGLang's server arguments."""
    m = _VLLM_HEADER.search(text)
    if m is not None:
        return EngineInfo(engine="vllm", version=m.group("v"), source="log header")
    a = _SGLANG_ARGS.search(text)
    if a is None:
        return None
    spec = {k: int(v) for k, v in _SPEC_ARG.findall(a.group("args"))}
    return EngineInfo(
        engine="sglang",
        source="log server_args line",
        num_steps=spec.get("num_steps"),
        eagle_topk=spec.get("eagle_topk"),
        num_draft_tokens=spec.get("num_draft_tokens"),
    )


def from_meta_keys(raw: dict[str, Any]) -> EngineInfo | None:
    """An SGLang response's ``meta_info``: the versions its key names were used in."""
    for key, versions in _META_GENERATIONS:
        if key in raw:
            return EngineInfo(engine="sglang", version=versions, source=f"meta_info key {key}")
    return None


def _rate_fixed(info: EngineInfo) -> bool | None:
    """Whether SGLang's accept rate is accepted ÷ proposed drafts there (None: unknown)."""
    if info.version is None:
        return None
    if info.version.startswith("≤"):
        return False
    if info.version.startswith("≥"):
        return True
    v = parse_version(info.version)
    return None if v is None else v >= SGLANG_RATE_FIXED


def current_accept_rate(rate: float, tau: float | None, info: EngineInfo, where: str) -> float:
    """SGLang's accept rate in its current definition, accepted ÷ (passes · (num_draft_tokens −
    1)). A rate of a build before PR #23530 is ``τ ÷ num_draft_tokens`` and converts as
    ``(rate · n − 1) ÷ (n − 1)``; without a version, the rate's own value tells which it is
    when τ of the same interval is known (the two definitions give τ ÷ n and (τ − 1) ÷ (n − 1)).
    ``ValueError`` naming what is missing when neither can be told (the verbs refuse it, exit 2)."""
    n = info.num_draft_tokens
    if n is None or n < 2:
        raise ValueError(
            f"{where}: SGLang's accept rate changed definition in 0.5.11 (PR #23530: before, "
            "(accepted + passes) ÷ (passes · num_draft_tokens)); converting it needs "
            "speculative_num_draft_tokens (GET /get_server_info, or the log's server_args line), "
            "which this source does not give"
        )
    fixed = _rate_fixed(info)
    if fixed is None and tau is not None:
        old, new = tau / n, (tau - 1.0) / (n - 1)
        fixed = abs(rate - new) <= abs(rate - old)
    if fixed is None:
        raise ValueError(
            f"{where}: SGLang's accept rate without its version or the accept length of the "
            "same interval: which definition it is in (before or after PR #23530) cannot be told"
        )
    return rate if fixed else (rate * n - 1.0) / (n - 1)


def definition(info: EngineInfo | None) -> str:
    """What a reading's ρ means, as one key: ``drafts`` (accepted ÷ drafted, as vLLM counts and
    as SGLang counts a chain), ``tree nodes`` (SGLang with eagle_topk > 1: accepted ÷ every
    verified node of a draft tree — τ is comparable, ρ is not), or ``unknown``."""
    if info is None or info.engine is None:
        return "unknown"
    if info.engine == "vllm":
        return "drafts"
    if info.eagle_topk is None:
        return "unknown"  # SGLang, shape not reported: a chain's drafts or a tree's nodes
    return "tree nodes" if info.eagle_topk > 1 else "drafts"
