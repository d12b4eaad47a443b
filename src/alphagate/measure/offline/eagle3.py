"""An EAGLE-3 head in vLLM's ``LlamaForCausalLMEagle3`` format (``vllm/model_executor/models/
llama_eagle3.py``; Li et al. 2025, "EAGLE-3"), or the ``speculators`` format vLLM also reads (the
layer's settings under ``transformer_layer_config``).

The config is parsed by a pure function (:func:`eagle3_config`) that refuses what the head here
does not implement; :class:`Eagle3Head` holds the weights, the teacher pass and the chain unroll.
Its first draft at context T reads ``fc(aux[T−2])`` and the token at T − 1 (vLLM's ``propose``
shifts the tokens by one), with a KV cache written from the target's features at every earlier
position. Later drafts feed the head its *own* output hidden state (``hidden_prenorm``) and the
previous draft token: each chain is unrolled K − 1 more head steps from its start, all starts of
a request batched, attending to the teacher cache up to T − 2 and to the chain's own entries —
not teacher-forced with target features at every position, which is a different (and
optimistic) quantity. A draft tree (SGLang's top-k > 1) runs the same steps on the k nodes it
keeps per depth (:meth:`Eagle3Head.tree_drafts`, :mod:`alphagate.measure.offline.tree`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from safetensors.torch import load_file
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

from alphagate.measure.offline.models import CausalLM, read_config, rms_norm
from alphagate.measure.offline.tree import Expansion, expand
from alphagate.measure.results import MeasureError

__all__ = ["ChainScore", "Eagle3Config", "Eagle3Head", "eagle3_config", "head_weights"]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
#: ``score(step, rows, normed) -> keep``: a chain step's normed outputs for the contexts ``rows``;
#: which of them to continue
ChainScore = Callable[[int, IntArray, torch.Tensor], npt.NDArray[np.bool_]]
#: chain starts unrolled together (attention scores are [starts, heads, context])
_CHAIN_CHUNK = 128
#: where the messages point
_WHAT = "--drafter eagle3"
_ROPE_KEYS = ("rope_theta", "rope_scaling", "rope_parameters", "max_position_embeddings")


@dataclass(frozen=True)
class Eagle3Config:
    """What an EAGLE-3 head's ``config.json`` says, checked against its target."""

    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    eps: float
    vocab: int
    draft_vocab: int
    target_hidden: int
    aux_ids: tuple[int, ...]
    norm_before_residual: bool
    norm_output: bool
    rope: dict[str, Any]  # the rotary settings LlamaConfig takes

    @property
    def fc_shape(self) -> tuple[int, int]:
        return self.hidden, len(self.aux_ids) * self.target_hidden


