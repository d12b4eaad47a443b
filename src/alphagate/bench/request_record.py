"""One request as ``alphagate bench`` measured it: its timing, its text (with ``--save-text``)
and the spec-decode counts the server returned for it (vLLM's per-request
``metrics.speculative_decoding``, SGLang's ``meta_info``).

Apart from :mod:`alphagate.bench.records` so that the run's checks that read requests
(:mod:`alphagate.bench.slo`, :mod:`alphagate.bench.validity`) import it without importing the
summaries that use them.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from pydantic import Field, ValidationError, model_validator

from alphagate.core.errors import validation_problem
from alphagate.core.records import Frozen
from alphagate.measure.engines import from_meta_keys

FloatArray = npt.NDArray[np.float64]

__all__ = ["RequestRecord", "RequestSpecDecode", "RequestText", "spec_of"]


class RequestText(Frozen):
    """What was asked and answered (``--save-text``): a bench run against the baseline server is
    then a request log for ``alphagate measure offline``. Token ids come from vLLM's
    ``return_token_ids`` (other servers send text only)."""

    prompt: str | None = None
    messages: list[dict[str, Any]] | None = None
    prompt_token_ids: list[int] | None = None
    output: str
    output_token_ids: list[int] | None = None
    finish_reason: str | None = None
    temperature: float


class RequestSpecDecode(Frozen):
    """The server's own speculative-decoding counts for one request.

    vLLM (``--per-request-spec-decode-metrics summary|detailed``, 0.32+) sends them on the final
    usage chunk as ``metrics.speculative_decoding`` (``SpeculativeDecodingMetrics`` in
    ``vllm/entrypoints/generate/base/protocol.py``), counted by the scheduler where it counts its
    ``vllm:spec_decode_*`` counters (``vllm/v1/core/sched/scheduler.py``): the requests of a
    window sum to the counters' increase. SGLang reports ``meta_info`` counts (``spec_verify_ct``,
    ``spec_num_correct_drafts`` / ``spec_accepted_drafts``, ``spec_num_proposed_drafts`` /
    ``spec_proposed_drafts``)."""

    num_drafts: int = Field(ge=0, description="verify steps with drafts (vLLM num_spec_steps)")
    num_draft_tokens: int = Field(ge=0)
    num_accepted_tokens: int = Field(ge=0, description="accepted draft tokens, bonus excluded")
    acceptance_histogram: list[int] | None = Field(
        default=None, description="steps that accepted exactly j drafts, j = 0..K"
    )
    k: int | None = Field(default=None, description="num_speculative_tokens (the largest K)")
    source: Literal["vllm", "sglang"] = "vllm"
    version: str | None = Field(
        default=None,
        exclude_if=lambda v: v is None,
        description="the engine versions the reply's key names date it to (SGLang's meta_info: "
        "≤ 0.5.10, 0.5.11, ≥ 0.5.12; alphagate.measure.engines)",
    )

    @property
    def definition(self) -> str:
        """What ρ of these counts means (:func:`alphagate.measure.engines.definition`): SGLang
        proposes ``num_draft_tokens − 1`` nodes per pass; more than the histogram's depth
        (the steps) is a draft tree's."""
        if self.source == "vllm":
            return "drafts"
        h = self.acceptance_histogram
        if not h or self.num_drafts == 0:
            return "unknown"
        nodes = self.num_draft_tokens / self.num_drafts
        return "tree nodes" if nodes > len(h) - 1 + 1e-9 else "drafts"

    @model_validator(mode="after")
    def _consistent(self) -> RequestSpecDecode:
        if self.num_accepted_tokens > self.num_draft_tokens:
            raise ValueError(
                f"{self.num_accepted_tokens} accepted draft tokens exceed the "
                f"{self.num_draft_tokens} drafted"
            )
        if self.num_drafts > self.num_draft_tokens:
            raise ValueError(f"{self.num_drafts} steps but {self.num_draft_tokens} draft tokens")
        h = self.acceptance_histogram
        if h is not None:
            if any(x < 0 for x in h) or sum(h) != self.num_drafts:
                raise ValueError(
                    f"the acceptance histogram {h} does not sum to the {self.num_drafts} steps"
                )
            if sum(j * x for j, x in enumerate(h)) != self.num_accepted_tokens:
                raise ValueError(
                    f"the acceptance histogram {h} does not give the "
                    f"{self.num_accepted_tokens} accepted tokens"
                )
        return self

    def accepted_per_pos(self) -> list[int]:
        """vLLM's per-position counts c_i (steps accepting more than i drafts), from the
        histogram; empty without one."""
        h = self.acceptance_histogram or []
        return [sum(h[i + 1 :]) for i in range(max(len(h) - 1, 0))]


def _first_int(raw: dict[str, Any], *keys: str) -> int | None:
    for key in keys:
        v = raw.get(key)
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    return None


