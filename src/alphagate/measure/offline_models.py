"""The target and the drafters of ``alphagate measure offline``, in transformers + torch (the
``offline`` extra, imported only here and only when called): loaded from local paths or the local
Hugging Face cache, never downloaded.

Per request (``score_request``) one teacher-forced target pass over prompt + output gives the
target's final hidden states (its logits, chunk by chunk), the auxiliary hidden states an EAGLE-3
head reads, and a KV cache from which the target continues the output by ``k_max`` tokens (the
last engine step verifies drafts past the end of the output, and vLLM counts them). Then each
drafter proposes at every context length T:

- ``ngram``: :mod:`alphagate.measure.offline_ngram` (vLLM's proposer, exactly);
- ``draft_model``: one teacher-forced pass of the draft LM — draft token i at context T is its
  argmax at position T + i − 1;
- ``eagle3``: a head in vLLM's ``LlamaForCausalLMEagle3`` format (``vllm/model_executor/models/
  llama_eagle3.py``; Li et al. 2025, "EAGLE-3"). Its first draft at context T reads
  ``fc(aux[T−2])`` and the token at T − 1 (vLLM's ``propose`` shifts the tokens by one), with a KV
  cache written from the target's features at every earlier position. Later drafts feed the head
  its *own* output hidden state (``hidden_prenorm``) and the previous draft token: each chain is
  unrolled K − 1 more head steps from its start, all starts of a request batched, attending to
  the teacher cache up to T − 2 and to the chain's own entries — not teacher-forced with target
  features at every position, which is a different (and optimistic) quantity.

The chain is fed the trajectory's tokens, which equal its own drafts for as long as they are
accepted — all a greedy walk looks at. Acceptance per (context, draft): greedy, whether the draft
equals the trajectory's token; sampling, the target's probability of the draft token after the
engine's temperature / top-k / top-p (vLLM's default ``draft_sample_method="greedy"`` treats the
draft as one-hot, ``vllm/v1/sample/rejection_sampler.py``), or Σ_x min(p(x), q(x)) when drafts
are sampled (Leviathan et al. 2023, Thm 3.5).
"""

from __future__ import annotations

import inspect
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from alphagate.measure.offline_logs import LoggedRequest
from alphagate.measure.offline_ngram import Drafts, TokenBatch, ngram_drafts
from alphagate.measure.results import MeasureError

__all__ = [
    "DrafterSpec",
    "Encoded",
    "Models",
    "Sampling",
    "Scored",
    "encode",
    "load_models",
    "processed_probs",
    "score_request",
]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

#: positions whose logits are materialised at once (a [chunk, vocab] float32 block)
_LOGIT_CHUNK = 256
#: chain starts unrolled together (attention scores are [starts, heads, context])
_CHAIN_CHUNK = 128


@dataclass(frozen=True)
class DrafterSpec:
    """Which drafter, and where its weights are."""

    method: Literal["ngram", "draft_model", "eagle3"]
    path: str | None = None
    prompt_lookup_min: int = 2
    prompt_lookup_max: int = 5


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


def _import_torch() -> Any:
    try:
        import torch
        import transformers  # noqa: F401
    except ImportError:
        raise MeasureError(
            "measure offline needs torch and transformers: pip install 'alphagate[offline]'"
        ) from None
    return torch


def _resolve(spec: str, what: str) -> str:
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


def _config(path: str, what: str) -> dict[str, Any]:
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


