"""One batch of requests scored and walked — in this process or in a Ray worker: each request's
counters (:class:`RequestCounts`, a checkpoint line) do not depend on which batch, process or
machine scored it. The models (torch) are imported only when :func:`load` is called."""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from pydantic import ConfigDict, Field, ValidationError

from alphagate.core.errors import validation_problem
from alphagate.core.records import Frozen
from alphagate.measure.offline.config import OfflineConfig
from alphagate.measure.offline.requests import LoggedRequest
from alphagate.measure.offline.walk import (
    TreeCounts,
    WalkCounts,
    walk_expected,
    walk_greedy,
    walk_lengths,
    walk_trees,
)
from alphagate.measure.results import MeasureError
from alphagate.specs.tree import TreeShape

if TYPE_CHECKING:
    from alphagate.measure.offline.replay import Models, Scored

#: what the models need: the ``offline`` extra
_OFFLINE_EXTRA = frozenset({"torch", "transformers", "safetensors"})

__all__ = ["RequestCounts", "fresh", "load", "score_batch"]

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class RequestCounts:
    """One scored request: its counters (one row of :class:`WalkCounts`) and what it held."""

    key: str  # file:line
    cls: str | None
    prompt_tokens: int
    output_tokens: int
    agree: int
    truncated: bool
    retokenized: bool
    counts: WalkCounts | None  # None: the request could not be used (see ``problem``)
    problem: str | None = None
    #: drafts of variable length (suffix decoding): steps by length drafted and accepted at K,
    #: ``[K + 1, K + 1]`` (:func:`~alphagate.measure.offline.walk.walk_lengths`)
    lengths: FloatArray | None = None
    trees: TreeCounts | None = None  # --tree: each draft tree's counts (one row)

    def to_json(self) -> str:
        c, t = self.counts, self.trees
        extra = {} if self.lengths is None else {"lengths": self.lengths.tolist()}
        return json.dumps(
            {
                **extra,
                "key": self.key,
                "cls": self.cls,
                "prompt_tokens": self.prompt_tokens,
                "output_tokens": self.output_tokens,
                "agree": self.agree,
                "truncated": self.truncated,
                "retokenized": self.retokenized,
                "problem": self.problem,
                "counts": None
                if c is None
                else {f: getattr(c, f)[0].tolist() for f in WalkCounts.__dataclass_fields__},
                **(
                    {}
                    if t is None
                    else {
                        "trees": {
                            f: getattr(t, f)[0].tolist() for f in TreeCounts.__dataclass_fields__
                        }
                    }
                ),
            }
        )

    @classmethod
    def from_json(cls, line: str, k_max: int, trees: tuple[TreeShape, ...] = ()) -> RequestCounts:
        """A checkpoint line back; ``ValueError`` for one that is not a request scored with
        ``k_max`` and ``trees`` (not JSON, a field missing or of another type, counts of
        another shape)."""
        try:
            d = _CheckpointLine.model_validate_json(line)
        except ValidationError as exc:
            raise ValueError(validation_problem(exc, where="")) from None
        counts = None
        if d.counts is not None:
            counts = WalkCounts(**_arrays(d.counts, _count_shapes(k_max), "counts", "--k-max"))
        lengths = None
        if d.lengths is not None:
            lengths = np.asarray(d.lengths, dtype=np.float64)
            if lengths.shape != (k_max + 1, k_max + 1) or np.any(lengths < 0):
                raise ValueError(f"lengths: not ({k_max + 1}, {k_max + 1}) counts ≥ 0")
        return cls(
            d.key,
            d.cls,
            d.prompt_tokens,
            d.output_tokens,
            d.agree,
            d.truncated,
            d.retokenized,
            counts,
            d.problem,
            lengths,
            _tree_counts(d.trees, trees) if counts is not None and trees else None,
        )


