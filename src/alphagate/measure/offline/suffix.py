"""Suffix decoding (vLLM ``method: "suffix"``; Oliaro et al., "SuffixDecoding", arXiv 2411.04975)
replayed offline through the engine's own suffix cache: arctic-inference's
``SuffixDecodingCache`` (vLLM 0.32 pins ``arctic-inference==0.1.1``), driven the way vLLM's
``SuffixDecodingProposer.propose`` drives it (``vllm/v1/spec_decode/suffix_decoding.py``):

- a request's first step with sampled tokens starts it — ``start_request(id, prompt)`` builds
  its prompt tree and gives its response a slot in the server-wide tree of responses, evicting the
  oldest cached response beyond ``max_cached_requests`` (FIFO, ``suffix_decoding/cache.py``);
- every step appends the tokens it sampled (``add_active_response``) to both trees. The last
  step's are appended whole — the engine proposes before the scheduler trims the tokens past the
  end of the output — so a cached response runs to the last step's bonus token;
- the draft at context T is ``speculate`` on the last ``max_tree_depth`` tokens, at most
  ``min(num_speculative_tokens, max_model_len − T − 1)`` tokens: for each match length, the
  path of most frequent children while their estimated probability stays ≥ ``min_token_prob``,
  cut at ``max_spec_factor`` × the match length; the best-scoring path over match lengths and
  over the two trees wins (``csrc/suffix_decoding/suffix_tree.cc``, ``speculate`` and
  ``_speculate_path``);
- a request that has left the batch is stopped: its prompt tree goes, its response stays.

Greedy decoding: a draft's accepted tokens are its longest prefix equal to the trajectory (the
logged output and the target's continuation past it); the step emits them and the target's own
next token. The replay walks each request's steps in order — the draft at a step depends on
every token emitted before it — and the requests in log order, one after the other: a server
that overlapped requests also held the partial responses of the requests running beside each
one, which a log does not record.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import metadata
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from alphagate.measure.results import MeasureError
from alphagate.specs.deployment import SuffixParams

__all__ = ["ARCTIC_VERSION", "SuffixReplay", "SuffixWalk", "arctic_version"]

IntArray = npt.NDArray[np.int64]

#: The arctic-inference release vLLM 0.32 pins for suffix decoding (``_validate_suffix_decoding``).
ARCTIC_VERSION: Final = "0.1.1"
_INSTALL: Final = (
    "pip install torch==2.13.0 setuptools wheel ninja cmake nanobind==2.9.2 && "
    f"pip install --no-build-isolation 'arctic-inference=={ARCTIC_VERSION}' "
    "(its PyPI release is a source distribution that builds a C++ extension; `make` does this "
    "for the project's environments)"
)


def arctic_version() -> str:
    """The installed arctic-inference's version; :class:`MeasureError` (exit 2), with the
    install commands, when it is not installed."""
    try:
        return metadata.version("arctic-inference")
    except metadata.PackageNotFoundError:
        raise MeasureError(
            "--drafter suffix replays vLLM's suffix decoding through arctic-inference, which is "
            f"not installed: {_INSTALL}"
        ) from None


def _cache_class() -> Any:
    arctic_version()
    try:
        from arctic_inference.suffix_decoding import SuffixDecodingCache
    except ImportError as exc:
        raise MeasureError(
            f"arctic-inference is installed but its suffix trees do not load ({exc}): {_INSTALL}"
        ) from None
    return SuffixDecodingCache


@dataclass(frozen=True)
class SuffixWalk:
    """One request's engine steps: where each started, its draft, and what the server cached."""

    starts: IntArray  # [S] context length T at each step
    drafts: list[IntArray]  # the draft of each step (possibly empty)
    accepted: IntArray  # [S] accepted drafts per step
    cached_end: int  # the response cached for later requests is seq[prompt_len:cached_end]


class SuffixReplay:
    """One server's suffix cache, fed a log's requests in order."""

    def __init__(self, params: SuffixParams, *, k: int, max_model_len: int) -> None:
        self.params, self.k, self.max_model_len = params, k, max_model_len
        self.cache = _cache_class()(
            max_tree_depth=params.max_tree_depth, max_cached_requests=params.max_cached_requests
        )

    def _draft(self, key: str, seq: npt.NDArray[np.int32], t: int) -> IntArray:
        """The draft at context length ``t`` (the engine's ``propose`` for one request)."""
        if t >= self.max_model_len:
            return np.zeros(0, dtype=np.int64)
        p = self.params
        pattern = seq[max(0, t - p.max_tree_depth) : t]
        d = self.cache.speculate(
            key,
            pattern,
            max_spec_tokens=min(self.k, self.max_model_len - t - 1),
            max_spec_factor=p.max_spec_factor,
            min_token_prob=p.min_token_prob,
        )
        return np.asarray(d.token_ids, dtype=np.int64)

    def walk(self, key: str, seq: IntArray, prompt_len: int, n_out: int) -> SuffixWalk:
        """Serve one request greedily: ``seq`` is its prompt, its ``n_out`` output tokens and at
        least ``k`` tokens of the target's continuation past them (the last step may accept
        drafts there, and the cache keeps them)."""
        if seq.size < prompt_len + n_out + self.k:
            raise ValueError("the trajectory must run k tokens past the output")
        s32 = np.ascontiguousarray(seq, dtype=np.int32)
        self.cache.start_request(key, s32[:prompt_len])
        t = prompt_len + 1  # the prefill emitted the first output token
        self.cache.add_active_response(key, s32[prompt_len:t])
        starts, drafts, accepted = [], [], []
        while t < prompt_len + n_out:
            d = self._draft(key, s32, t)
            a = int(np.cumprod(d == seq[t : t + d.size]).sum())
            starts.append(t)
            drafts.append(d)
            accepted.append(a)
            self.cache.add_active_response(key, s32[t : t + a + 1])
            t += a + 1
        self.cache.stop_request(key)
        return SuffixWalk(
            np.asarray(starts, dtype=np.int64), drafts, np.asarray(accepted, dtype=np.int64), t
        )