def _dtype(torch: Any, name: str, device: str) -> Any:
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

    def __init__(self, path: str, what: str, torch: Any, device: str, dtype: Any) -> None:
        from transformers import AutoModelForCausalLM

        cfg = _config(path, what)
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
        self.torch = torch
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

    def _step(self, ids: Any, cache: Any) -> tuple[Any, Any]:
        """Decoder pass over ``ids [1, s]`` after ``cache``: (hidden ``[s, h]``, the new cache)."""
        kw = {} if cache is None else {self._cache_arg: cache}
        out = self.decoder(input_ids=ids, use_cache=True, **kw)
        new = getattr(out, "cache", None) or getattr(out, "past_key_values", None)
        return out.last_hidden_state[0], new

    def _aux_hooks(self, ids: tuple[int, ...], store: dict[int, list[Any]]) -> list[Any]:
        """Capture vLLM's auxiliary hidden state for layer id i: the residual stream entering
        decoder layer i (``hidden_states + residual``, ``vllm/model_executor/models/
        interfaces.py::_maybe_add_hidden_state``) — the output of layer i − 1, or the
        embeddings for i = 0."""
        hooks = []
        for i in ids:

            def grab(_m: Any, _inp: Any, out: Any, i: int = i) -> None:
                t = out[0] if isinstance(out, tuple) else out
                store.setdefault(i, []).append(t[0])

            mod = self.model.get_input_embeddings() if i == 0 else self.decoder.layers[i - 1]
            hooks.append(mod.register_forward_hook(grab))
        return hooks

    def hidden(
        self, ids: IntArray, *, aux_ids: tuple[int, ...] = (), extend: int = 0, sampler: Any = None
    ) -> tuple[Any, Any, IntArray]:
        """Final hidden states over ``ids`` and ``extend`` continued tokens (``[S + extend − 1,
        h]``: the last continued token is not fed), the aux states ``[same, n_aux·h]`` (or None)
        and the continued tokens. ``sampler(logits[1, V]) -> int`` picks each continued token."""
        torch = self.torch
        store: dict[int, list[Any]] = {}
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
                    tok = int(sampler(self.logits(hs[-1][-1:])))
                    new.append(tok)
                    if step == extend - 1:
                        break
                    t = torch.tensor([[tok]], dtype=torch.long, device=self.device)
                    h, cache = self._step(t, cache)
                    hs.append(h)
        finally:
            for h in hooks:
                h.remove()
        aux = None
        if aux_ids:
            aux = torch.cat([torch.cat(store[i], dim=0) for i in aux_ids], dim=-1)
        return torch.cat(hs, dim=0), aux, np.asarray(new, dtype=np.int64)

    def logits(self, h: Any) -> Any:
        """``[c, V]`` float32 logits of hidden states ``[c, h]``."""
        with self.torch.inference_mode():
            return self.lm_head(h).float()

    def generate(self, prompt: IntArray, n: int, sampler: Any, eos: int | None) -> IntArray:
        """The model's own continuation of ``prompt``: up to ``n`` tokens, stopping after ``eos``."""
        torch = self.torch
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


def _rms(torch: Any, x: Any, w: Any, eps: float) -> Any:
    xf = x.float()
    return (w.float() * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps))).to(x.dtype)


