"""The target of ``alphagate measure offline`` in transformers + torch (the ``offline`` extra:
this module imports torch, and is imported only when a run loads its models), loaded from a
local path or the local Hugging Face cache, never downloaded; and the engine's sampling.

:class:`CausalLM` runs a causal LM as decoder (hidden states, the auxiliary hidden states an
EAGLE-3 head reads, a KV cache from which it continues the sequence) and lm_head (logits, chunk
by chunk); the drafters are :mod:`alphagate.measure.offline.proposers`.
"""

from __future__ import annotations

import inspect
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import torch
from torch.utils.hooks import RemovableHandle
from transformers import AutoModelForCausalLM

from alphagate.measure.results import MeasureError

__all__ = [
    "CausalLM",
    "Sampler",
    "Sampling",
    "gather",
    "make_sampler",
    "processed_probs",
    "read_config",
    "resolve",
    "rms_norm",
    "torch_dtype",
]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
#: picks one token id from ``logits [1, V]``
Sampler = Callable[[torch.Tensor], int]


@dataclass(frozen=True)
class Sampling:
    """The engine's sampling parameters. ``temperature == 0`` is greedy."""

    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    draft_sampling: Literal["greedy", "probabilistic"] = "greedy"

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    @property
    def sampled_drafts(self) -> bool:
        """Drafts are drawn from the drafter's distribution, not taken as one-hot."""
        return not self.greedy and self.draft_sampling == "probabilistic"


def resolve(spec: str, what: str) -> str:
    """A local directory, or a model id already in the local Hugging Face cache."""
    p = Path(spec).expanduser()
    if p.is_dir():
        return str(p)
    looks_like_path = (
        spec.startswith((".", "/", "~"))
        or os.sep in spec.strip("/").replace("/", os.sep, 1).split(os.sep, 1)[-1]
    )
    if p.exists() or looks_like_path or spec.count("/") > 1:
        raise MeasureError(f"{what}: model path not found (or not a directory): {spec}")
    try:
        from huggingface_hub import snapshot_download

        return str(snapshot_download(spec, local_files_only=True))
    except Exception:
        raise MeasureError(
            f"{what}: {spec!r} is not a directory and not in the local Hugging Face cache "
            "(nothing is downloaded)"
        ) from None