def eagle3_config(
    raw: dict[str, Any],
    *,
    target_hidden: int,
    target_layers: int,
    target_vocab: int,
    what: str = _WHAT,
) -> Eagle3Config:
    """A head's config (``config.json`` as read) against its target; :class:`MeasureError`
    naming the field for a head that does not fit it or that the head here does not implement
    (``what``: the flag that named the head). vLLM's defaults: aux layers (2, L // 2, L − 3)
    (``llama_eagle3.py``), vocabulary and hidden size those of the target."""
    layer = raw.get("transformer_layer_config")  # the "speculators" format
    c = (
        {**layer, **{k: v for k, v in raw.items() if k != "transformer_layer_config"}}
        if isinstance(layer, dict)
        else raw
    )
    try:
        if int(c.get("num_hidden_layers", 1)) != 1:
            raise MeasureError(
                f"{what}: num_hidden_layers = {c['num_hidden_layers']}: only one-layer heads "
                "are supported"
            )
        hidden, heads = int(c["hidden_size"]), int(c["num_attention_heads"])
        vocab = int(c.get("vocab_size", target_vocab))
        head_hidden = int(c.get("target_hidden_size") or hidden)
        eagle = c.get("eagle_config") or {}
        ids = c.get("eagle_aux_hidden_state_layer_ids") or eagle.get(
            "eagle_aux_hidden_state_layer_ids"
        )
        aux_ids = tuple(int(i) for i in ids) if ids else (2, target_layers // 2, target_layers - 3)
        cfg = Eagle3Config(
            hidden=hidden,
            heads=heads,
            kv_heads=int(c.get("num_key_value_heads", heads)),
            head_dim=int(c.get("head_dim") or hidden // heads),
            eps=float(c.get("rms_norm_eps", 1e-6)),
            vocab=vocab,
            draft_vocab=int(c.get("draft_vocab_size") or vocab),
            target_hidden=head_hidden,
            aux_ids=aux_ids,
            norm_before_residual=bool(c.get("norm_before_residual", False)),
            norm_output=bool(c.get("norm_output", False)),
            rope={k: c[k] for k in _ROPE_KEYS if c.get(k) is not None},
        )
    except KeyError as exc:
        raise MeasureError(f"{what}: config.json has no {exc.args[0]!r}") from None
    except (TypeError, ValueError) as exc:
        raise MeasureError(f"{what}: config.json: {exc}") from None
    if vocab != target_vocab:
        raise MeasureError(
            f"{what}: vocab_size {vocab} ≠ the target's {target_vocab} (config.json)"
        )
    if head_hidden != target_hidden:
        field = "target_hidden_size" if c.get("target_hidden_size") else "hidden_size"
        raise MeasureError(
            f"{what}: {field} {head_hidden} ≠ the target's hidden_size {target_hidden} "
            "(config.json)"
        )
    if any(not 0 <= i <= target_layers for i in aux_ids):
        raise MeasureError(
            f"{what}: eagle_aux_hidden_state_layer_ids {list(aux_ids)} outside the target's "
            f"0..{target_layers}"
        )
    if eagle.get("use_aux_hidden_state", True) is False:
        raise MeasureError(f"{what}: use_aux_hidden_state = false is not supported")
    if eagle.get("norm_before_fc", c.get("norm_before_fc", False)) or c.get("fc_norm"):
        raise MeasureError(f"{what}: norm_before_fc / fc_norm heads are not supported")
    return cfg


def head_weights(path: str, what: str = _WHAT) -> dict[str, torch.Tensor]:
    """The head's tensors by vLLM's names (``midlayer.`` is ``layers.0.``, no ``model.``)."""
    files = sorted(Path(path).glob("*.safetensors"))
    if not files:
        raise MeasureError(f"{what}: no *.safetensors weights in {path}")
    w: dict[str, torch.Tensor] = {}
    for f in files:
        w.update(load_file(str(f)))
    return {k.removeprefix("model.").replace("midlayer.", "layers.0."): v for k, v in w.items()}


@dataclass(frozen=True)
class _Teacher:
    """The head's teacher pass over one request's target features."""

    out: torch.Tensor  # [X − first, hidden] the hidden each chain's step 1 reads, from `first` on
    normed: torch.Tensor  # [X − first, hidden] the first draft's normed output there
    kt: torch.Tensor  # [heads, X, d] keys at every teacher position
    vt: torch.Tensor  # [heads, X, d]
    first: int  # the first chain start's position (T − 2 of the first context)
    positions: torch.Tensor  # [X]


class Eagle3Head:
    """An EAGLE-3 head in vLLM's format, with the teacher pass and the chain unroll."""

    def __init__(self, path: str, target: CausalLM, device: str, dtype: torch.dtype) -> None:
        tc = target.config
        self.cfg = cfg = eagle3_config(
            read_config(path, _WHAT),
            target_hidden=int(tc.hidden_size),
            target_layers=target.num_layers,
            target_vocab=target.vocab_size,
        )
        self.device, self.dtype = device, dtype
        self.aux_ids = cfg.aux_ids
        w = head_weights(path)

        def get(name: str, shape: tuple[int, ...] | None = None) -> torch.Tensor:
            if name not in w:
                raise MeasureError(f"{_WHAT}: weight {name!r} missing from {path}")
            t = w[name]
            if shape is not None and tuple(t.shape) != shape:
                raise MeasureError(f"{_WHAT}: {name} is {tuple(t.shape)}, expected {shape}")
            return t.to(device=device, dtype=dtype)

        h, p = cfg.hidden, "layers.0."
        self.fc = get("fc.weight", cfg.fc_shape)
        self.q, self.k, self.v, self.o = (get(f"{p}self_attn.{n}_proj.weight") for n in "qkvo")
        if self.q.shape[1] != 2 * h:
            raise MeasureError(
                f"{_WHAT}: {p}self_attn.q_proj.weight reads {self.q.shape[1]} features, expected "
                f"2 × hidden_size = {2 * h}"
            )
        self.gate, self.up, self.down = (
            get(f"{p}mlp.{n}_proj.weight") for n in ("gate", "up", "down")
        )
        self.input_norm = get(f"{p}input_layernorm.weight")
        self.hidden_norm = get(f"{p}hidden_norm.weight")
        self.post_norm = get(f"{p}post_attention_layernorm.weight")
        self.norm = get("norm.weight")
        self.to_target = self._draft_map(w, path)
        self.lm_head = self._lm_head(w, get, target, path)
        self.embed = (
            get("embed_tokens.weight")
            if "embed_tokens.weight" in w
            else target.model.get_input_embeddings().weight.to(dtype=dtype)
        )
        rc = LlamaConfig(
            hidden_size=h, num_attention_heads=cfg.heads, head_dim=cfg.head_dim, **cfg.rope
        )
        self.rope = LlamaRotaryEmbedding(rc).to(device)

    def _draft_map(self, w: dict[str, torch.Tensor], path: str) -> torch.Tensor | None:
        """Draft-vocabulary index → target token id (``d2t`` holds the offsets), or None."""
        cfg = self.cfg
        if cfg.draft_vocab == cfg.vocab:
            return None
        if "d2t" not in w:
            raise MeasureError(
                f"{_WHAT}: draft_vocab_size {cfg.draft_vocab} < vocab_size {cfg.vocab} but the "
                f"weights in {path} have no 'd2t' map"
            )
        offsets = w["d2t"].to(device=self.device, dtype=torch.long)
        return torch.arange(cfg.draft_vocab, device=self.device) + offsets

    def _lm_head(
        self,
        w: dict[str, torch.Tensor],
        get: Callable[..., torch.Tensor],
        target: CausalLM,
        path: str,
    ) -> torch.Tensor:
        """The head's own lm_head, or (same vocabulary) the target's."""
        cfg = self.cfg
        if "lm_head.weight" in w:
            head = get("lm_head.weight")
        elif cfg.draft_vocab == cfg.vocab:
            head = target.lm_head.weight.to(dtype=self.dtype)
        else:
            raise MeasureError(f"{_WHAT}: weight 'lm_head.weight' missing from {path}")
        if head.shape[0] != cfg.draft_vocab:
            raise MeasureError(
                f"{_WHAT}: lm_head.weight has {head.shape[0]} rows, draft_vocab_size is "
                f"{cfg.draft_vocab}"
            )
        return head

    def _rope(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Rotate ``x [n, heads, d]`` at ``positions [n]``."""
        cos, sin = self.rope(x, positions[None])
        cos, sin = cos[0][:, None, :].to(x.dtype), sin[0][:, None, :].to(x.dtype)
        a, b = x.chunk(2, dim=-1)
        rotated: torch.Tensor = x * cos + torch.cat((-b, a), dim=-1) * sin
        return rotated

    def _qkv(
        self, hidden: torch.Tensor, tokens: torch.Tensor, positions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        e = rms_norm(self.embed[tokens], self.input_norm, self.cfg.eps)
        if self.cfg.norm_before_residual:
            hn = rms_norm(hidden, self.hidden_norm, self.cfg.eps)
            residual = hn
        else:
            residual = hidden
            hn = rms_norm(hidden, self.hidden_norm, self.cfg.eps)
        x = torch.cat([e, hn], dim=-1)
        n = x.shape[0]
        q = self._rope((x @ self.q.T).view(n, self.cfg.heads, self.cfg.head_dim), positions)
        k = self._rope((x @ self.k.T).view(n, self.cfg.kv_heads, self.cfg.head_dim), positions)
        v = (x @ self.v.T).view(n, self.cfg.kv_heads, self.cfg.head_dim)
        return q, k, v, residual

    def _finish(
        self, attn: torch.Tensor, residual: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Attention output ``[n, heads·d]`` → (hidden passed to the next step, its final norm)."""
        residual = attn @ self.o.T + residual
        y = rms_norm(residual, self.post_norm, self.cfg.eps)
        prenorm = (
            torch.nn.functional.silu(y @ self.gate.T) * (y @ self.up.T)
        ) @ self.down.T + residual
        normed = rms_norm(prenorm, self.norm, self.cfg.eps)
        return (normed if self.cfg.norm_output else prenorm), normed

    def draft_logits(self, normed: torch.Tensor) -> torch.Tensor:
        """Logits over the target vocabulary (−inf outside the draft vocabulary), float32."""
        logits = (normed @ self.lm_head.T).float()
        if self.to_target is None:
            return logits
        full = logits.new_full((logits.shape[0], self.embed.shape[0]), float("-inf"))
        full[:, self.to_target] = logits
        return full

    def _teacher(self, aux: torch.Tensor, s: torch.Tensor, contexts: IntArray) -> _Teacher:
        """The head over the target's features at every position up to the last chain start:
        keys and values at every one, the layer's output only where a chain starts (T − 2 for
        the contexts T) — the attention output projection and the MLP skip the rest."""
        x_last = int(contexts.max()) - 2  # teacher positions 0 … x_last
        pos = torch.arange(x_last + 1, device=self.device)
        hidden = aux[: x_last + 1].to(self.dtype) @ self.fc.T
        q, k, v, residual = self._qkv(hidden, s[1 : x_last + 2], pos)
        rep = self.cfg.heads // self.cfg.kv_heads
        kt = k.repeat_interleave(rep, dim=1).transpose(0, 1)  # [heads, X, d]
        vt = v.repeat_interleave(rep, dim=1).transpose(0, 1)
        a = (
            torch.nn.functional.scaled_dot_product_attention(
                q.transpose(0, 1)[None], kt[None], vt[None], is_causal=True
            )[0]
            .transpose(0, 1)
            .reshape(x_last + 1, -1)
        )
        first = int(contexts.min()) - 2
        out, normed = self._finish(a[first:], residual[first:])
        return _Teacher(out, normed, kt, vt, first, pos)

    def _step(
        self,
        tp: _Teacher,
        h: torch.Tensor,
        tokens: torch.Tensor,
        t: torch.Tensor,
        j: int,
        cache: tuple[torch.Tensor, torch.Tensor] | None,
    ) -> tuple[torch.Tensor, torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """Head step j ≥ 1 for the rows of contexts ``t``: each reads ``h`` (its parent's output)
        and ``tokens`` at position T − 2 + j, and attends to the teacher keys up to T − 2 and
        to its own cache ``[n, heads, j − 1, d]`` of earlier steps. Returns (output hidden,
        normed output, the cache with this step's keys and values)."""
        rep, scale = self.cfg.heads // self.cfg.kv_heads, 1.0 / math.sqrt(self.cfg.head_dim)
        qj, kj, vj, res_j = self._qkv(h, tokens, t - 2 + j)
        kj = kj.repeat_interleave(rep, dim=1)[:, :, None]  # [n, heads, 1, d]
        vj = vj.repeat_interleave(rep, dim=1)[:, :, None]
        kc = kj if cache is None else torch.cat([cache[0], kj], dim=2)
        vc = vj if cache is None else torch.cat([cache[1], vj], dim=2)
        st = torch.einsum("nhd,hxd->nhx", qj, tp.kt) * scale
        late = tp.positions[None, :] > (t - 2)[:, None]  # teacher keys up to T − 2
        st = st.masked_fill(late[:, None, :], float("-inf"))
        sc = torch.einsum("nhd,nhjd->nhj", qj, kc) * scale
        w = torch.softmax(torch.cat([st, sc], dim=-1).float(), dim=-1).to(qj.dtype)
        x = tp.kt.shape[1]
        aj = torch.einsum("nhx,hxd->nhd", w[..., :x], tp.vt)
        aj = aj + torch.einsum("nhj,nhjd->nhd", w[..., x:], vc)
        h_out, normed = self._finish(aj.reshape(h.shape[0], -1), res_j)
        return h_out, normed, (kc, vc)

    def drafts(
        self, aux: torch.Tensor, seq: IntArray, contexts: IntArray, k_max: int, score: ChainScore
    ) -> None:
        """Unroll every chain: ``score(step, rows, normed)`` receives each step's normed outputs
        for the contexts ``rows`` (indices into ``contexts``) and returns which of them to
        continue (a greedy walk needs step j + 1 only where steps 1 … j matched)."""
        with torch.inference_mode():
            s = torch.as_tensor(seq, dtype=torch.long, device=self.device)
            tp = self._teacher(aux, s, contexts)
            ctx = torch.as_tensor(contexts, dtype=torch.long, device=self.device)
            for lo in range(0, contexts.size, _CHAIN_CHUNK):
                rows = np.arange(lo, min(lo + _CHAIN_CHUNK, contexts.size))
                t = ctx[rows]
                keep = torch.as_tensor(
                    score(0, rows, tp.normed[t - 2 - tp.first]), device=self.device
                )
                h = tp.out[t - 2 - tp.first]
                cache: tuple[torch.Tensor, torch.Tensor] | None = None  # the chain's own
                for j in range(1, k_max):
                    if not bool(keep.any()):
                        break
                    rows, t, h = rows[keep.cpu().numpy()], t[keep], h[keep]
                    if cache is not None:
                        cache = (cache[0][keep], cache[1][keep])
                    h, nj, cache = self._step(tp, h, s[t - 1 + j], t, j, cache)
                    keep = torch.as_tensor(score(j, rows, nj), device=self.device)

    def _top_children(self, normed: torch.Tensor, topk: int) -> tuple[FloatArray, IntArray]:
        """The draft distribution's top-k at each row: probabilities (best first) and target
        token ids, as SGLang's draft phase takes them (softmax over the draft vocabulary)."""
        probs = torch.softmax(self.draft_logits(normed), dim=-1)
        p, tok = torch.topk(probs, topk, dim=-1)
        return p.double().cpu().numpy(), tok.cpu().numpy().astype(np.int64)

    def tree_drafts(
        self, aux: torch.Tensor, seq: IntArray, contexts: IntArray, topk: int, steps: int
    ) -> Expansion:
        """SGLang's draft phase of ``steps`` steps of top-``topk`` at every context
        (:func:`alphagate.measure.offline.tree.expand`): each kept node is run through the head
        from its parent's output and its own token. A node attends to the keys of the nodes kept
        at the same rank at earlier steps — SGLang's draft cache is one slot line per rank,
        written at every step and not reordered when a node's parent had another rank
        (``python/sglang/kernels/ops/speculative/cache_locs.py``,
        ``generate_draft_decode_kv_indices``) — which, for top-k 1, is the chain's own cache."""
        parts: list[Expansion] = []
        chunk = max(1, _CHAIN_CHUNK // topk)
        with torch.inference_mode():
            s = torch.as_tensor(seq, dtype=torch.long, device=self.device)
            tp = self._teacher(aux, s, contexts)
            ctx = torch.as_tensor(contexts, dtype=torch.long, device=self.device)
            for lo in range(0, contexts.size, chunk):
                t = ctx[lo : lo + chunk]
                parts.append(self._tree_chunk(tp, t, topk, steps))
        return Expansion.concat(parts)

    def _tree_chunk(self, tp: _Teacher, t: torch.Tensor, topk: int, steps: int) -> Expansion:
        """:meth:`tree_drafts` for the contexts ``t`` (one row per context and rank)."""
        n = t.shape[0]
        root_p, root_tok = self._top_children(tp.normed[t - 2 - tp.first], topk)
        hidden = tp.out[t - 2 - tp.first][:, None].expand(n, topk, -1)  # [n, k, hidden]
        t_rows = t.repeat_interleave(topk)
        cache: tuple[torch.Tensor, torch.Tensor] | None = None

        def children(
            depth: int, parent_rank: IntArray, tokens: IntArray
        ) -> tuple[FloatArray, IntArray]:
            nonlocal hidden, cache
            rank = torch.as_tensor(parent_rank, device=self.device)
            h = torch.gather(hidden, 1, rank[..., None].expand(-1, -1, hidden.shape[-1]))
            tok = torch.as_tensor(tokens, device=self.device).reshape(-1)
            out, normed, cache = self._step(tp, h.reshape(n * topk, -1), tok, t_rows, depth, cache)
            hidden = out.reshape(n, topk, -1)
            p, c = self._top_children(normed, topk)
            return p.reshape(n, topk, topk), c.reshape(n, topk, topk)

        return expand(root_p, root_tok, children, steps)
