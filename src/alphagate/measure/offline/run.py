"""``alphagate measure offline``: α of a candidate drafter on logged traffic, before speculation
is turned on — read the log, score every request (one teacher-forced target pass, the drafter at
every context), walk the engine's steps for every K, and sum vLLM's counters per class.

Phases: (1) read and sample the log; (2) load the models; (3) per batch of requests, in log
order: encode and score each, walk them together — each finished batch is appended to the
checkpoint, so a long run resumes where it stopped; with ``--ray`` the batches are shared out
to Ray actors that each load the models once (:mod:`alphagate.measure.offline.ray`), and each
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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, TextIO

import numpy as np
import numpy.typing as npt

from alphagate.measure.engines import EngineInfo
from alphagate.measure.estimate import AcceptanceEstimate
from alphagate.measure.offline.config import OfflineConfig
from alphagate.measure.offline.lengths import summarize_lengths
from alphagate.measure.offline.requests import (
    LoggedRequest,
    LogRead,
    parse_class_rule,
    read_logs,
    sample,
)
from alphagate.measure.offline.results import (
    CheckpointBadLines,
    CheckpointCut,
    CheckpointNote,
    OfflineClass,
    OfflineDetails,
    Skipped,
)
from alphagate.measure.offline.score import RequestCounts, fresh, load, score_batch
from alphagate.measure.offline.stats import summarize, summarize_trees
from alphagate.measure.offline.walk import TreeCounts, WalkCounts
from alphagate.measure.results import MeasureError, MeasureResult

if TYPE_CHECKING:
    from alphagate.measure.offline.replay import Models

__all__ = ["Progress", "measure_offline"]

Progress = Callable[[int, int, int], None]  # requests done, requests in all, tokens done
#: requests scored before their walks run together (and their checkpoint lines are written)
_WALK_BATCH = 16


def _load_checkpoint(
    path: Path, cfg: OfflineConfig
) -> tuple[dict[str, RequestCounts], list[CheckpointNote]]:
    """The requests a checkpoint already holds, and what it did not hold whole.

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
    notes: list[CheckpointNote] = []
    if not data.endswith(b"\n"):
        notes.append(_set_aside(path, data))
        lines = lines[:-1]
    done: dict[str, RequestCounts] = {}
    bad: list[int] = []
    for i, raw in enumerate(lines[1:], start=2):
        if not raw.strip():
            continue
        try:
            rc = RequestCounts.from_json(raw.decode("utf-8"), cfg.kmax, cfg.tree)
        except (UnicodeDecodeError, ValueError):
            bad.append(i)  # scored again
            continue
        done[rc.key] = rc
    if bad:
        notes.append(CheckpointBadLines(path=str(path), lines=bad))
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


def _set_aside(path: Path, data: bytes) -> CheckpointCut:
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
    return CheckpointCut(path=str(path), moved_to=str(aside), whole_lines=whole)


def _skipped(reasons: dict[str, list[str]]) -> list[Skipped]:
    return [Skipped(reason=k, count=len(v), first=v[:5]) for k, v in sorted(reasons.items())]


def measure_offline(
    cfg: OfflineConfig, *, on_progress: Progress | None = None, models: Models | None = None
) -> MeasureResult:
    """Run the whole measurement (see the module docstring). ``models`` (from
    :func:`~alphagate.measure.offline.replay.load_models`) may be passed in to reuse them. The
    result's notes are records (its ``offline`` details):
    :func:`alphagate.report.reasons.with_offline_notes` puts them in words."""
    t0 = time.perf_counter()
    read, reqs = _read_and_sample(cfg)
    done: dict[str, RequestCounts] = {}
    repairs: list[CheckpointNote] = []
    if cfg.checkpoint is not None:
        done, repairs = _load_checkpoint(cfg.checkpoint, cfg)
    todo = [r for r in reqs if r.where not in done]
    tokens = sum(
        done[r.where].prompt_tokens + done[r.where].output_tokens for r in reqs if r.where in done
    )
    sink = _Sink(len(reqs), len(reqs) - len(todo), tokens, on_progress)
    with _checkpoint_writer(cfg) as ck:
        sink.checkpoint = ck
        _score(cfg, todo, sink, models)
    # in log order, whoever scored them; the class comes from this run's rules, not the checkpoint's
    results = [
        RequestCounts(**{**(done.get(r.where) or sink.fresh[r.where]).__dict__, "cls": r.cls})
        for r in reqs
    ]
    problems = _problems(read, results)
    return _result(cfg, problems, len(read.requests), results, time.perf_counter() - t0, repairs)


