"""Loaded by the real-engine tier's vLLM processes only (their PYTHONPATH names this folder).

vLLM's CPU build (0.32) replaces Triton's ``expand_kernel`` with a C++ fallback
(``vllm/utils/cpu_triton_utils.py::_expand_kernel_impl``) that converts the output tensor to int64
and writes into that copy: a float output — the per-token temperature, top-p and top-k that
``vllm/v1/sample/rejection_sampler.py::expand_batch_to_tokens`` spreads over the draft tokens —
is never written, so speculative decoding with temperature > 0 divides the target's logits by
uninitialised memory. Greedy decoding does not use it. This hook swaps in a correct expand (each
request's value repeated over its draft tokens, ``replace_from`` → ``replace_to``) when the
module is first imported.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from typing import Any

_NAME = "vllm.utils.cpu_triton_utils"


def _expand_kernel_impl(
    output: Any,
    input_val: Any,
    cu_num_tokens: Any,
    replace_from: Any,
    replace_to: Any,
    MAX_NUM_TOKENS: Any = None,
) -> None:
    import torch

    ends = cu_num_tokens.to(torch.int64)
    counts = torch.diff(ends, prepend=ends.new_zeros(1))
    vals = torch.where(input_val == replace_from, torch.full_like(input_val, replace_to), input_val)
    n = int(ends[-1]) if ends.numel() else 0
    output[:n] = torch.repeat_interleave(vals, counts).to(output.dtype)


class _Hook(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != _NAME:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module: Any) -> None:
            run(module)
            module._expand_kernel_impl = _expand_kernel_impl

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


sys.meta_path.insert(0, _Hook())
