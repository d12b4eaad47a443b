"""``alphagate measure offline``: α of a candidate drafter on logged traffic, before speculation
is turned on — read the log, score every request (one teacher-forced target pass, the drafter at
every context), walk the engine's steps for every K, and sum vLLM's counters per class.

Phases: (1) read and sample the log; (2) load the models; (3) per batch of requests, in log
order: encode and score each, walk them together — each finished batch is appended to the
checkpoint, so a long run resumes where it stopped; with ``--ray`` the batches are shared out
to Ray actors that each load the models once (:mod:`alphagate.measure.offline_ray`), and each
request comes back with its counts, not averages; (4) summarise per class and overall, in log
order, with intervals by bootstrap over requests.
The same seed gives the same numbers, resumed or not: every request draws from its own seeded
generator, keyed by its place in the log.

The checkpoint is JSONL: a head line with the settings' fingerprint (and the settings, so that a
refusal can say which differ), then one line per scored request. A checkpoint written with other
settings, or that is not one, is refused (:class:`MeasureError`, exit 2) naming it; a last line
cut by a crash is moved to ``CHECKPOINT.partial-TIME`` (as bench does with ``requests.jsonl``) and
the run resumes from the whole lines, said in the notes; a line that is not a scored request is
scored again, said with its line number.
"""

from __future__ import annotations

import json
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from pydantic import ConfigDict, Field, ValidationError, model_validator

from alphagate.core.errors import validation_problem
from alphagate.core.records import Frozen
from alphagate.measure.offline_logs import (
    LoggedRequest,
    parse_class_rule,
    read_logs,
    sample,
)
from alphagate.measure.offline_results import OfflineClass, OfflineDetails, Skipped
from alphagate.measure.offline_stats import BOOTSTRAP, summarize
from alphagate.measure.offline_walk import WalkCounts, walk_expected, walk_greedy
from alphagate.measure.results import MeasureError, MeasureResult

__all__ = [
    "OfflineConfig",
    "RequestCounts",
    "load",
    "measure_offline",
    "parse_drafter",
    "score_batch",
]

Progress = Callable[[int, int, int], None]  # requests done, requests in all, tokens done
_AGREEMENT_WARN = 0.999
#: below this share of greedy agreement the log is taken not to be the target's own output
_NOT_ITS_OWN = 0.9
#: requests scored before their walks run together (and their checkpoint lines are written)
_WALK_BATCH = 16


class OfflineConfig(Frozen):
    """One offline measurement, validated once."""

    logs: tuple[Path, ...] = Field(min_length=1)
    target: str
    tokenizer: str | None = None
    drafter: Literal["ngram", "draft_model", "eagle3"]
    drafter_path: str | None = None
    prompt_lookup_min: int = Field(default=2, ge=1)
    prompt_lookup_max: int = Field(default=5, ge=1)
    k: int = Field(default=3, ge=1, le=32)
    k_max: int | None = Field(default=None, ge=1, le=32, description="default: K")
    class_field: str | None = None
    class_rules: tuple[str, ...] = ()
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    top_k: int = Field(default=0, ge=0)
    draft_sampling: Literal["greedy", "probabilistic"] = "greedy"
    sample: int | None = Field(default=None, ge=1)
    seed: int = 0
    regenerate: bool = False
    device: str = "auto"
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    max_model_len: int | None = Field(default=None, ge=8)
    threads: int | None = Field(default=None, ge=1, description="torch CPU threads")
    checkpoint: Path | None = None
    resamples: int = Field(default=BOOTSTRAP, ge=0)
    ray: str | None = Field(default=None, description="score on Ray: 'local' or a cluster address")
    ray_workers: int | None = Field(default=None, ge=1, description="default: one per CPU / GPU")

    @model_validator(mode="after")
    def _check(self) -> OfflineConfig:
        if self.k_max is not None and self.k_max < self.k:
            raise ValueError(f"--k-max {self.k_max} is below --k {self.k}")
        if self.drafter != "ngram" and not self.drafter_path:
            raise ValueError(f"--drafter {self.drafter} needs a path: {self.drafter}:PATH")
        if self.prompt_lookup_min > self.prompt_lookup_max:
            raise ValueError("prompt_lookup_min is above prompt_lookup_max")
        if self.ray_workers is not None and self.ray is None:
            raise ValueError("--ray-workers needs --ray (local or a cluster address)")
        if self.ray is not None and not self.ray.strip():
            raise ValueError("--ray: expected local or a cluster address (HOST:PORT)")
        return self

    @property
    def kmax(self) -> int:
        return self.k_max or self.k

    def drafter_label(self) -> str:
        if self.drafter == "ngram":
            return f"ngram(prompt_lookup_min={self.prompt_lookup_min}, prompt_lookup_max={self.prompt_lookup_max})"
        return f"{self.drafter} {self.drafter_path}"

    def fingerprint(self) -> str:
        """What a checkpoint must match to be resumed: everything that changes a request's counts."""
        return f"{zlib.crc32(json.dumps(self.settings(), sort_keys=True).encode()):08x}"

    def settings(self) -> dict[str, Any]:
        """The settings the fingerprint is of (kept in the checkpoint's head line)."""
        return self.model_dump(
            mode="json",
            exclude={
                "checkpoint",
                "resamples",
                "device",
                "threads",
                "class_field",
                "class_rules",
                "ray",
                "ray_workers",
            },
        )