def _read_and_sample(cfg: OfflineConfig) -> tuple[LogRead, list[LoggedRequest]]:
    """The logs read, and the requests this run measures (refused when there are none)."""
    rules = tuple(parse_class_rule(r) for r in cfg.class_rules)
    read = read_logs(list(cfg.logs), class_field=cfg.class_field, class_rules=rules)
    reqs = sample(read.requests, cfg.sample, cfg.seed)
    if not reqs:
        bad = sum(len(v) for v in read.skipped.values())
        raise MeasureError(
            f"no usable request in {', '.join(map(str, cfg.logs))} ({bad} lines skipped: {', '.join(read.skipped) or 'none'})"
        )
    return read, reqs


@contextmanager
def _checkpoint_writer(cfg: OfflineConfig) -> Iterator[TextIO | None]:
    """The checkpoint opened for appending, its head line written when it is new (None: no
    checkpoint); closed when the scoring ends, whichever way."""
    if cfg.checkpoint is None:
        yield None
        return
    try:
        ck = cfg.checkpoint.open("a", encoding="utf-8")
        if cfg.checkpoint.stat().st_size == 0:
            ck.write(json.dumps({"fingerprint": cfg.fingerprint(), "settings": cfg.settings()}))
            ck.write("\n")
            ck.flush()
    except OSError as exc:
        raise MeasureError(
            f"--checkpoint {cfg.checkpoint}: cannot be written ({exc.strerror or exc})"
        ) from None
    with ck:
        yield ck


class _Sink:
    """Where scored requests go, a batch at a time: kept, appended to the checkpoint, and
    reported to the progress callback."""

    def __init__(self, total: int, done: int, tokens: int, on_progress: Progress | None) -> None:
        self.fresh: dict[str, RequestCounts] = {}
        self.checkpoint: TextIO | None = None
        self._total, self._done, self._tokens = total, done, tokens
        self._on_progress = on_progress

    def __call__(self, part: list[RequestCounts]) -> None:
        for rc in part:
            self.fresh[rc.key] = rc
            self._tokens += rc.prompt_tokens + rc.output_tokens
            if self.checkpoint is not None:
                self.checkpoint.write(rc.to_json() + "\n")
        if self.checkpoint is not None:
            self.checkpoint.flush()
        if self._on_progress is not None:
            self._on_progress(self._done + len(self.fresh), self._total, self._tokens)


def _score(
    cfg: OfflineConfig, todo: list[LoggedRequest], sink: _Sink, models: Models | None
) -> None:
    """Score the requests not yet scored: on Ray actors, or here a batch at a time."""
    if not todo:
        return
    if cfg.ray is not None:
        if models is not None:
            raise MeasureError("with --ray each Ray worker loads the models: pass none")
        from alphagate.measure.offline.ray import score_on_ray

        score_on_ray(cfg, todo, sink)
        return
    models = load(cfg) if models is None else fresh(models)
    for lo in range(0, len(todo), _WALK_BATCH):
        sink(score_batch(models, todo[lo : lo + _WALK_BATCH], cfg))


def _problems(read: LogRead, results: list[RequestCounts]) -> dict[str, list[str]]:
    """Why lines or requests were left out → where (file:line, or "(left out)" for each request
    the log marks as not to measure)."""
    problems: dict[str, list[str]] = {k: list(v) for k, v in read.skipped.items()}
    for r in results:
        if r.problem is not None:
            problems.setdefault(r.problem, []).append(r.key)
    for why, n in read.left_out.items():
        problems.setdefault(why, []).extend(["(left out)"] * n)
    return problems


class _Summaries(NamedTuple):
    """Acceptance over all the used requests and per class: the estimates at K and the every-K
    details."""

    overall: AcceptanceEstimate
    overall_detail: OfflineClass
    classes: dict[str, AcceptanceEstimate]
    details: dict[str, OfflineClass]


