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
    def __init__(self, config: TwinConfig) -> None:
        self.registry = CollectorRegistry()
        labels = {"model_name": config.served_model_name, "engine": str(config.engine_index)}
        names = list(labels)

        def counter(name: str, doc: str, extra: tuple[str, ...] = ()) -> Counter:
            return Counter(name, doc, labelnames=[*names, *extra], registry=self.registry)

        self.prompt_tokens = counter(
            "vllm:prompt_tokens", "Number of prefill tokens processed."
        ).labels(**labels)
        self.generation_tokens = counter(
            "vllm:generation_tokens", "Number of generation tokens processed."
        ).labels(**labels)
        self._success = counter(
            "vllm:request_success",
            "Count of successfully processed requests.",
            ("finished_reason",),
        )
        self._labels = labels
        self.running = Gauge(
            "vllm:num_requests_running",
            "Number of requests in model execution batches.",
            names,
            registry=self.registry,
        ).labels(**labels)
        self.waiting = Gauge(
            "vllm:num_requests_waiting",
            "Number of requests waiting to be processed.",
            names,
            registry=self.registry,
        ).labels(**labels)
        # the twin's own clock (not vLLM's): how far each step ended after its modelled time,
        # and how often it fell so far behind that it gave the time up — what bench's A/B
        # validity check reads (alphagate.bench.validity)
        self.twin_steps = counter("alphagate:twin_steps", "Engine steps the twin ran.").labels(
            **labels
        )
        self.twin_lag = counter(
            "alphagate:twin_step_lag_seconds",
            "Sum over steps of how late each ended after its modelled time.",
        ).labels(**labels)
        self.twin_resyncs = counter(
            "alphagate:twin_resyncs",
            "Times the twin fell more than 50 ms behind its modelled clock and restarted it.",
        ).labels(**labels)
        self.speculative = config.k > 0
        if self.speculative:
            self.num_drafts = counter(
                "vllm:spec_decode_num_drafts", "Number of spec decoding drafts."
            ).labels(**labels)
            self.num_draft_tokens = counter(
                "vllm:spec_decode_num_draft_tokens", "Number of draft tokens."
            ).labels(**labels)
            self.num_accepted_tokens = counter(
                "vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens."
            ).labels(**labels)
            per_pos = counter(
                "vllm:spec_decode_num_accepted_tokens_per_pos",
                "Accepted tokens per draft position.",
                ("position",),
            )
            self.accepted_per_pos = [
                per_pos.labels(**labels, position=str(i)) for i in range(config.k)
            ]

    def success(self, finished_reason: str) -> Counter:
        """The request-success counter child for one finish reason."""
        child: Counter = self._success.labels(**self._labels, finished_reason=finished_reason)
        return child

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
