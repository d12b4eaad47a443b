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
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from alphagate.measure.offline.config import OfflineConfig
from alphagate.measure.offline.requests import parse_class_rule, read_logs, sample
from alphagate.measure.offline.results import OfflineClass, OfflineDetails, Skipped
from alphagate.measure.offline.score import RequestCounts, load, score_batch
from alphagate.measure.offline.stats import summarize
from alphagate.measure.offline.walk import WalkCounts
from alphagate.measure.results import MeasureError, MeasureResult

if TYPE_CHECKING:
    from alphagate.measure.offline.replay import Models

__all__ = ["Progress", "measure_offline"]

Progress = Callable[[int, int, int], None]  # requests done, requests in all, tokens done
_AGREEMENT_WARN = 0.999
#: below this share of greedy agreement the log is taken not to be the target's own output
_NOT_ITS_OWN = 0.9
#: requests scored before their walks run together (and their checkpoint lines are written)
_WALK_BATCH = 16


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
    cfg: OfflineConfig, *, on_progress: Progress | None = None, models: Models | None = None
) -> MeasureResult:
    """Run the whole measurement (see the module docstring). ``models`` (from
    :func:`~alphagate.measure.offline.replay.load_models`) may be passed in to reuse them."""
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
            from alphagate.measure.offline.ray import score_on_ray

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