def _summaries(cfg: OfflineConfig, used: list[RequestCounts]) -> _Summaries:
    """Sum the used requests' counters, all traffic and per class, with bootstrap intervals (one
    generator for all, in this order, so the same seed gives the same intervals)."""
    counts = WalkCounts.concat([r.counts for r in used if r.counts is not None])
    trees = TreeCounts.concat([r.trees for r in used if r.trees is not None]) if cfg.tree else None
    p_tok = np.asarray([r.prompt_tokens for r in used], dtype=np.int64)
    o_tok = np.asarray([r.output_tokens for r in used], dtype=np.int64)
    rng = np.random.default_rng(cfg.seed)

    def summary(rows: npt.NDArray[np.int64]) -> tuple[AcceptanceEstimate, OfflineClass]:
        if cfg.drafter == "suffix":  # drafts of variable length: from the walk's joint counts
            joints = np.stack([used[i].lengths for i in rows])
            return summarize_lengths(
                joints, prompt_tokens=p_tok[rows], output_tokens=o_tok[rows],
                resamples=cfg.resamples, rng=rng,
            )  # fmt: skip
        est, detail = summarize(
            counts.take(rows),
            cfg.k,
            prompt_tokens=p_tok[rows],
            output_tokens=o_tok[rows],
            resamples=cfg.resamples,
            rng=rng,
        )
        if trees is None:
            return est, detail
        per_tree = summarize_trees(
            trees.take(rows), cfg.tree, detail.by_k, resamples=cfg.resamples, rng=rng
        )
        return est, detail.model_copy(update={"trees": per_tree})

    overall, overall_detail = summary(np.arange(len(used)))
    classes, details = {}, {}
    for name in sorted({r.cls for r in used if r.cls is not None}):
        rows = np.asarray([i for i, r in enumerate(used) if r.cls == name], dtype=np.int64)
        classes[name], details[name] = summary(rows)
    return _Summaries(overall, overall_detail, classes, details)


def _suffix_details(cfg: OfflineConfig) -> dict[str, object]:
    """What a suffix replay ran: the trees' settings and arctic-inference's release."""
    if cfg.drafter != "suffix":
        return {}
    from alphagate.measure.offline.suffix import arctic_version

    return {"suffix": cfg.suffix, "arctic_inference": arctic_version()}


def _result(
    cfg: OfflineConfig,
    problems: dict[str, list[str]],
    n_read: int,
    results: list[RequestCounts],
    wall_s: float,
    repairs: list[CheckpointNote],
) -> MeasureResult:
    used = [r for r in results if r.counts is not None]
    if not used:
        raise MeasureError(
            "no request could be scored: "
            + "; ".join(f"{k} ({len(v)})" for k, v in problems.items())
        )
    s = _summaries(cfg, used)
    output_tokens = sum(r.output_tokens for r in used)
    details = OfflineDetails(
        drafter=cfg.drafter_label(),
        target=cfg.target,
        k=cfg.k,
        k_max=cfg.kmax,
        semantics="greedy" if cfg.temperature == 0.0 else "sampling",
        temperature=cfg.temperature,
        top_p=cfg.top_p,
        top_k=cfg.top_k,
        draft_sampling=cfg.draft_sampling,
        regenerated=cfg.regenerate,
        seed=cfg.seed,
        sample=cfg.sample,
        requests_read=n_read,
        requests_used=len(used),
        prompt_tokens=sum(r.prompt_tokens for r in used),
        output_tokens=output_tokens,
        skipped=_skipped(problems),
        truncated=sum(r.truncated for r in used),
        retokenized=sum(r.retokenized for r in used),
        trajectory_agreement=sum(r.agree for r in used) / max(output_tokens, 1),
        bootstrap_resamples=cfg.resamples,
        wall_s=wall_s,
        classes=s.details,
        overall=s.overall_detail,
        max_model_len=cfg.max_model_len,
        checkpoint=repairs,
        **_suffix_details(cfg),
    )
    return MeasureResult(
        verb="measure offline",
        source=", ".join(str(p) for p in cfg.logs),
        window_s=None,
        overall=s.overall,
        classes=s.classes,
        sources=len(cfg.logs),
        offline=details,
        engine=EngineInfo(
            engine="vllm", source="measure offline: vLLM's counters, replayed (SGLang's for --tree)"
        ),
    )