def spec_of(raw: dict[str, Any] | None) -> tuple[RequestSpecDecode | None, str | None]:
    """A reply's per-request spec-decode counts as :class:`RequestSpecDecode`, or why they
    cannot be used (None, None: the server sent none).

    SGLang's key names changed twice with the same counts behind them (accepted drafts, no
    bonus; verify passes × (num_draft_tokens − 1) proposed): ``spec_accept_token_num`` /
    ``spec_draft_token_num`` up to 0.5.10, ``spec_accepted_drafts`` / ``spec_proposed_drafts``
    in 0.5.11 (PR #23530), ``spec_num_correct_drafts`` / ``spec_num_proposed_drafts`` /
    ``spec_correct_drafts_histogram`` from 0.5.12 (PR #24081); all are read, and the record
    keeps the versions its keys date it to."""
    if raw is None:
        return None, None
    version = None
    if raw.get("source") == "sglang":
        fields = {
            "num_drafts": _first_int(raw, "spec_verify_ct"),
            "num_accepted_tokens": _first_int(
                raw, "spec_num_correct_drafts", "spec_accepted_drafts", "spec_accept_token_num"
            ),
            "num_draft_tokens": _first_int(
                raw, "spec_num_proposed_drafts", "spec_proposed_drafts", "spec_draft_token_num"
            ),
        }
        hist = raw.get("spec_correct_drafts_histogram", raw.get("spec_accept_histogram"))
        source = "sglang"
        dated = from_meta_keys(raw)
        version = None if dated is None else dated.version
    else:
        fields = {
            "num_drafts": _first_int(raw, "num_spec_steps"),
            "num_accepted_tokens": _first_int(raw, "num_accepted_draft_tokens"),
            "num_draft_tokens": _first_int(raw, "num_draft_tokens"),
        }
        hist = raw.get("acceptance_histogram")
        source = "vllm"
    missing = [k for k, v in fields.items() if v is None]
    if missing:
        return None, f"{source} per-request counts without {', '.join(missing)}: {str(raw)[:200]}"
    k = _first_int(raw, "num_spec_tokens")
    try:
        return (
            RequestSpecDecode(
                **fields,
                acceptance_histogram=hist if isinstance(hist, list) else None,
                k=k if k is not None else (len(hist) - 1 if isinstance(hist, list) else None),
                source=source,
                version=version,
            ),
            None,
        )
    except ValidationError as exc:
        return None, f"{source} per-request counts rejected: {validation_problem(exc)}"


class RequestRecord(Frozen):
    """One request as ``requests.jsonl`` stores it (one JSON object per line)."""

    run_id: str = Field(description="the run this record belongs to (a re-run appends a new id)")
    id: int = Field(description="request number within the run")
    target: str = Field(description="default, baseline or candidate")
    level: str = Field(description="the load level's label, e.g. c16 or r4")
    cls: str | None = Field(description="traffic class from the dataset, if any")
    prompt_tokens: int | None = Field(description="from the server's usage")
    output_tokens: int | None = Field(description="from the server's usage")
    send_s: float = Field(description="send time, seconds since the run started")
    scheduled_s: float | None = Field(
        default=None,
        description="open loop and trace replay: when the schedule said to send it, seconds "
        "since the run started",
    )
    ttft_s: float | None
    chunk_times_s: list[float] = Field(description="arrival of each content chunk, since send")
    chunk_tokens: list[int] = Field(description="tokens in each chunk")
    tokens_per_chunk_source: str = Field(description="usage (exact) or apportioned (by text)")
    e2e_s: float | None
    error_type: str | None = None
    error_message: str | None = None
    warmup: bool = False
    repeat: int = Field(
        default=0,
        ge=0,
        exclude_if=lambda v: v == 0,
        description="--repeats: which run of its level this request was sent in (from 0)",
    )
    text: RequestText | None = Field(
        default=None,
        exclude_if=lambda v: v is None,
        description="--save-text: the prompt and the output, as text and token ids",
    )
    spec: RequestSpecDecode | None = Field(
        default=None,
        exclude_if=lambda v: v is None,
        description="the server's speculative-decoding counts for this request, where it "
        "returns them (vLLM --per-request-spec-decode-metrics, SGLang meta_info)",
    )
    spec_problem: str | None = Field(
        default=None,
        exclude_if=lambda v: v is None,
        description="the server sent per-request counts that cannot be right (they are not kept)",
    )
    delivery_s: list[float] | None = Field(
        default=None,
        exclude_if=lambda v: v is None,
        description="--probe-send-time against a twin run with --emit-send-time: each content "
        "chunk's receipt − the server's send time (wall clock), the latency the client adds",
    )

    @property
    def ok(self) -> bool:
        return self.error_type is None

    def chunk_gaps_s(self) -> FloatArray:
        """ITL per chunk: the gap before each chunk after the first, shape ``[n_chunks - 1]``."""
        times = np.asarray(self.chunk_times_s, dtype=np.float64)
        return np.diff(times) if times.size > 1 else np.zeros(0)

    def itl_per_token_s(self) -> tuple[FloatArray, FloatArray]:
        """ITL per token: each chunk gap ÷ tokens in the chunk after it, and those token counts
        (the weight of each value: one sample per token). Both of shape ``[n_chunks - 1]``."""
        g = self.chunk_gaps_s()
        w = np.maximum(np.asarray(self.chunk_tokens[1 : g.size + 1], dtype=np.float64), 1.0)
        return g / w, w

    @property
    def tpot_s(self) -> float | None:
        """(E2E − TTFT) ÷ (output tokens − 1); None for one output token or a failed request."""
        n = self.output_tokens
        if not n or n <= 1 or self.ttft_s is None or self.e2e_s is None:
            return None
        return (self.e2e_s - self.ttft_s) / (n - 1)