def parse_drafter(spec: str) -> dict[str, Any]:
    """``ngram``, ``ngram:MIN:MAX``, ``draft_model:PATH`` or ``eagle3:PATH`` → config fields."""
    method, _, rest = spec.partition(":")
    if method == "ngram":
        if not rest:
            return {"drafter": "ngram"}
        parts = rest.split(":")
        if len(parts) != 2 or not all(p.isdigit() for p in parts):
            raise MeasureError(f"--drafter {spec!r}: expected ngram:MIN:MAX (prompt lookup window)")
        return {
            "drafter": "ngram",
            "prompt_lookup_min": int(parts[0]),
            "prompt_lookup_max": int(parts[1]),
        }
    if method in ("draft_model", "eagle3"):
        if not rest:
            raise MeasureError(f"--drafter {spec!r}: expected {method}:PATH")
        return {"drafter": method, "drafter_path": rest}
    if method == "eagle":
        raise MeasureError("--drafter eagle (EAGLE-1 heads) is not supported yet; eagle3 is")
    raise MeasureError(
        f"--drafter {spec!r}: expected ngram, ngram:MIN:MAX, draft_model:PATH or eagle3:PATH"
    )


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

    def to_json(self) -> str:
        c = self.counts
        return json.dumps(
            {
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
            }
        )

    @classmethod
    def from_json(cls, line: str, k_max: int) -> RequestCounts:
        """A checkpoint line back; ``ValueError`` for one that is not a request scored with
        ``k_max`` (not JSON, a field missing or of another type, counts of another shape)."""
        try:
            d = _CheckpointLine.model_validate_json(line)
        except ValidationError as exc:
            raise ValueError(validation_problem(exc, where="")) from None
        counts = None
        if d.counts is not None:
            shapes = _count_shapes(k_max)
            if set(d.counts) != set(shapes):
                raise ValueError("counts: not the fields of a scored request")
            arrays = {}
            for f, shape in shapes.items():
                a = np.asarray(d.counts[f], dtype=np.float64)
                if a.shape != shape or not np.all(np.isfinite(a)) or np.any(a < 0):
                    raise ValueError(f"counts.{f}: not {shape} counts ≥ 0 (another --k-max?)")
                arrays[f] = a[None]
            counts = WalkCounts(**arrays)
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
        )


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


def _score(models: Any, r: LoggedRequest, cfg: OfflineConfig) -> RequestCounts | Any:
    """One request scored (a :class:`~alphagate.measure.offline_models.Scored`, walked later
    with its batch), or the :class:`RequestCounts` of a request that cannot be used."""
    from alphagate.measure.offline_models import Sampling, encode, score_request

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


def load(cfg: OfflineConfig) -> Any:
    """The models of a run (:func:`~alphagate.measure.offline_models.load_models`)."""
    from alphagate.measure.offline_models import DrafterSpec, load_models

    spec = DrafterSpec(cfg.drafter, cfg.drafter_path, cfg.prompt_lookup_min, cfg.prompt_lookup_max)
    return load_models(
        cfg.target,
        spec,
        tokenizer=cfg.tokenizer,
        device=cfg.device,
        dtype=cfg.dtype,
        max_model_len=cfg.max_model_len,
        threads=cfg.threads,
    )


def score_batch(models: Any, part: list[LoggedRequest], cfg: OfflineConfig) -> list[RequestCounts]:
    """Score requests (in this process, or in a Ray worker) and walk them together: a
    request's counters do not depend on which batch, process or machine scored it."""
    return _walk([(r, _score(models, r, cfg)) for r in part], cfg)


