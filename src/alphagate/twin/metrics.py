"""The twin's Prometheus metrics, named exactly as vLLM V1 exports them.

Spec-decode counters (``vllm/v1/spec_decode/metrics.py``, class ``SpecDecodingProm``) exist only
when speculation is configured, as in vLLM. Labels ``model_name`` and ``engine``
(``vllm/v1/metrics/loggers.py``); per-position counters add ``position``.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from alphagate.twin.config import TwinConfig

__all__ = ["TwinMetrics"]


class TwinMetrics:
    """The twin's registry and the counter and gauge children its engine updates."""

    def __init__(self, config: TwinConfig) -> None:
        self.registry = CollectorRegistry()
        self._labels = {"model_name": config.served_model_name, "engine": str(config.engine_index)}
        self.prompt_tokens = self._counter(
            "vllm:prompt_tokens", "Number of prefill tokens processed."
        )
        self.generation_tokens = self._counter(
            "vllm:generation_tokens", "Number of generation tokens processed."
        )
        self._success = Counter(
            "vllm:request_success",
            "Count of successfully processed requests.",
            labelnames=[*self._labels, "finished_reason"],
            registry=self.registry,
        )
        self.running = self._gauge(
            "vllm:num_requests_running", "Number of requests in model execution batches."
        )
        self.waiting = self._gauge(
            "vllm:num_requests_waiting", "Number of requests waiting to be processed."
        )
        # the twin's own clock (not vLLM's): how far each step ended after its modelled time,
        # and how often it fell so far behind that it gave the time up — what bench's A/B
        # validity check reads (alphagate.bench.validity)
        self.twin_steps = self._counter("alphagate:twin_steps", "Engine steps the twin ran.")
        self.twin_lag = self._counter(
            "alphagate:twin_step_lag_seconds",
            "Sum over steps of how late each ended after its modelled time.",
        )
        self.twin_resyncs = self._counter(
            "alphagate:twin_resyncs",
            "Times the twin fell more than 50 ms behind its modelled clock and restarted it.",
        )
        self.speculative = config.k > 0
        if self.speculative:
            self._spec_decode_counters(config.k)

    def _counter(self, name: str, doc: str) -> Counter:
        """A counter of this engine's labels (its one child)."""
        parent = Counter(name, doc, labelnames=list(self._labels), registry=self.registry)
        child: Counter = parent.labels(**self._labels)
        return child

    def _gauge(self, name: str, doc: str) -> Gauge:
        parent = Gauge(name, doc, labelnames=list(self._labels), registry=self.registry)
        child: Gauge = parent.labels(**self._labels)
        return child

    def _spec_decode_counters(self, k: int) -> None:
        """vLLM's ``SpecDecodingProm`` counters, registered only when speculation is on."""
        self.num_drafts = self._counter(
            "vllm:spec_decode_num_drafts", "Number of spec decoding drafts."
        )
        self.num_draft_tokens = self._counter(
            "vllm:spec_decode_num_draft_tokens", "Number of draft tokens."
        )
        self.num_accepted_tokens = self._counter(
            "vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens."
        )
        per_pos = Counter(
            "vllm:spec_decode_num_accepted_tokens_per_pos",
            "Accepted tokens per draft position.",
            labelnames=[*self._labels, "position"],
            registry=self.registry,
        )
        self.accepted_per_pos = [per_pos.labels(**self._labels, position=str(i)) for i in range(k)]

    def success(self, finished_reason: str) -> Counter:
        """The request-success counter child for one finish reason."""
        child: Counter = self._success.labels(**self._labels, finished_reason=finished_reason)
        return child

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
