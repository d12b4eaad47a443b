"""Engine configuration for a rollout: vLLM ``--speculative-config`` JSON, the batch-size schedule
for K, and SGLang flags.

Field names are vLLM's ``SpeculativeConfig`` (``vllm/config/speculative.py``): ``method``,
``model``, ``num_speculative_tokens``, ``draft_tensor_parallel_size``, ``prompt_lookup_min`` /
``prompt_lookup_max`` (n-gram) and ``num_speculative_tokens_per_batch_size`` (a list of inclusive
``[start, end, K]`` batch-size ranges, validated as ``vllm/v1/spec_decode/dynamic/utils.py`` does).
SGLang flags are ``sglang.launch_server``'s ``--speculative-*`` (docs: speculative_decoding.md).
"""

from __future__ import annotations

from typing import Any, Final

from alphagate.specs.deployment import DrafterConfig, NgramDrafter

__all__ = [
    "DEFAULT_DRAFTS",
    "VLLM_SPEC_FIELDS",
    "ScheduleError",
    "compress_schedule",
    "default_draft",
    "sglang_flags",
    "validate_schedule",
    "vllm_speculative_config",
]

#: Keys alphagate may emit inside vLLM's speculative_config (``vllm/config/speculative.py``).
VLLM_SPEC_FIELDS: Final[frozenset[str]] = frozenset(
    {
        "method",
        "model",
        "num_speculative_tokens",
        "draft_tensor_parallel_size",
        "prompt_lookup_max",
        "prompt_lookup_min",
        "num_speculative_tokens_per_batch_size",
    }
)

#: Public draft checkpoints for the presets (their model cards); a user's --draft wins.
DEFAULT_DRAFTS: Final[dict[tuple[str, str], str]] = {
    ("eagle3", "llama-3.1-8b"): "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
    ("eagle3", "llama-3.3-70b"): "nebius/EAGLE3-Llama-3.3-70B-Instruct",
    ("eagle", "llama-3.1-8b"): "yuhuili/EAGLE-LLaMA3-Instruct-8B",
    ("draft_model", "llama-3.1-8b"): "meta-llama/Llama-3.2-1B-Instruct",
    ("draft_model", "llama-3.3-70b"): "meta-llama/Llama-3.2-1B-Instruct",
}


def default_draft(method: str, model: str) -> str | None:
    """The public draft checkpoint for a preset target, if one is known."""
    return DEFAULT_DRAFTS.get((method, model.lower()))


class ScheduleError(ValueError):
    """A batch-size schedule that vLLM's validation would reject."""


def compress_schedule(k_by_batch: list[int]) -> list[list[int]]:
    """``k_by_batch[b - 1]`` = K at batch size b → sorted inclusive ``[lo, hi, K]`` ranges from 1."""
    out: list[list[int]] = []
    for b, k in enumerate(k_by_batch, start=1):
        if out and out[-1][2] == k:
            out[-1][1] = b
        else:
            out.append([b, b, k])
    return out


def validate_schedule(schedule: list[list[int]], num_speculative_tokens: int) -> None:
    """vLLM's rules (``vllm/v1/spec_decode/dynamic/utils.py``): non-empty 3-item entries, positive
    sorted non-overlapping ranges starting at 1, start ≤ end, 0 ≤ K ≤ num_speculative_tokens."""
    if not schedule:
        raise ScheduleError("the schedule is empty")
    prev_end = 0
    for i, entry in enumerate(schedule):
        if len(entry) != 3:
            raise ScheduleError(f"entry {entry} does not have 3 items")
        lo, hi, k = entry
        if lo < 1 or hi < lo:
            raise ScheduleError(f"entry {entry}: need 1 <= start <= end")
        if i == 0 and lo != 1:
            raise ScheduleError(f"entry {entry}: the first range must start at 1")
        if i > 0 and lo <= prev_end:
            raise ScheduleError(f"entry {entry}: ranges must be sorted and must not overlap")
        if not 0 <= k <= num_speculative_tokens:
            raise ScheduleError(f"entry {entry}: K must be in [0, {num_speculative_tokens}]")
        prev_end = hi


def vllm_speculative_config(
    drafter: DrafterConfig,
    draft: str | None,
    k: int,
    tp: int,
    schedule: list[list[int]] | None = None,
    draft_tp: int | None = None,
) -> dict[str, Any]:
    """The ``--speculative-config`` object for vLLM (``draft_tp``: the drafter's TP when it is
    not the target's ``tp``)."""
    method = drafter.method
    cfg: dict[str, Any] = {"method": method}
    if method in ("eagle3", "eagle", "draft_model"):
        cfg["model"] = draft or "<path-or-repo-of-the-draft>"
    cfg["num_speculative_tokens"] = k
    if isinstance(drafter, NgramDrafter):
        cfg["prompt_lookup_max"] = drafter.prompt_lookup_max
        cfg["prompt_lookup_min"] = drafter.prompt_lookup_min
    dtp = tp if draft_tp is None else draft_tp
    if (tp > 1 or dtp != tp) and method in ("eagle3", "eagle", "draft_model"):
        cfg["draft_tensor_parallel_size"] = dtp
    if schedule is not None:
        validate_schedule(schedule, k)
        cfg["num_speculative_tokens_per_batch_size"] = schedule
    return cfg


_SGLANG_ALGORITHM: Final[dict[str, str]] = {
    "eagle3": "EAGLE3",
    "eagle": "EAGLE",
    "draft_model": "STANDALONE",
    "ngram": "NGRAM",
    "mtp": "NEXTN",
}


def sglang_flags(drafter: DrafterConfig, draft: str | None, k: int) -> list[str]:
    """SGLang launch flags for a chain of K drafts (top-k 1, so draft tokens = K + 1)."""
    method = drafter.method
    flags = ["--speculative-algorithm", _SGLANG_ALGORITHM[method]]
    if method in ("eagle3", "eagle", "draft_model"):
        flags += ["--speculative-draft-model-path", draft or "<path-or-repo-of-the-draft>"]
    flags += [
        "--speculative-num-steps",
        str(k),
        "--speculative-eagle-topk",
        "1",
        "--speculative-num-draft-tokens",
        str(k + 1),
    ]
    return flags