def _walk(batch: list[tuple[LoggedRequest, Any]], cfg: OfflineConfig) -> list[RequestCounts]:
    """Walk a batch of scored requests at once (the walks are array code over requests, so one
    call for many requests costs about what one call for one request does; each request's
    counters are the same as walked alone) and pair each with its request."""
    from alphagate.measure.offline_models import Encoded, Scored

    scored = [(r, sc) for r, sc in batch if isinstance(sc, Scored)]
    counts: WalkCounts | None = None
    if scored:
        nc = np.asarray([sc.num_contexts for _, sc in scored], dtype=np.int64)
        length = np.concatenate([sc.length for _, sc in scored])
        if all(sc.run is not None for _, sc in scored):
            run = np.concatenate([sc.run for _, sc in scored if sc.run is not None])
            counts = walk_greedy(run, length, nc, cfg.kmax)
        else:
            acc = np.concatenate([sc.accept for _, sc in scored if sc.accept is not None])
            counts = walk_expected(acc, length, nc, cfg.kmax)
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
            )
        )
        i += 1
    return out


def _load_checkpoint(path: Path, cfg: OfflineConfig) -> tuple[dict[str, RequestCounts], list[str]]:
    """The requests a checkpoint already holds, and notes on what it did not hold whole.

    Refuses (:class:`MeasureError`) a file that is not a checkpoint or was written with other
    settings; a last line cut by a crash is moved aside (the file ends at its last whole line,
    where this run appends); lines that are not scored requests are scored again."""
    if not path.exists():
        return {}, []
    if not path.is_file():
        raise MeasureError(f"--checkpoint {path}: not a file")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise MeasureError(f"--checkpoint {path}: cannot be read ({exc.strerror or exc})") from None
    if not data:
        return {}, []
    lines = data.split(b"\n")
    _check_head(path, lines[0], cfg)
    notes: list[str] = []
    if not data.endswith(b"\n"):
        notes.append(_set_aside(path, data))
        lines = lines[:-1]
    done: dict[str, RequestCounts] = {}
    bad: list[int] = []
    for i, raw in enumerate(lines[1:], start=2):
        if not raw.strip():
            continue
        try:
            rc = RequestCounts.from_json(raw.decode("utf-8"), cfg.kmax)
        except (UnicodeDecodeError, ValueError):
            bad.append(i)  # scored again
            continue
        done[rc.key] = rc
    if bad:
        shown = ", ".join(map(str, bad[:10])) + (" …" if len(bad) > 10 else "")
        notes.append(
            f"--checkpoint {path}: {len(bad)} lines are not scored requests (lines {shown}); "
            "those requests are scored again"
        )
    return done, notes