def _arrays(
    raw: dict[str, list[Any]], shapes: dict[str, tuple[int, ...]], what: str, flag: str
) -> dict[str, Any]:
    """One request's counters from a checkpoint line, each of its expected shape (one row)."""
    if set(raw) != set(shapes):
        raise ValueError(f"{what}: not the fields of a scored request")
    arrays = {}
    for f, shape in shapes.items():
        a = np.asarray(raw[f], dtype=np.float64)
        if a.shape != shape or not np.all(np.isfinite(a)) or np.any(a < 0):
            raise ValueError(f"{what}.{f}: not {shape} counts ≥ 0 (another {flag}?)")
        arrays[f] = a[None]
    return arrays


def _tree_counts(raw: dict[str, list[Any]] | None, trees: tuple[TreeShape, ...]) -> TreeCounts:
    if raw is None:
        raise ValueError("trees: missing (scored without --tree?)")
    n, top = len(trees), max(t.depth for t in trees)
    shapes = {"passes": (n,), "accepted": (n,), "histogram": (n, top + 1)}
    return TreeCounts(**_arrays(raw, shapes, "trees", "--tree"))


class _CheckpointLine(Frozen):
    """One scored request as the checkpoint holds it (read back strictly)."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    key: str
    cls: str | None
    prompt_tokens: int = Field(ge=0)
    output_tokens: int = Field(ge=0)
    agree: int = Field(ge=0)
    truncated: bool
    retokenized: bool
    problem: str | None
    counts: dict[str, list[Any]] | None
    lengths: list[list[float]] | None = None
    trees: dict[str, list[Any]] | None = None


def _count_shapes(k_max: int) -> dict[str, tuple[int, ...]]:
    """The shape of each of a request's counters (one row of :class:`WalkCounts`)."""
    return {
        "drafts": (k_max,),
        "draft_tokens": (k_max,),
        "accepted": (k_max,),
        "accepted_per_pos": (k_max, k_max),
        "histogram": (k_max, k_max + 1),
    }


def _request_seed(seed: int, r: LoggedRequest) -> int:
    ss = np.random.SeedSequence([seed, r.line, zlib.crc32(r.source.encode())])
    return int(ss.generate_state(1)[0])


def _score(models: Models, r: LoggedRequest, cfg: OfflineConfig) -> RequestCounts | Scored:
    """One request scored (a :class:`~alphagate.measure.offline.replay.Scored`, walked later
    with its batch), or the :class:`RequestCounts` of a request that cannot be used."""
    from alphagate.measure.offline.models import Sampling
    from alphagate.measure.offline.replay import encode, score_request

    enc = encode(r, models.tokenizer, models.max_model_len, cfg.kmax)
    if enc is None:
        return RequestCounts(
            r.where, r.cls, 0, 0, 0, False, False, None, "prompt longer than the context"
        )
    if enc.output.size == 0:
        return RequestCounts(
            r.where,
            r.cls,
            int(enc.prompt.size),
            0,
            0,
            enc.truncated,
            enc.retokenized,
            None,
            "empty output",
        )
    s = Sampling(cfg.temperature, cfg.top_p, cfg.top_k, cfg.draft_sampling)
    return score_request(
        models, enc, cfg.kmax, s, _request_seed(cfg.seed, r), regenerate=cfg.regenerate
    )


def load(cfg: OfflineConfig) -> Models:
    """The models of a run (:func:`~alphagate.measure.offline.replay.load_models`);
    :class:`MeasureError` when the ``offline`` extra is not installed."""
    try:
        from alphagate.measure.offline.proposers import DrafterSpec
        from alphagate.measure.offline.replay import load_models
    except ImportError as exc:
        if (exc.name or "").split(".")[0] not in _OFFLINE_EXTRA:
            raise
        raise MeasureError(
            "measure offline needs torch and transformers: pip install 'alphagate[offline]'"
        ) from None

    spec = DrafterSpec(
        cfg.drafter,
        cfg.drafter_path,
        cfg.prompt_lookup_min,
        cfg.prompt_lookup_max,
        suffix=cfg.suffix,
        trees=cfg.tree,
    )
    return load_models(
        cfg.target,
        spec,
        tokenizer=cfg.tokenizer,
        device=cfg.device,
        dtype=cfg.dtype,
        max_model_len=cfg.max_model_len,
        threads=cfg.threads,
        k_max=cfg.kmax,
    )


