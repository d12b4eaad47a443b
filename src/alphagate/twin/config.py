"""Twin configuration: the same deployment and workload records as ``alphagate simulate``."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from alphagate.core.records import Frozen
from alphagate.specs import DeploymentConfig, ResolvedDeployment, WorkloadConfig
from alphagate.specs.schedule import k_for_batch, validate_schedule

__all__ = ["TwinConfig"]


class TwinConfig(Frozen):
    """A twin server: one deployment, a fixed K (0 = no speculation) and the traffic it expects.

    ``workload.classes`` give α per class; ``workload.output_len`` is the length a request
    generates when ``max_tokens`` does not cap it; ``workload.prompt_len`` sizes the KV room (the
    twin's tensor parallelism is chosen, like ``simulate``'s, to hold ``max_num_seqs`` of them).
    The class of a request is its ``alphagate_class`` body field, else the suffix of the model
    name (``<served>:<class>``), else drawn by the class shares.
    """

    deployment: DeploymentConfig = Field(default_factory=DeploymentConfig)
    workload: WorkloadConfig = Field(default_factory=WorkloadConfig)
    k: int = Field(default=3, ge=0, le=64)
    k_by_batch_size: list[list[int]] | None = Field(
        default=None,
        description="vLLM's num_speculative_tokens_per_batch_size: [start, end, K] inclusive "
        "ranges of the step's scheduled requests; K capped at k (the largest)",
    )
    served_model_name: str = Field(default="alphagate-twin", min_length=1)
    time_scale: float = Field(
        default=1.0,
        ge=0.0,
        allow_inf_nan=False,
        description="wall seconds per simulated second; 0 = as fast as possible",
    )
    max_model_len: int = Field(default=8192, ge=2, le=1_048_576)
    api_key: str | None = Field(default=None, min_length=1)
    request_timeout_s: float = Field(
        default=15.0,
        gt=0,
        allow_inf_nan=False,
        description="a client must send its whole request (headers and body) within this",
    )
    seed: int = Field(default=0, ge=0)
    engine_index: int = 0
    log_stats_interval_s: float = Field(
        default=0.0,
        ge=0.0,
        allow_inf_nan=False,
        description="write vLLM's SpecDecoding metrics line to stderr this often; 0 = never",
    )
    per_request_spec_decode_metrics: Literal["none", "summary", "detailed"] = Field(
        default="none",
        description="vLLM's --per-request-spec-decode-metrics: each reply's final usage chunk "
        "carries metrics.speculative_decoding (summary; detailed adds per-step arrays)",
    )
    enable_per_request_metrics: bool = Field(
        default=False,
        description="vLLM's --enable-per-request-metrics: each reply's final usage chunk carries "
        "the request's timing (time_to_first_token_ms, queue_time_ms, …) in model time",
    )
    emit_send_time: bool = Field(
        default=False, description="add alphagate_sent_s (wall clock) to chunks, for benchmarks"
    )
    kv_cache_memory_bytes: int | None = Field(
        default=None,
        ge=1,
        description="vLLM's --kv-cache-memory-bytes: KV-cache bytes per GPU, shared by the "
        "target's and (speculating) the drafter's KV, so a drafter lowers the tokens it holds; "
        "a request is admitted only while the running ones' whole lengths (+ their draft and "
        "lookahead slots, specs.deployment.speculative_kv_slots) fit. None: room for any batch",
    )

    @model_validator(mode="after")
    def _schedule(self) -> TwinConfig:
        if ":" in self.served_model_name:
            raise ValueError(
                "served_model_name: ':' separates a traffic class from the model name "
                "(NAME:CLASS), so a served name cannot hold one"
            )
        if self.k_by_batch_size is not None:
            try:
                validate_schedule(self.k_by_batch_size, self.k)
            except ValueError as exc:
                raise ValueError(f"k_by_batch_size: {exc}") from None
        return self

    def k_at(self, batch: int) -> int:
        """K for a step that schedules ``batch`` requests (vLLM: above the last range, the last
        range's K)."""
        if self.k_by_batch_size is None or batch < 1:
            return self.k
        return k_for_batch(self.k_by_batch_size, batch, self.k)

    @property
    def speculative(self) -> bool:
        return self.k > 0

    def kv_room_tokens(self, resolved: ResolvedDeployment) -> int | None:
        """Tokens the KV cache holds (None: unbounded): ``kv_cache_memory_bytes`` on each of
        the TP GPUs over the KV bytes of one token — the target's, plus the drafter's when it
        speculates (vLLM sizes one cache for both, ``vllm/v1/worker/gpu_worker.py``)."""
        if self.kv_cache_memory_bytes is None:
            return None
        per_token = resolved.target_footprint.kv_bytes_per_token
        if self.speculative and resolved.draft_footprint is not None:
            per_token += resolved.draft_footprint.kv_bytes_per_token
        return int(self.kv_cache_memory_bytes * resolved.tp // per_token)