def _check_head(path: Path, first: bytes, cfg: OfflineConfig) -> None:
    """The checkpoint's head line: this run's settings, else refused."""
    try:
        head = json.loads(first.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        head = None
    if not isinstance(head, dict) or not isinstance(head.get("fingerprint"), str):
        raise MeasureError(
            f"--checkpoint {path}: not a measure offline checkpoint (its first line is not the "
            "settings' fingerprint); give a new path, or the checkpoint of this measurement"
        )
    if head["fingerprint"] != cfg.fingerprint():
        theirs, ours = head.get("settings"), cfg.settings()
        differ = ""
        if isinstance(theirs, dict):
            keys = sorted(k for k in set(theirs) | set(ours) if theirs.get(k) != ours.get(k))
            differ = ": " + "; ".join(
                f"{k} {theirs.get(k)!r} there, {ours.get(k)!r} here" for k in keys[:6]
            )
        raise MeasureError(
            f"--checkpoint {path}: written by another run, with other settings (log, models, "
            f"drafter, K, sampling or seed){differ}; use another file or delete it"
        )


def _set_aside(path: Path, data: bytes) -> str:
    """Move a last line cut by a crash to ``PATH.partial-TIME``; the file keeps its whole lines."""
    cut = data.rfind(b"\n") + 1
    aside = path.with_name(f"{path.name}.partial-{time.strftime('%Y%m%dT%H%M%S')}")
    try:
        aside.write_bytes(data[cut:])
        with path.open("r+b") as fh:
            fh.truncate(cut)
    except OSError as exc:
        raise MeasureError(
            f"--checkpoint {path}: ends in a cut-off line that cannot be set aside "
            f"({exc.strerror or exc})"
        ) from None
    whole = data[:cut].count(b"\n") - 1
    return (
        f"--checkpoint {path} ended in a cut-off line (a run stopped mid-write); it was moved to "
        f"{aside} and the run resumes from the {whole} whole request lines before it"
    )


def _skipped(reasons: dict[str, list[str]]) -> list[Skipped]:
    return [Skipped(reason=k, count=len(v), first=v[:5]) for k, v in sorted(reasons.items())]


def _semantics(cfg: OfflineConfig) -> str:
    if cfg.temperature == 0.0:
        return (
            "greedy (temperature 0): every engine step is replayed — a step accepts the drafts "
            "that match the logged tokens and moves past them plus one; the last step verifies "
            "drafts past the end of the output against the target's own continuation, as vLLM "
            "counts them. Exact when the log is this target's greedy output."
        )
    head = (
        f"sampling (temperature {cfg.temperature:g}, top-p {cfg.top_p:g}, top-k {cfg.top_k}): "
        "the log must be a sample of this target at these settings (else --regenerate draws one). "
    )
    if cfg.draft_sampling == "greedy":
        return head + (
            "With vLLM's default greedy drafts the engine keeps a draft exactly when the token it "
            "samples is the draft (a rejected one-hot draft is replaced by a token drawn without "
            "it), so the walk that matches drafts against the sampled tokens gives each "
            "trajectory's counters exactly; over the log they are unbiased estimates."
        )
    return head + (
        "With sampled drafts, a draft was accepted with probability min(p(y), q(y)) ÷ p(y) given "
        "the token y that came out (Leviathan et al. 2023, Algorithm 1): the counters are "
        "expectations along each logged trajectory."
    )


def measure_offline(
    cfg: OfflineConfig, *, on_progress: Progress | None = None, models: Any = None
) -> MeasureResult:
    """Run the whole measurement (see the module docstring). ``models`` (from
    :func:`~alphagate.measure.offline_models.load_models`) may be passed in to reuse them."""
    t0 = time.perf_counter()
    rules = tuple(parse_class_rule(r) for r in cfg.class_rules)
    read = read_logs(list(cfg.logs), class_field=cfg.class_field, class_rules=rules)
    reqs = sample(read.requests, cfg.sample, cfg.seed)
    if not reqs:
        bad = sum(len(v) for v in read.skipped.values())
        raise MeasureError(
            f"no usable request in {', '.join(map(str, cfg.logs))} ({bad} lines skipped: {', '.join(read.skipped) or 'none'})"
        )
    done: dict[str, RequestCounts] = {}
    ck = None
    ck_notes: list[str] = []
    if cfg.checkpoint is not None:
        done, ck_notes = _load_checkpoint(cfg.checkpoint, cfg)
        try:
            ck = cfg.checkpoint.open("a", encoding="utf-8")
            if cfg.checkpoint.stat().st_size == 0:
                head = {"fingerprint": cfg.fingerprint(), "settings": cfg.settings()}
                ck.write(json.dumps(head) + "\n")
                ck.flush()
        except OSError as exc:
            raise MeasureError(
                f"--checkpoint {cfg.checkpoint}: cannot be written ({exc.strerror or exc})"
            ) from None
    todo = [r for r in reqs if r.where not in done]
    fresh: dict[str, RequestCounts] = {}
    tokens = sum(
        done[r.where].prompt_tokens + done[r.where].output_tokens for r in reqs if r.where in done
    )

    def finished(part: list[RequestCounts]) -> None:
        """Scored requests come back a batch at a time: checkpoint them, report progress."""
        nonlocal tokens
        for rc in part:
            fresh[rc.key] = rc
            tokens += rc.prompt_tokens + rc.output_tokens
            if ck is not None:
                ck.write(rc.to_json() + "\n")
        if ck is not None:
            ck.flush()
        if on_progress is not None:
            on_progress(len(reqs) - len(todo) + len(fresh), len(reqs), tokens)

    try:
        if cfg.ray is not None and todo:
            if models is not None:
                raise MeasureError("with --ray each Ray worker loads the models: pass none")
            from alphagate.measure.offline_ray import score_on_ray

            score_on_ray(cfg, todo, finished)
        elif todo:
            if models is None:
                models = load(cfg)
            for lo in range(0, len(todo), _WALK_BATCH):
                finished(score_batch(models, todo[lo : lo + _WALK_BATCH], cfg))
    finally:
        if ck is not None:
            ck.close()
    # in log order, whoever scored them; the class comes from this run's rules, not the checkpoint's
    results = [
        RequestCounts(**{**(done.get(r.where) or fresh[r.where]).__dict__, "cls": r.cls})
        for r in reqs
    ]
    out = _result(
        cfg, read.skipped, read.left_out, len(read.requests), results, time.perf_counter() - t0
    )
    return out.model_copy(update={"notes": [*ck_notes, *out.notes]}) if ck_notes else out


def _result(
    cfg: OfflineConfig,
    skipped_lines: dict[str, list[str]],
    left_out: dict[str, int],
    n_read: int,
    results: list[RequestCounts],
    wall_s: float,
) -> MeasureResult:
    used = [r for r in results if r.counts is not None]
    problems: dict[str, list[str]] = {k: list(v) for k, v in skipped_lines.items()}
    for r in results:
        if r.problem is not None:
            problems.setdefault(r.problem, []).append(r.key)
    for why, n in left_out.items():
        problems.setdefault(why, []).extend(["(left out)"] * n)
    if not used:
        raise MeasureError(
            "no request could be scored: "
            + "; ".join(f"{k} ({len(v)})" for k, v in problems.items())
        )
    counts = WalkCounts.concat([r.counts for r in used if r.counts is not None])
    p_tok = np.asarray([r.prompt_tokens for r in used], dtype=np.int64)
    o_tok = np.asarray([r.output_tokens for r in used], dtype=np.int64)
    rng = np.random.default_rng(cfg.seed)

    def summary(rows: npt.NDArray[np.int64]) -> tuple[Any, OfflineClass]:
        return summarize(
            counts.take(rows),
            cfg.k,
            prompt_tokens=p_tok[rows],
            output_tokens=o_tok[rows],
            resamples=cfg.resamples,
            rng=rng,
        )

    overall, overall_detail = summary(np.arange(len(used)))
    names = sorted({r.cls for r in used if r.cls is not None})
    classes, details = {}, {}
    for name in names:
        rows = np.asarray([i for i, r in enumerate(used) if r.cls == name], dtype=np.int64)
        classes[name], details[name] = summary(rows)
    greedy = cfg.temperature == 0.0
    agree = sum(r.agree for r in used) / max(int(o_tok.sum()), 1)
    notes = [
        _semantics(cfg),
        "95% intervals: bootstrap over requests (a request's steps are not independent).",
    ]
    if greedy and agree < _NOT_ITS_OWN:
        notes.append(
            f"only {agree:.1%} of the logged output tokens are this target's own greedy choice: the "
            "log is not its greedy trajectory (another model, sampling, people, or a different "
            "chat template). The figures measure the drafter along this text; --regenerate "
            "replaces each output with the target's own greedy continuation (exact)."
        )
    elif greedy and agree < _AGREEMENT_WARN:
        notes.append(
            f"{agree:.2%} of the logged output tokens are this target's own greedy choice here: "
            "near-ties that flip between this run's numerics and the server's (bf16 on GPU, "
            "batching) — the walk follows the logged tokens; --dtype bfloat16 narrows the gap."
        )
    n_retok = sum(r.retokenized for r in used)
    if n_retok:
        notes.append(
            f"{n_retok} requests have no output token ids in the log: their text was re-tokenized, which can split it differently than the server generated it."
        )
    n_trunc = sum(r.truncated for r in used)
    if n_trunc:
        notes.append(
            f"{n_trunc} requests were cut to fit the context ({cfg.max_model_len or 'the model'}'s limit)."
        )
    if problems:
        notes.append(
            "left out: " + "; ".join(f"{k}: {len(v)}" for k, v in sorted(problems.items()))
        )
    details_rec = OfflineDetails(
        drafter=cfg.drafter_label(),
        target=cfg.target,
        k=cfg.k,
        k_max=cfg.kmax,
        semantics="greedy" if greedy else "sampling",
        semantics_note=_semantics(cfg),
        temperature=cfg.temperature,
        top_p=cfg.top_p,
        top_k=cfg.top_k,
        draft_sampling=cfg.draft_sampling,
        regenerated=cfg.regenerate,
        seed=cfg.seed,
        sample=cfg.sample,
        requests_read=n_read,
        requests_used=len(used),
        prompt_tokens=int(p_tok.sum()),
        output_tokens=int(o_tok.sum()),
        skipped=_skipped(problems),
        truncated=n_trunc,
        retokenized=n_retok,
        trajectory_agreement=agree,
        bootstrap_resamples=cfg.resamples,
        wall_s=wall_s,
        classes=details,
        overall=overall_detail,
    )
    return MeasureResult(
        verb="measure offline",
        source=", ".join(str(p) for p in cfg.logs),
        window_s=None,
        overall=overall,
        classes=classes,
        sources=len(cfg.logs),
        notes=notes,
        offline=details_rec,
    )
