"""Engine configuration for a rollout: vLLM ``--speculative-config`` JSON, the batch-size schedule
for K, and SGLang flags.

Field names are vLLM's ``SpeculativeConfig`` (``vllm/config/speculative.py``): ``method``,
``model``, ``num_speculative_tokens``, ``draft_tensor_parallel_size``, ``prompt_lookup_min`` /
``prompt_lookup_max`` (n-gram), ``suffix_decoding_*`` (suffix decoding; ``num_speculative_tokens``
is then the cap on a draft) and ``num_speculative_tokens_per_batch_size`` (a list of inclusive
``[start, end, K]`` batch-size ranges, validated as ``vllm/v1/spec_decode/dynamic/utils.py`` does).
SGLang flags are ``sglang.launch_server``'s ``--speculative-*`` (docs: speculative_decoding.md);
SGLang's released server (0.5.23) has no suffix decoding, so a suffix plan has none.

:func:`vllm_serve_argv` and :func:`sglang_launch_argv` are the whole command that serves the
deployment a plan modelled — the checkpoint in the modelled weight dtype (or the online
quantization that gives it), the KV-cache dtype, tensor parallelism, the batch and token limits
the simulation assumed — so that the command pasted is the deployment predicted. vLLM's flags are
checked against the installed build's own argument parser by the real-engine tests; SGLang's
against a copy of its ``ServerArgs`` flag list (``tests/plan/sglang_server_args.json``, commit
named there) and, where an SGLang virtualenv is given, its own parser.
"""

from __future__ import annotations

import json
from typing import Any, Final, NamedTuple
from urllib.parse import urlsplit

from alphagate.specs.deployment import (
    DrafterConfig,
    NgramDrafter,
    ResolvedDeployment,
    SuffixDrafter,
    SuffixParams,
)
from alphagate.specs.models import checkpoint_for, preset_family
from alphagate.specs.schedule import ScheduleError, compress_schedule, validate_schedule
from alphagate.specs.tree import TreeShape, chain_shape

__all__ = [
    "DEFAULT_DRAFTS",
    "VLLM_SPEC_FIELDS",
    "EngineCommand",
    "ScheduleError",
    "compress_schedule",
    "default_draft",
    "sglang_flags",
    "sglang_launch_argv",
    "url_port",
    "validate_schedule",
    "vllm_serve_argv",
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
        *(f"suffix_decoding_{name}" for name in SuffixParams.model_fields),
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
    """The public draft checkpoint for a preset target (or its FP8 checkpoint), if one is known."""
    return DEFAULT_DRAFTS.get((method, preset_family(model) or model.lower()))


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
    if isinstance(drafter, SuffixDrafter):
        for name in SuffixParams.model_fields:
            cfg[f"suffix_decoding_{name}"] = getattr(drafter, name)
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


def sglang_flags(
    drafter: DrafterConfig, draft: str | None, k: int, tree: TreeShape | None = None
) -> list[str]:
    """SGLang launch flags for a chain of K drafts (top-k 1, so draft tokens = K + 1), for the
    draft ``tree`` (EAGLE / EAGLE-3: ``--speculative-eagle-topk`` > 1); none for suffix decoding."""
    if isinstance(drafter, SuffixDrafter):
        return []  # SGLang's released server (0.5.23) has no suffix decoding to launch
    method = drafter.method
    shape = tree or chain_shape(k)
    flags = ["--speculative-algorithm", _SGLANG_ALGORITHM[method]]
    if method in ("eagle3", "eagle", "draft_model"):
        flags += ["--speculative-draft-model-path", draft or "<path-or-repo-of-the-draft>"]
    flags += [
        "--speculative-num-steps",
        str(shape.steps),
        "--speculative-eagle-topk",
        str(shape.topk),
        "--speculative-num-draft-tokens",
        str(shape.draft_tokens),
    ]
    return flags


def url_port(url: str, default: int) -> int:
    """The port a server URL names (``default`` when it names none)."""
    try:
        port = urlsplit(url).port
    except ValueError:
        port = None
    return port if port is not None else default


class _DeploymentFlags(NamedTuple):
    """How an engine names the flags that make a server the modelled deployment."""

    #: ``--kv-cache-dtype`` for the modelled KV dtype (bf16: the model's dtype, vLLM's and
    #: SGLang's ``auto``, so no flag)
    kv_dtypes: dict[str, str]
    max_seqs: str
    max_tokens: str


_VLLM = _DeploymentFlags({"fp8": "fp8"}, "--max-num-seqs", "--max-num-batched-tokens")
_SGLANG = _DeploymentFlags({"fp8": "fp8_e4m3"}, "--max-running-requests", "--chunked-prefill-size")


class EngineCommand:
    """The serving command for one deployment: the checkpoint, and the engine flags that make
    it the modelled one (shared by the baseline and the speculative server)."""

    def __init__(self, resolved: ResolvedDeployment, served: str | None) -> None:
        cfg = resolved.config
        self.resolved = resolved
        self.checkpoint, self.quantization = checkpoint_for(cfg.model, cfg.weight_dtype)
        self.served = served

    @property
    def served_name(self) -> str:
        """The model name clients send: ``--served-model-name``, else the checkpoint."""
        return self.served or self.checkpoint


def _deployment_flags(cmd: EngineCommand, names: _DeploymentFlags) -> list[str]:
    """The flags both engines take to serve the modelled deployment: the checkpoint's
    quantization, the KV-cache dtype, the batch limits and the served name."""
    cfg = cmd.resolved.config
    argv = ["--quantization", cmd.quantization] if cmd.quantization else []
    if cfg.kv_dtype in names.kv_dtypes:
        argv += ["--kv-cache-dtype", names.kv_dtypes[cfg.kv_dtype]]
    argv += [
        names.max_seqs,
        str(cfg.max_num_seqs),
        names.max_tokens,
        str(cfg.max_num_batched_tokens),
    ]
    if cmd.served:
        argv += ["--served-model-name", cmd.served]
    return argv


def vllm_serve_argv(
    cmd: EngineCommand,
    port: int,
    speculative: dict[str, Any] | None,
    *,
    per_request_metrics: bool = False,
) -> list[str]:
    """``vllm serve …`` as argv: the modelled deployment, on ``port``; with ``speculative``, the
    ``--speculative-config`` (and, where the build has it, per-request spec-decode counts)."""
    argv = [
        "vllm", "serve", cmd.checkpoint, "--tensor-parallel-size", str(cmd.resolved.tp),
        *_deployment_flags(cmd, _VLLM),
    ]  # fmt: skip
    if port != 8000:
        argv += ["--port", str(port)]
    if speculative is not None:
        if per_request_metrics:
            argv += ["--per-request-spec-decode-metrics", "summary"]
        argv += ["--speculative-config", json.dumps(speculative, separators=(",", ":"))]
    return argv


def sglang_launch_argv(cmd: EngineCommand, port: int, flags: list[str] | None) -> list[str]:
    """``python -m sglang.launch_server …`` as argv: the modelled deployment on ``port``, with the
    speculative ``flags`` (:func:`sglang_flags`) when given."""
    return [
        "python", "-m", "sglang.launch_server", "--model-path", cmd.checkpoint,
        "--tp-size", str(cmd.resolved.tp), *_deployment_flags(cmd, _SGLANG),
        "--port", str(port), *(flags or []),
    ]  # fmt: skip