def fresh(models: Models) -> Models:
    """``models`` for a new run: a drafter that keeps state across requests (suffix decoding's
    cache of responses) starts empty, as a new server does."""
    from alphagate.measure.offline.proposers import SuffixProposer
    from alphagate.measure.offline.suffix import SuffixReplay

    p = models.proposer
    if not isinstance(p, SuffixProposer):
        return models
    r = p.replay
    new = SuffixReplay(r.params, k=r.k, max_model_len=r.max_model_len)
    return replace(models, proposer=SuffixProposer(new))


def score_batch(
    models: Models, part: list[LoggedRequest], cfg: OfflineConfig
) -> list[RequestCounts]:
    """Score requests (in this process, or in a Ray worker) and walk them together: a
    request's counters do not depend on which batch, process or machine scored it."""
    return _walk([(r, _score(models, r, cfg)) for r in part], cfg)


def _walk(
    batch: list[tuple[LoggedRequest, RequestCounts | Scored]], cfg: OfflineConfig
) -> list[RequestCounts]:
    """Walk a batch of scored requests at once (the walks are array code over requests, so one
    call for many requests costs about what one call for one request does; each request's
    counters are the same as walked alone) and pair each with its request."""
    from alphagate.measure.offline.replay import Encoded, Scored

    scored = [(r, sc) for r, sc in batch if isinstance(sc, Scored)]
    counts: WalkCounts | None = None
    lengths: FloatArray | None = None
    if scored:
        nc = np.asarray([sc.num_contexts for _, sc in scored], dtype=np.int64)
        length = np.concatenate([sc.length for _, sc in scored])
        if all(sc.run is not None for _, sc in scored):
            run = np.concatenate([sc.run for _, sc in scored if sc.run is not None])
            counts = walk_greedy(run, length, nc, cfg.kmax)
            if cfg.drafter == "suffix":
                lengths = walk_lengths(run, length, nc, cfg.k)
        else:
            acc = np.concatenate([sc.accept for _, sc in scored if sc.accept is not None])
            counts = walk_expected(acc, length, nc, cfg.kmax)
    trees = _walk_trees([sc for _, sc in scored], cfg) if scored and cfg.tree else None
    out: list[RequestCounts] = []
    i = 0
    for r, sc in batch:
        if not isinstance(sc, Scored):
            out.append(sc)
            continue
        assert counts is not None and isinstance(sc.encoded, Encoded)
        out.append(
            RequestCounts(
                r.where,
                r.cls,
                sc.prompt_tokens,
                sc.output_tokens,
                sc.agree,
                sc.encoded.truncated,
                sc.encoded.retokenized,
                counts.take(np.asarray([i])),
                lengths=None if lengths is None else lengths[i],
                trees=None if trees is None else trees.take(np.asarray([i])),
            )
        )
        i += 1
    return out


def _walk_trees(scored: list[Scored], cfg: OfflineConfig) -> TreeCounts:
    """Every draft tree walked over the batch's requests at once."""
    n = len(cfg.tree)
    runs = np.concatenate(
        [
            sc.tree_run if sc.tree_run is not None else np.zeros((n, sc.num_contexts), np.int64)
            for sc in scored
        ],
        axis=1,
    )
    nc = np.asarray([sc.num_contexts for sc in scored], dtype=np.int64)
    length = np.concatenate([sc.length for sc in scored])
    return walk_trees(runs, [t.depth for t in cfg.tree], length, nc)