class Eagle3Head:
    """An EAGLE-3 head in vLLM's format, with the teacher pass and the chain unroll."""

    def __init__(self, path: str, target: CausalLM, torch: Any, device: str, dtype: Any) -> None:
        from safetensors.torch import load_file

        what = "--drafter eagle3"
        cfg = _config(path, what)
        layer_cfg = cfg.get("transformer_layer_config")  # vLLM's "speculators" format
        c = (
            {**layer_cfg, **{k: v for k, v in cfg.items() if k != "transformer_layer_config"}}
            if isinstance(layer_cfg, dict)
            else cfg
        )
        self.torch, self.device = torch, device
        tc = target.config
        if int(c.get("num_hidden_layers", 1)) != 1:
            raise MeasureError(
                f"{what}: num_hidden_layers = {c['num_hidden_layers']}: only one-layer heads are supported"
            )
        self.h = int(c["hidden_size"])
        self.heads = int(c["num_attention_heads"])
        self.kv_heads = int(c.get("num_key_value_heads", self.heads))
        self.head_dim = int(c.get("head_dim") or self.h // self.heads)
        self.eps = float(c.get("rms_norm_eps", 1e-6))
        vocab = int(c.get("vocab_size", target.vocab_size))
        if vocab != target.vocab_size:
            raise MeasureError(
                f"{what}: vocab_size {vocab} ≠ the target's {target.vocab_size} (config.json)"
            )
        self.draft_vocab = int(c.get("draft_vocab_size") or vocab)
        target_hidden = int(c.get("target_hidden_size") or self.h)
        if target_hidden != int(tc.hidden_size):
            field = "target_hidden_size" if c.get("target_hidden_size") else "hidden_size"
            raise MeasureError(
                f"{what}: {field} {target_hidden} ≠ the target's hidden_size {tc.hidden_size} (config.json)"
            )
        eagle = c.get("eagle_config") or {}
        ids = c.get("eagle_aux_hidden_state_layer_ids") or eagle.get(
            "eagle_aux_hidden_state_layer_ids"
        )
        n_layers = target.num_layers
        self.aux_ids = tuple(int(i) for i in ids) if ids else (2, n_layers // 2, n_layers - 3)
        if any(not 0 <= i <= n_layers for i in self.aux_ids):
            raise MeasureError(
                f"{what}: eagle_aux_hidden_state_layer_ids {list(self.aux_ids)} outside the target's 0..{n_layers}"
            )
        if eagle.get("use_aux_hidden_state", True) is False:
            raise MeasureError(f"{what}: use_aux_hidden_state = false is not supported")
        self.norm_before_residual = bool(c.get("norm_before_residual", False))
        self.norm_output = bool(c.get("norm_output", False))
        if eagle.get("norm_before_fc", c.get("norm_before_fc", False)) or c.get("fc_norm"):
            raise MeasureError(f"{what}: norm_before_fc / fc_norm heads are not supported")
        files = sorted(Path(path).glob("*.safetensors"))
        if not files:
            raise MeasureError(f"{what}: no *.safetensors weights in {path}")
        w: dict[str, Any] = {}
        for f in files:
            w.update(load_file(str(f)))
        w = {k.removeprefix("model.").replace("midlayer.", "layers.0."): v for k, v in w.items()}

        def get(name: str) -> Any:
            if name not in w:
                raise MeasureError(f"{what}: weight {name!r} missing from {path}")
            return w[name].to(device=device, dtype=dtype)

        n_aux = len(self.aux_ids)
        self.fc = get("fc.weight")
        if tuple(self.fc.shape) != (self.h, n_aux * target_hidden):
            raise MeasureError(
                f"{what}: fc.weight is {tuple(self.fc.shape)}, expected ({self.h}, {n_aux * target_hidden})"
            )
        p = "layers.0."
        self.q, self.k, self.v, self.o = (get(f"{p}self_attn.{n}_proj.weight") for n in "qkvo")
        if self.q.shape[1] != 2 * self.h:
            raise MeasureError(
                f"{what}: {p}self_attn.q_proj.weight reads {self.q.shape[1]} features, expected 2 × hidden_size = {2 * self.h}"
            )
        self.gate, self.up, self.down = (
            get(f"{p}mlp.{n}_proj.weight") for n in ("gate", "up", "down")
        )
        self.input_norm = get(f"{p}input_layernorm.weight")
        self.hidden_norm = get(f"{p}hidden_norm.weight")
        self.post_norm = get(f"{p}post_attention_layernorm.weight")
        self.norm = get("norm.weight")
        if self.draft_vocab != vocab:
            if "d2t" not in w:
                raise MeasureError(
                    f"{what}: draft_vocab_size {self.draft_vocab} < vocab_size {vocab} but the weights have no 'd2t' map"
                )
            self.to_target = torch.arange(self.draft_vocab, device=device) + w["d2t"].to(
                device=device, dtype=torch.long
            )
        else:
            self.to_target = None
        if "lm_head.weight" in w:
            self.lm_head = get("lm_head.weight")
        elif self.draft_vocab == vocab:
            self.lm_head = target.lm_head.weight.to(dtype=dtype)
        else:
            raise MeasureError(f"{what}: weight 'lm_head.weight' missing from {path}")
        if self.lm_head.shape[0] != self.draft_vocab:
            raise MeasureError(
                f"{what}: lm_head.weight has {self.lm_head.shape[0]} rows, draft_vocab_size is {self.draft_vocab}"
            )
        self.embed = (
            get("embed_tokens.weight")
            if "embed_tokens.weight" in w
            else target.model.get_input_embeddings().weight.to(dtype=dtype)
        )
        from transformers import LlamaConfig
        from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

        rope_keys = ("rope_theta", "rope_scaling", "rope_parameters", "max_position_embeddings")
        rc = LlamaConfig(
            hidden_size=self.h,
            num_attention_heads=self.heads,
            head_dim=self.head_dim,
            **{k: c[k] for k in rope_keys if c.get(k) is not None},
        )
        self.rope = LlamaRotaryEmbedding(rc).to(device)
        self.dtype = dtype

    def _rope(self, x: Any, positions: Any) -> Any:
        """Rotate ``x [n, heads, d]`` at ``positions [n]``."""
        cos, sin = self.rope(x, positions[None])
        cos, sin = cos[0][:, None, :].to(x.dtype), sin[0][:, None, :].to(x.dtype)
        a, b = x.chunk(2, dim=-1)
        return x * cos + self.torch.cat((-b, a), dim=-1) * sin

    def _qkv(self, hidden: Any, tokens: Any, positions: Any) -> tuple[Any, Any, Any, Any]:
        torch = self.torch
        e = _rms(torch, self.embed[tokens], self.input_norm, self.eps)
        if self.norm_before_residual:
            hn = _rms(torch, hidden, self.hidden_norm, self.eps)
            residual = hn
        else:
            residual = hidden
            hn = _rms(torch, hidden, self.hidden_norm, self.eps)
        x = torch.cat([e, hn], dim=-1)
        n = x.shape[0]
        q = self._rope((x @ self.q.T).view(n, self.heads, self.head_dim), positions)
        k = self._rope((x @ self.k.T).view(n, self.kv_heads, self.head_dim), positions)
        v = (x @ self.v.T).view(n, self.kv_heads, self.head_dim)
        return q, k, v, residual

    def _finish(self, attn: Any, residual: Any) -> tuple[Any, Any]:
        """Attention output ``[n, heads·d]`` → (hidden passed to the next step, logits)."""
        torch = self.torch
        residual = attn @ self.o.T + residual
        y = _rms(torch, residual, self.post_norm, self.eps)
        prenorm = (
            torch.nn.functional.silu(y @ self.gate.T) * (y @ self.up.T)
        ) @ self.down.T + residual
        normed = _rms(torch, prenorm, self.norm, self.eps)
        return (normed if self.norm_output else prenorm), normed

    def draft_logits(self, normed: Any) -> Any:
        """Logits over the target vocabulary (−inf outside the draft vocabulary), float32."""
        logits = (normed @ self.lm_head.T).float()
        if self.to_target is None:
            return logits
        full = logits.new_full((logits.shape[0], self.embed.shape[0]), float("-inf"))
        full[:, self.to_target] = logits
        return full

    def drafts(self, aux: Any, seq: IntArray, contexts: IntArray, k_max: int, score: Any) -> None:
        """Unroll every chain: ``score(step, rows, normed)`` receives each step's normed outputs
        for the contexts ``rows`` (indices into ``contexts``) and returns which of them to
        continue (a greedy walk needs step j + 1 only where steps 1 … j matched)."""
        torch = self.torch
        with torch.inference_mode():
            s = torch.as_tensor(seq, dtype=torch.long, device=self.device)
            x_last = int(contexts.max()) - 2  # teacher positions 0 … x_last
            pos = torch.arange(x_last + 1, device=self.device)
            hidden = aux[: x_last + 1].to(self.dtype) @ self.fc.T
            q, k, v, residual = self._qkv(hidden, s[1 : x_last + 2], pos)
            rep = self.heads // self.kv_heads
            kt = k.repeat_interleave(rep, dim=1).transpose(0, 1)  # [heads, X, d]
            vt = v.repeat_interleave(rep, dim=1).transpose(0, 1)
            a = (
                torch.nn.functional.scaled_dot_product_attention(
                    q.transpose(0, 1)[None], kt[None], vt[None], is_causal=True
                )[0]
                .transpose(0, 1)
                .reshape(x_last + 1, -1)
            )
            # keys and values at every teacher position; the layer's output only where a chain
            # starts (T − 2 for the contexts T): attention output projection and MLP skip the rest
            first = int(contexts.min()) - 2
            out, normed = self._finish(a[first:], residual[first:])
            ctx = torch.as_tensor(contexts, dtype=torch.long, device=self.device)
            scale = 1.0 / math.sqrt(self.head_dim)
            positions = torch.arange(x_last + 1, device=self.device)
            for lo in range(0, contexts.size, _CHAIN_CHUNK):
                rows = np.arange(lo, min(lo + _CHAIN_CHUNK, contexts.size))
                t = ctx[rows]
                keep = torch.as_tensor(score(0, rows, normed[t - 2 - first]), device=self.device)
                h = out[t - 2 - first]
                kc = vc = None  # the chain's own keys and values, [n, heads, j, d]
                for j in range(1, k_max):
                    if not bool(keep.any()):
                        break
                    rows, t, h = rows[keep.cpu().numpy()], t[keep], h[keep]
                    if kc is not None and vc is not None:
                        kc, vc = kc[keep], vc[keep]
                    qj, kj, vj, res_j = self._qkv(h, s[t - 1 + j], t - 2 + j)
                    kj, vj = kj.repeat_interleave(rep, dim=1), vj.repeat_interleave(rep, dim=1)
                    kc = kj[:, :, None] if kc is None else torch.cat([kc, kj[:, :, None]], dim=2)
                    vc = vj[:, :, None] if vc is None else torch.cat([vc, vj[:, :, None]], dim=2)
                    st = torch.einsum("nhd,hxd->nhx", qj, kt) * scale
                    late = positions[None, :] > (t - 2)[:, None]  # teacher keys up to T − 2
                    st = st.masked_fill(late[:, None, :], float("-inf"))
                    sc = torch.einsum("nhd,nhjd->nhj", qj, kc) * scale
                    w = torch.softmax(torch.cat([st, sc], dim=-1).float(), dim=-1).to(qj.dtype)
                    aj = torch.einsum("nhx,hxd->nhd", w[..., : x_last + 1], vt)
                    aj = aj + torch.einsum("nhj,nhjd->nhd", w[..., x_last + 1 :], vc)
                    h, nj = self._finish(aj.reshape(rows.size, -1), res_j)
                    keep = torch.as_tensor(score(j, rows, nj), device=self.device)


@dataclass
class Models:
    """Everything loaded once for a run."""

    tokenizer: Any
    target: CausalLM
    drafter: DrafterSpec
    draft: CausalLM | None
    head: Eagle3Head | None
    torch: Any
    max_model_len: int

    @property
    def aux_ids(self) -> tuple[int, ...]:
        return self.head.aux_ids if self.head is not None else ()


def _same_tokenizer(a: Any, b: Any) -> bool:
    return bool(a.get_vocab() == b.get_vocab())


def load_models(
    target: str,
    drafter: DrafterSpec,
    *,
    tokenizer: str | None = None,
    device: str = "auto",
    dtype: str = "auto",
    max_model_len: int | None = None,
    threads: int | None = None,
) -> Models:
    """Load the target, its tokenizer and the drafter; refuse a drafter that does not fit."""
    torch = _import_torch()
    if threads is not None:  # CPU threads for torch (small models on busy cores: 1 is fastest)
        torch.set_num_threads(threads)
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]

    dev = ("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else device
    dt = _dtype(torch, dtype, dev)
    tpath = _resolve(target, "--target")
    tok_path = _resolve(tokenizer, "--tokenizer") if tokenizer else tpath
    try:
        tok = AutoTokenizer.from_pretrained(tok_path, local_files_only=True)
    except (OSError, ValueError) as exc:
        raise MeasureError(
            f"--tokenizer: cannot load a tokenizer from {tok_path} ({exc})"
        ) from None
    tgt = CausalLM(tpath, "--target", torch, dev, dt)
    if len(tok) > tgt.vocab_size:
        raise MeasureError(
            f"--target: the tokenizer has {len(tok)} tokens, the model's vocab_size is {tgt.vocab_size}"
        )
    draft = head = None
    if drafter.method == "draft_model":
        dpath = _resolve(drafter.path or "", "--drafter draft_model")
        vocab = _config(dpath, "--drafter draft_model").get("vocab_size")
        if vocab != tgt.vocab_size:
            raise MeasureError(
                f"--drafter draft_model: vocab_size {vocab} ≠ the target's {tgt.vocab_size} (config.json)"
            )
        draft = CausalLM(dpath, "--drafter draft_model", torch, dev, dt)
        if (Path(dpath) / "tokenizer.json").is_file() or (
            Path(dpath) / "tokenizer_config.json"
        ).is_file():
            dtok = AutoTokenizer.from_pretrained(dpath, local_files_only=True)
            if not _same_tokenizer(dtok, tok):
                raise MeasureError(
                    "--drafter draft_model: its tokenizer differs from the target's (vocabulary)"
                )
    elif drafter.method == "eagle3":
        head = Eagle3Head(_resolve(drafter.path or "", "--drafter eagle3"), tgt, torch, dev, dt)
    limit = max_model_len or tgt.max_len
    return Models(tok, tgt, drafter, draft, head, torch, limit)


@dataclass(frozen=True)
class Encoded:
    """One request as token ids."""

    prompt: IntArray
    output: IntArray
    retokenized: bool  # the output ids came from re-tokenizing text, not from the log
    truncated: bool


def encode(r: LoggedRequest, tokenizer: Any, limit: int, k_max: int) -> Encoded | None:
    """Token ids as the server saw them: a chat request through the tokenizer's chat template
    with the generation prompt, tokenized without special tokens (vLLM's chat default); a
    completion with them (its default). The output is cut so the request and the ``k_max``
    continued tokens fit the context; None when the prompt alone does not."""
    if r.prompt_token_ids is not None:
        prompt = list(r.prompt_token_ids)
    elif r.messages is not None:
        text = tokenizer.apply_chat_template(
            list(r.messages), add_generation_prompt=True, tokenize=False
        )
        prompt = tokenizer(text, add_special_tokens=False)["input_ids"]
    else:
        prompt = tokenizer(r.prompt or "", add_special_tokens=True)["input_ids"]
    if r.output_token_ids is not None:
        out, retok = list(r.output_token_ids), False
    else:
        out, retok = tokenizer(r.output or "", add_special_tokens=False)["input_ids"], True
    room = limit - len(prompt) - k_max - 1
    if not prompt or room < 1:
        return None
    truncated = len(out) > room
    return Encoded(
        np.asarray(prompt, dtype=np.int64), np.asarray(out[:room], dtype=np.int64), retok, truncated
    )


def processed_probs(torch: Any, logits: Any, s: Sampling) -> Any:
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


@dataclass(frozen=True)
class Scored:
    """A scored request: its contexts' drafts and their acceptance."""

    num_contexts: int  # T = P + 1 … P + n − 1
    length: IntArray  # [Q] drafts proposed at each context
    run: IntArray | None  # [Q] leading drafts equal to the trajectory's tokens
    accept: FloatArray | None  # [Q, k_max] P(draft i accepted | the trajectory, earlier accepted)
    prompt_tokens: int
    output_tokens: int
    agree: int  # output positions where the target's argmax equals the logged token
    encoded: Encoded | None = None  # what was scored


def _sampler(torch: Any, s: Sampling, gen: Any) -> Any:
    if s.greedy:
        return lambda logits: int(logits[0].argmax())
    return lambda logits: int(
        torch.multinomial(processed_probs(torch, logits, s)[0], 1, generator=gen)
    )


def _gather(torch: Any, probs: Any, tokens: IntArray) -> FloatArray:
    """``probs[i, tokens[i]]`` as float64."""
    idx = torch.as_tensor(tokens, device=probs.device)[:, None]
    return probs.gather(1, idx)[:, 0].double().cpu().numpy()  # type: ignore[no-any-return]


def _posterior(p_y: FloatArray, q_y: FloatArray) -> FloatArray:
    """P(a sampled draft was accepted | the token emitted was y) = min(p(y), q(y)) ÷ p(y): the
    draft x ~ q is kept with probability min(1, p(x)/q(x)), else the token is drawn from
    norm(max(0, p − q)) (Leviathan et al. 2023, Algorithm 1)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(p_y > 0, np.minimum(p_y, q_y) / np.where(p_y > 0, p_y, 1.0), 0.0)


def _target_pass(
    m: Models, s: Sampling, hid: Any, seq: IntArray, p: int, n: int, want: IntArray | None
) -> tuple[int, FloatArray | None]:
    """The target's logits from position p − 1 on, chunk by chunk, each used twice: how many
    output tokens are its argmax (positions p − 1 … p + n − 2 predict the output), and — when
    ``want`` (``[Q, k_max]`` token indices) is given — its processed probability of each drafted
    token (position ``want − 1`` predicts it), computed once per position."""
    torch = m.torch
    end = p + n - 1 if want is None else int(hid.shape[0])
    agree = 0
    p_y = None if want is None else np.zeros(want.shape)
    flat = None if want is None else (want - 1).ravel()
    for lo in range(p - 1, end, _LOGIT_CHUNK):
        hi = min(lo + _LOGIT_CHUNK, end)
        lg = m.target.logits(hid[lo:hi])
        top = min(hi, p + n - 1)
        if top > lo:
            am = lg[: top - lo].argmax(dim=-1).cpu().numpy()
            agree += int((am == seq[lo + 1 : top + 1]).sum())
        if want is None or p_y is None or flat is None:
            continue
        sel = np.flatnonzero((flat >= lo) & (flat < hi))
        if sel.size:
            first = int(flat[sel].min())  # the rows drafted tokens are read from
            probs = processed_probs(torch, lg[first - lo :], s)
            rows = torch.as_tensor(flat[sel] - first, device=probs.device)
            p_y.flat[sel] = _gather(torch, probs[rows], seq[want].ravel()[sel])
    return agree, p_y


def score_request(
    m: Models,
    enc: Encoded,
    k_max: int,
    s: Sampling,
    seed: int,
    *,
    regenerate: bool = False,
) -> Scored:
    """Drafts and acceptance at every context of one request (see the module docstring).

    Acceptance is judged against the trajectory — the logged output (or the target's own, with
    ``regenerate``) and the target's continuation past it. Greedy drafts (temperature 0, or
    vLLM's default one-hot drafts when sampling): a draft is accepted exactly when it equals the
    trajectory's token, since a rejected one-hot draft is replaced by a token drawn from the
    target without it. Sampled drafts: the probability that the draft was accepted given the
    token that came out, :func:`_posterior`.
    """
    torch = m.torch
    sampler = _sampler(torch, s, torch.Generator(device="cpu").manual_seed(seed))
    out = enc.output
    if regenerate:
        out = m.target.generate(enc.prompt, int(out.size), sampler, m.tokenizer.eos_token_id)
    p, n = int(enc.prompt.size), int(out.size)
    seq0 = np.concatenate([enc.prompt, out])
    # the last step verifies up to k_max − 1 tokens past the output: the target continues it
    hid, aux, ext = m.target.hidden(seq0, aux_ids=m.aux_ids, extend=k_max - 1, sampler=sampler)
    seq = np.concatenate([seq0, ext])
    q = max(n - 1, 0)
    contexts = np.arange(p + 1, p + 1 + q, dtype=np.int64)
    want = contexts[:, None] + np.arange(k_max)[None, :]  # the token index each draft proposes
    sampled = not s.greedy and s.draft_sampling == "probabilistic"
    # 1. the trajectory check — the target's own greedy choice at each output position — and,
    # for sampled drafts, the target's p(y) at every drafted token, from one logits pass
    agree, p_y = _target_pass(m, s, hid, seq, p, n, want if sampled else None)
    q_y = np.zeros((q, k_max))  # sampled drafts: the draft's probability of the emitted token
    # 2. the drafts at every context
    if q == 0:
        drafts = Drafts(np.zeros((0, k_max), np.int64), np.zeros(0, np.int64))
    elif m.drafter.method == "ngram":
        one = np.asarray([0]), np.asarray([seq.size]), np.asarray([p + 1]), np.asarray([q])
        drafts = ngram_drafts(
            TokenBatch(seq, *one), m.drafter.prompt_lookup_min, m.drafter.prompt_lookup_max, k_max
        )
        if sampled:  # one-hot: accepted with min(p(y), 1{x = y}) / p(y)
            q_y = (drafts.tokens == seq[want]).astype(np.float64)
    elif m.drafter.method == "draft_model":
        assert m.draft is not None
        dh, _, _ = m.draft.hidden(seq[: p + n + k_max - 2])
        am_parts, qy_parts = [], []
        for lo in range(p, dh.shape[0], _LOGIT_CHUNK):  # drafted positions: p … (want − 1)
            lg = m.draft.logits(dh[lo : lo + _LOGIT_CHUNK])
            am_parts.append(lg.argmax(dim=-1).cpu().numpy())
            if sampled:
                nxt = seq[lo + 1 : lo + 1 + lg.shape[0]]
                qy_parts.append(_gather(torch, processed_probs(torch, lg, s), nxt))
        am = np.concatenate(am_parts)
        drafts = Drafts(am[want - 1 - p], np.full(q, k_max, dtype=np.int64))
        if sampled:
            q_y = np.concatenate(qy_parts)[want - 1 - p]
    else:
        assert m.head is not None and aux is not None
        toks = np.full((q, k_max), -1, dtype=np.int64)  # −1: not unrolled (after a mismatch)
        head = m.head

        def take(j: int, rows: IntArray, normed: Any) -> npt.NDArray[np.bool_]:
            lg = head.draft_logits(normed)
            toks[rows, j] = lg.argmax(dim=-1).cpu().numpy()
            if sampled:
                q_y[rows, j] = _gather(torch, processed_probs(torch, lg, s), seq[want[rows, j]])
                return np.ones(rows.size, dtype=bool)
            return np.asarray(toks[rows, j] == seq[want[rows, j]])  # none after a mismatch

        head.drafts(aux, seq, contexts, k_max, take)
        drafts = Drafts(toks, np.full(q, k_max, dtype=np.int64))
    # 3. acceptance; the scheduler never schedules a draft past the context limit
    length = np.minimum(drafts.length, np.maximum(m.max_model_len - contexts - 1, 0))
    if not sampled:
        from alphagate.measure.offline_walk import greedy_run

        run = greedy_run(drafts.tokens, length, seq[want])
        return Scored(q, length, run, None, p, n, agree, enc)
    assert p_y is not None
    accept = _posterior(p_y, q_y)
    accept = np.where(np.arange(k_max)[None, :] < length[:, None], accept, 0.0)
    return Scored(q, length, None, accept, p, n, agree, enc)
