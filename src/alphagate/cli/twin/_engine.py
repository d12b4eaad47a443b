"""The twin's engine flags, as vLLM names them, as an option group
(:mod:`alphagate.cli._groups`): the speculative config, the per-request metrics, the stats log
and the context limit."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

from alphagate.cli._check import bounded, fail
from alphagate.cli._groups import given

if TYPE_CHECKING:
    from alphagate.specs.deployment import Method

__all__ = ["EngineFlags"]


@dataclass(frozen=True)
class EngineFlags:
    """vLLM's engine flags that the twin honours."""

    speculative_config: Annotated[
        str | None,
        typer.Option(
            "--speculative-config",
            help="As vLLM's flag (a JSON object): num_speculative_tokens sets K, "
            "num_speculative_tokens_per_batch_size the batch-size schedule, method the drafter "
            "(when --method is not given); other keys are the engine's and are ignored.",
        ),
    ] = None
    per_request_spec_decode_metrics: Annotated[
        Literal["none", "summary", "detailed"],
        typer.Option(
            "--per-request-spec-decode-metrics",
            help="As vLLM's flag: each reply's final usage chunk carries its own "
            "metrics.speculative_decoding counts (summary; detailed adds per-step arrays), which "
            "bench records per request and per class.",
        ),
    ] = "none"
    per_request_metrics: Annotated[
        bool,
        typer.Option(
            "--enable-per-request-metrics",
            help="As vLLM's flag: each reply's final usage chunk carries its timing "
            "(time_to_first_token_ms, queue_time_ms, generation_time_ms, …; model time).",
        ),
    ] = False
    log_stats_interval: Annotated[
        float,
        bounded(
            "--log-stats-interval",
            lo=0.0,
            hi=86_400.0,
            help="Seconds between vLLM-format 'SpecDecoding metrics' lines on stderr (vLLM's "
            "VLLM_LOG_STATS_INTERVAL; 0 = none). `alphagate measure logs` reads them.",
        ),
    ] = 10.0
    max_model_len: Annotated[int, typer.Option("--max-model-len", min=2, max=1_048_576)] = 8192
    kv_cache_memory_bytes: Annotated[
        int | None,
        typer.Option(
            "--kv-cache-memory-bytes",
            min=1,
            help="As vLLM's flag: KV-cache bytes per GPU, for the target's KV and (speculating) "
            "the drafter's, so a drafter holds fewer tokens; a request is admitted while the "
            "running ones' whole lengths and draft and lookahead slots fit, so the room caps "
            "the batch (default: no cap but --max-num-seqs).",
        ),
    ] = None
    emit_send_time: Annotated[bool, typer.Option("--emit-send-time", hidden=True)] = False

    def config_fields(self) -> dict[str, Any]:
        """The :class:`~alphagate.twin.config.TwinConfig` fields these flags give."""
        return {
            "max_model_len": self.max_model_len,
            "kv_cache_memory_bytes": self.kv_cache_memory_bytes,
            "log_stats_interval_s": self.log_stats_interval,
            "emit_send_time": self.emit_send_time,
            "per_request_spec_decode_metrics": self.per_request_spec_decode_metrics,
            "enable_per_request_metrics": self.per_request_metrics,
        }

    def speculative(
        self, ctx: typer.Context, k: int, method: Method
    ) -> tuple[int, list[list[int]] | None, Method]:
        """K, the batch-size schedule and the method: ``--speculative-config``'s, where it
        gives them, else ``k`` and ``method``."""
        if self.speculative_config is None:
            return k, None, method
        return _speculative(ctx, self.speculative_config, method)


def _speculative(
    ctx: typer.Context, text: str, method: Method
) -> tuple[int, list[list[int]] | None, Method]:
    """K, the batch-size schedule and the method from a vLLM ``--speculative-config``."""
    import json

    from alphagate.specs.deployment import METHODS

    try:
        cfg = json.loads(text)
    except json.JSONDecodeError as exc:
        fail(f"not a JSON object: {exc}", "--speculative-config")
    if not isinstance(cfg, dict):
        fail("not a JSON object", "--speculative-config")
    k = cfg.get("num_speculative_tokens")
    if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= 64:
        fail("num_speculative_tokens must be an integer in 1..64", "--speculative-config")
    if ctx.params.get("k") is not None and given(ctx, "k") and ctx.params["k"] != k:
        fail(f"--k {ctx.params['k']} and num_speculative_tokens {k} disagree", "--k")
    schedule = cfg.get("num_speculative_tokens_per_batch_size")
    if schedule is not None and (
        not isinstance(schedule, list)
        or not all(isinstance(e, list) and all(isinstance(x, int) for x in e) for e in schedule)
    ):
        fail(
            "num_speculative_tokens_per_batch_size must be a list of [start, end, K]",
            "--speculative-config",
        )
    named = cfg.get("method")
    if isinstance(named, str) and named in METHODS and not given(ctx, "method"):
        method = named  # type: ignore[assignment]
    return k, schedule, method