def read_config(path: str, what: str) -> dict[str, Any]:
    f = Path(path) / "config.json"
    if not f.is_file():
        raise MeasureError(f"{what}: no config.json in {path}")
    try:
        data = json.loads(f.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise MeasureError(f"{what}: {f} is not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise MeasureError(f"{what}: {f} is not a JSON object")
    return data


def torch_dtype(name: str, device: str) -> torch.dtype:
    if name == "auto":
        return torch.float32 if device == "cpu" else torch.bfloat16
    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[name]


def _check_weights(info: dict[str, Any], cfg: dict[str, Any], path: str, what: str) -> None:
    """Refuse a checkpoint whose weights are not the architecture its config names: transformers
    initialises a missing weight at random and goes on (a warning), and a random model would be
    measured as if it were the drafter. Extra weights alone are not refused."""
    missing = sorted(str(k) for k in info.get("missing_keys") or ())
    mismatched = sorted(
        str(k[0] if isinstance(k, tuple) else k) for k in info.get("mismatched_keys") or ()
    )
    if not missing and not mismatched:
        return
    unexpected = sorted(str(k) for k in info.get("unexpected_keys") or ())
    arch = ", ".join(cfg.get("architectures") or []) or cfg.get("model_type", "?")
    hint = ""
    if any("eagle" in str(a).lower() for a in cfg.get("architectures") or []) or any(
        k.startswith(("fc.", "midlayer.")) for k in unexpected
    ):
        hint = "; it looks like an EAGLE-3 head: give --drafter eagle3:PATH"
    parts = []
    if missing:
        parts.append(
            f"{len(missing)} missing ({', '.join(missing[:3])}{' …' if len(missing) > 3 else ''})"
        )
    if mismatched:
        parts.append(f"{len(mismatched)} of another shape ({', '.join(mismatched[:3])})")
    if unexpected:
        parts.append(
            f"{len(unexpected)} not of it ({', '.join(unexpected[:3])}{' …' if len(unexpected) > 3 else ''})"
        )
    raise MeasureError(
        f"{what}: the weights in {path} do not fit its architecture ({arch}): "
        f"{'; '.join(parts)} — loading it would measure randomly initialised weights{hint}"
    )


class CausalLM:
    """A transformers causal LM, run as decoder (hidden states) + lm_head (logits by chunks)."""

    def __init__(self, path: str, what: str, device: str, dtype: torch.dtype) -> None:
        cfg = read_config(path, what)
        for key in ("final_logit_softcapping", "logit_scale"):
            if cfg.get(key) not in (None, 1.0):
                raise MeasureError(f"{what}: {key} = {cfg[key]} is not supported (config.json)")
        from transformers.utils import logging as hf_logging

        verbosity = hf_logging.get_verbosity()
        hf_logging.set_verbosity_error()  # type: ignore[no-untyped-call]
        try:  # its table of missing weights: _check_weights says what matters, once
            loaded: Any = AutoModelForCausalLM.from_pretrained(
                path, local_files_only=True, dtype=dtype, output_loading_info=True
            )
            model, info = loaded
        except (OSError, ValueError, RuntimeError) as exc:
            raise MeasureError(f"{what}: cannot load {path} ({exc})") from None
        finally:
            hf_logging.set_verbosity(verbosity)
        _check_weights(info, cfg, path, what)
        try:
            self.model = model.to(device)
        except (OSError, ValueError, RuntimeError) as exc:
            raise MeasureError(f"{what}: cannot load {path} ({exc})") from None
        self.model.eval()
        self.device = device
        self.config = self.model.config
        self.decoder = self.model.get_decoder()
        self.lm_head = self.model.get_output_embeddings()
        self.vocab_size = int(self.config.vocab_size)
        self.num_layers = int(self.config.num_hidden_layers)
        self.max_len = int(getattr(self.config, "max_position_embeddings", 0) or 1 << 30)
        # the KV cache argument: ``cache`` from transformers 5.2x, ``past_key_values`` before
        params = inspect.signature(self.decoder.forward).parameters
        self._cache_arg = "cache" if "cache" in params else "past_key_values"

    def _step(self, ids: torch.Tensor, cache: Any) -> tuple[torch.Tensor, Any]:
        """Decoder pass over ``ids [1, s]`` after ``cache``: (hidden ``[s, h]``, the new cache)."""
        kw = {} if cache is None else {self._cache_arg: cache}
        out = self.decoder(input_ids=ids, use_cache=True, **kw)
        new = getattr(out, "cache", None) or getattr(out, "past_key_values", None)
        return out.last_hidden_state[0], new

    def _aux_hooks(
        self, ids: tuple[int, ...], store: dict[int, list[torch.Tensor]]
    ) -> list[RemovableHandle]:
        """Capture vLLM's auxiliary hidden state for layer id i: the residual stream entering
        decoder layer i (``hidden_states + residual``, ``vllm/model_executor/models/
        interfaces.py::_maybe_add_hidden_state``) — the output of layer i − 1, or the
        embeddings for i = 0."""
        hooks = []
        for i in dict.fromkeys(ids):  # a small target's defaults can repeat a layer (2, 3, 3)

            def grab(_m: Any, _inp: Any, out: Any, i: int = i) -> None:
                t = out[0] if isinstance(out, tuple) else out
                store.setdefault(i, []).append(t[0])

            mod = self.model.get_input_embeddings() if i == 0 else self.decoder.layers[i - 1]
            hooks.append(mod.register_forward_hook(grab))
        return hooks

    def hidden(
        self,
        ids: IntArray,
        *,
        aux_ids: tuple[int, ...] = (),
        extend: int = 0,
        sampler: Sampler | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None, IntArray]:
        """Final hidden states over ``ids`` and ``extend`` continued tokens (``[S + extend − 1,
        h]``: the last continued token is not fed), the aux states ``[same, n_aux·h]`` (or None)
        and the continued tokens. ``sampler(logits[1, V]) -> int`` picks each continued token."""
        store: dict[int, list[torch.Tensor]] = {}
        hooks = self._aux_hooks(aux_ids, store)
        try:
            with torch.inference_mode():
                x = torch.as_tensor(ids, dtype=torch.long, device=self.device)[None]
                if extend == 0:
                    hs = [self.decoder(input_ids=x, use_cache=False).last_hidden_state[0]]
                else:
                    h, cache = self._step(x, None)
                    hs = [h]
                new: list[int] = []
                for step in range(extend):
                    assert sampler is not None, "continuing the sequence needs a sampler"
                    tok = int(sampler(self.logits(hs[-1][-1:])))
                    new.append(tok)
                    if step == extend - 1:
                        break
                    t = torch.tensor([[tok]], dtype=torch.long, device=self.device)
                    h, cache = self._step(t, cache)
                    hs.append(h)
        finally:
            for hook in hooks:
                hook.remove()
        aux = None
        if aux_ids:
            aux = torch.cat([torch.cat(store[i], dim=0) for i in aux_ids], dim=-1)
        return torch.cat(hs, dim=0), aux, np.asarray(new, dtype=np.int64)

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        """``[c, V]`` float32 logits of hidden states ``[c, h]``."""
        with torch.inference_mode():
            out: torch.Tensor = self.lm_head(h).float()
            return out

    def generate(self, prompt: IntArray, n: int, sampler: Sampler, eos: int | None) -> IntArray:
        """The model's own continuation of ``prompt``: up to ``n`` tokens, stopping after ``eos``."""
        out_ids: list[int] = []
        with torch.inference_mode():
            x = torch.as_tensor(prompt, dtype=torch.long, device=self.device)[None]
            h, cache = self._step(x, None)
            for _ in range(n):
                tok = int(sampler(self.logits(h[-1:])))
                out_ids.append(tok)
                if eos is not None and tok == eos:
                    break
                t = torch.tensor([[tok]], dtype=torch.long, device=self.device)
                h, cache = self._step(t, cache)
        return np.asarray(out_ids, dtype=np.int64)


def rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    xf = x.float()
    return (w.float() * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps))).to(x.dtype)


def processed_probs(logits: torch.Tensor, s: Sampling) -> torch.Tensor:
    """Probabilities after temperature, top-k and top-p, as vLLM's sampler applies them
    (``vllm/v1/sample/ops/topk_topp_sampler.py::apply_top_k_top_p_pytorch``)."""
    x = logits / s.temperature
    if s.top_k > 0 or s.top_p < 1.0:
        srt, idx = x.sort(dim=-1, descending=False)
        if s.top_k > 0:
            kth = srt[:, -min(s.top_k, srt.shape[1])][:, None]
            srt = srt.masked_fill(srt < kth, float("-inf"))
        if s.top_p < 1.0:
            cum = srt.softmax(dim=-1).cumsum(dim=-1)
            mask = cum <= 1 - s.top_p
            mask[:, -1] = False
            srt = srt.masked_fill(mask, float("-inf"))
        x = srt.scatter(-1, idx, srt)
    return x.softmax(dim=-1)


def make_sampler(s: Sampling, gen: torch.Generator) -> Sampler:
    """Picks one token from ``logits [1, V]``: the argmax, or a draw after the engine's processing."""
    if s.greedy:
        return lambda logits: int(logits[0].argmax())
    return lambda logits: int(torch.multinomial(processed_probs(logits, s)[0], 1, generator=gen))


def gather(probs: torch.Tensor, tokens: IntArray) -> FloatArray:
    """``probs[i, tokens[i]]`` as float64."""
    idx = torch.as_tensor(tokens, device=probs.device)[:, None]
    return probs.gather(1, idx)[:, 0].double().cpu().numpy()
