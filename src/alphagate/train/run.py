"""``alphagate train-head``: a domain EAGLE-3 head trained on a team's own request log, and its α
measured on requests of the same log it never saw.

Phases: (1) the run's folder — new, or the run ``--resume`` continues with the same settings;
(2) the log's requests of the class, their token ids checked against the target's tokenizer,
split by request into train and held-out (seeded), each part large enough; (3) the target's
hidden states over the train split (:mod:`.capture`); (4) the head to start from — the ``--init``
head, a new one, or the checkpoint resumed — and, when there is one to start from, its α on the
held-out requests; (5) training (:mod:`.loop`): a checkpoint every N steps, the held-out α every
``--eval-every`` steps; (6) the head saved where vLLM loads it, and its α on the held-out
requests (``measure offline``, per class, with intervals).

With ``--backend speculators``, (5) is left to ``speculators train`` on a GPU machine: the data
and the start head are written in its formats and the commands returned (:mod:`.speculators`).
torch, transformers and speculators are imported when a run starts, not with this module.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from alphagate.measure.offline.config import OfflineConfig
from alphagate.measure.offline.requests import LoggedRequest, parse_class_rule, read_logs, sample
from alphagate.measure.offline.run import measure_offline
from alphagate.measure.results import MeasureResult
from alphagate.train.config import RUN_FILE, TrainError, TrainHeadConfig, resume_mismatch
from alphagate.train.results import (
    CaptureStats,
    EvalPoint,
    TrainingStats,
    TrainResult,
    gains,
)
from alphagate.train.split import (
    Split,
    check_sizes,
    class_requests,
    distinct,
    log_lines,
    split_requests,
)

if TYPE_CHECKING:
    from alphagate.measure.offline.replay import Encoded, Models
    from alphagate.train.capture import Captured
    from alphagate.train.loop import StepStats

__all__ = ["Progress", "Tick", "checkpoint_step", "measure_head", "train_head"]

#: the modules a run needs that the ``offline`` extra installs
_OFFLINE_EXTRA = frozenset({"torch", "transformers", "safetensors", "tokenizers"})
#: steps the last loss and agreement are averaged over
_LAST = 10


class Tick(NamedTuple):
    """Progress: the phase, how far it is, and in training the step's loss and agreement."""

    phase: Literal["capture", "train", "measure"]
    done: int
    total: int
    tokens: int = 0
    loss: float | None = None
    agreement: float | None = None


Progress = Callable[[Tick], None]


class _Data(NamedTuple):
    """The requests split, the train part encoded, and what was left out."""

    split: Split
    train: list[tuple[str, Encoded]]
    skipped: dict[str, int]


def train_head(cfg: TrainHeadConfig, *, on_progress: Progress | None = None) -> TrainResult:
    """The whole run (see the module docstring). :class:`TrainError` for bad input (exit 2);
    ``KeyboardInterrupt`` leaves the last checkpoint whole, for ``--resume``."""
    say = on_progress or (lambda _tick: None)
    resuming = _folder(cfg)
    models, target_path = _load(cfg)
    data = _data(cfg, models)
    _write_run(cfg, data.split, new=not resuming)
    captured, capture = _capture(cfg, models, data, say)
    model, from_checkpoint = _start(cfg, models, target_path, resuming)
    before = _measure(cfg, models, cfg.init, say) if cfg.init else None
    base = dict(
        target=cfg.target,
        start=cfg.init or f"new (seed {cfg.seed})",
        head=str(cfg.out),
        backend=cfg.backend,
        classes=_classes(data.split.train),
        k=cfg.k,
        requests_train=len(captured),
        requests_held_out=len(data.split.held_out),
        held_out_log=str(cfg.held_out_log),
        skipped=data.skipped,
        capture=capture,
        before=before,
    )
    if cfg.backend == "speculators":
        from alphagate.train.speculators import trained_head

        base["head"] = str(trained_head(cfg, captured))
        return TrainResult(**base, commands=_gpu_commands(cfg, data, captured, model, target_path))
    training, evals = _train(cfg, models, captured, model, from_checkpoint, say)
    from alphagate.train.head import save_head

    save_head(model, cfg.out)
    after = _measure(cfg, models, str(cfg.out), say)
    return TrainResult(
        **base, training=training, evals=evals, after=after, gains=gains(before, after)
    )


def measure_head(cfg: TrainHeadConfig, head: str, before: TrainResult) -> TrainResult:
    """A head trained elsewhere (``--backend speculators --run``) measured on the held-out
    requests of the run ``before`` prepared: the result with its α and the gain."""
    models, _ = _load(cfg)
    after = _measure(cfg, models, head, lambda _t: None)
    return before.model_copy(update={"after": after, "gains": gains(before.before, after)})


def checkpoint_step(cfg: TrainHeadConfig) -> int | None:
    """The step of the last whole checkpoint in the run's folder (None: none yet)."""
    from alphagate.train.loop import checkpoint, saved_step

    found = checkpoint(cfg.work / "checkpoint")
    return None if found is None else saved_step(found)


def _folder(cfg: TrainHeadConfig) -> bool:
    """Whether the run resumes one (its settings must be this run's); refuses a folder that
    holds another run, or anything else."""
    run = cfg.out / RUN_FILE
    if cfg.init is not None and os.path.realpath(cfg.init) == os.path.realpath(cfg.out):
        raise TrainError(f"--out {cfg.out} is the --init head: give the new head another folder")
    if run.is_file():
        if not cfg.resume:
            raise TrainError(
                f"--out {cfg.out} holds a train-head run already: add --resume to continue it, "
                "or give another folder"
            )
        try:
            saved = json.loads(run.read_text(encoding="utf-8"))["settings"]
        except (OSError, ValueError, KeyError, TypeError):
            raise TrainError(f"--resume: {run} is not a train-head run's settings") from None
        why = resume_mismatch(saved, cfg)
        if why is not None:
            raise TrainError(why)
        return True
    if cfg.resume:
        raise TrainError(f"--resume: {cfg.out} holds no train-head run to resume")
    if cfg.out.exists() and (not cfg.out.is_dir() or any(cfg.out.iterdir())):
        raise TrainError(f"--out {cfg.out}: not an empty folder; give a new one")
    return False


def _load(cfg: TrainHeadConfig) -> tuple[Models, str]:
    """The target and its tokenizer (refused without the ``offline`` extra or speculators)."""
    try:
        from alphagate.measure.offline.models import resolve
        from alphagate.measure.offline.proposers import DrafterSpec
        from alphagate.measure.offline.replay import load_models
    except ImportError as exc:
        if (exc.name or "").split(".")[0] not in _OFFLINE_EXTRA:
            raise
        raise TrainError(
            "train-head needs torch and transformers: pip install 'alphagate[offline]'"
        ) from None
    from alphagate.train.head import speculators

    speculators()
    path = resolve(cfg.target, "--target")
    return load_models(path, DrafterSpec("ngram"), threads=cfg.threads), path


def _data(cfg: TrainHeadConfig, models: Models) -> _Data:
    """The class's requests, those whose token ids are not the target's left out, split."""
    from alphagate.measure.offline.replay import encode
    from alphagate.train.capture import untokenizable

    names = [p.name for p in cfg.logs]
    if len(set(names)) < len(names):
        raise TrainError("--log: two files of the same name; give each log a name of its own")
    rules = tuple(parse_class_rule(r) for r in cfg.class_rules)
    read = read_logs(list(cfg.logs), class_field=cfg.class_field, class_rules=rules)
    where = ", ".join(map(str, cfg.logs))
    reqs = class_requests(sample(read.requests, cfg.sample, cfg.seed), cfg.only_class, where)
    skipped = {k: len(v) for k, v in read.skipped.items()}
    once = distinct(reqs)
    if len(once) < len(reqs):
        skipped["a repeat of an earlier request"] = len(reqs) - len(once)
    reqs = _tokenizable(once, untokenizable(once, models.tokenizer), skipped)
    split = split_requests(reqs, cfg.held_out, cfg.seed)
    limit = models.max_model_len
    enc = [(r.where, encode(r, models.tokenizer, limit, 0)) for r in split.train]
    train = [(w, e) for w, e in enc if e is not None and e.output.size > 0]
    if len(train) < len(enc):
        skipped["prompt past the context, or no output"] = len(enc) - len(train)
    held = [encode(r, models.tokenizer, limit, cfg.k) for r in split.held_out]
    check_sizes(
        train_tokens=sum(int(e.output.size) for _, e in train),
        held_out_tokens=sum(int(e.output.size) for e in held if e is not None),
        held_out_requests=sum(1 for e in held if e is not None and e.output.size > 0),
    )
    return _Data(split, train, skipped)


def _tokenizable(
    reqs: list[LoggedRequest], bad: list[str], skipped: dict[str, int]
) -> list[LoggedRequest]:
    """The requests whose token ids are the target tokenizer's; refused when most are not (the
    log was tokenized by another tokenizer)."""
    if not bad:
        return reqs
    with_ids = sum(1 for r in reqs if r.output_token_ids or r.prompt_token_ids)
    if 2 * len(bad) > with_ids:
        raise TrainError(
            f"--log: the token ids of {len(bad)} of {with_ids} requests do not round-trip "
            f"through the target's tokenizer (the first at {bad[0]}): the log was tokenized by "
            "another tokenizer — give the --target that served it"
        )
    skipped["token ids not the target tokenizer's"] = len(bad)
    out = set(bad)
    return [r for r in reqs if r.where not in out]


def _write_run(cfg: TrainHeadConfig, split: Split, *, new: bool) -> None:
    """The run's settings (what ``--resume`` checks) and the held-out requests' log lines."""
    cfg.out.mkdir(parents=True, exist_ok=True)
    if new:
        head = {"settings": cfg.settings(), "held_out": [r.where for r in split.held_out]}
        _replace(cfg.out / RUN_FILE, json.dumps(head, indent=1) + "\n")
    lines = log_lines(split.held_out, cfg.logs)
    _replace(cfg.held_out_log, "".join(line + "\n" for line in lines))


def _replace(path: Any, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        raise TrainError(f"--out: cannot write {path} ({exc.strerror or exc})") from None


def _capture(
    cfg: TrainHeadConfig, models: Models, data: _Data, say: Progress
) -> tuple[list[Captured], CaptureStats]:
    from alphagate.train.capture import capture
    from alphagate.train.head import default_aux_layers

    aux = _aux_layers(cfg, models) or default_aux_layers(models.target.num_layers)
    t0 = time.perf_counter()
    folder = cfg.work / "data"
    got = capture(
        models.target, data.train, folder, aux, lambda d, n, tok: say(Tick("capture", d, n, tok))
    )
    seconds = time.perf_counter() - t0
    fresh = sum(c.tokens for c in got if c.fresh)
    stats = CaptureStats(
        requests=len(got),
        tokens=sum(c.tokens for c in got),
        seconds=seconds,
        captured_here=sum(c.fresh for c in got),
        tokens_per_s=fresh / seconds if fresh and seconds > 0 else None,
        folder=str(folder),
    )
    return got, stats


def _aux_layers(cfg: TrainHeadConfig, models: Models) -> tuple[int, ...] | None:
    """The starting head's auxiliary layers (None for a new head: the target's default)."""
    if cfg.init is None:
        return None
    from alphagate.measure.offline.eagle3 import eagle3_config
    from alphagate.measure.offline.models import read_config, resolve
    from alphagate.measure.results import MeasureError

    t = models.target
    try:
        raw = read_config(resolve(cfg.init, "--init"), "--init")
        c = eagle3_config(
            raw,
            target_hidden=int(t.config.hidden_size),
            target_layers=t.num_layers,
            target_vocab=t.vocab_size,
            what="--init",
        )
    except MeasureError as exc:
        raise TrainError(str(exc)) from None
    return c.aux_ids


def _start(
    cfg: TrainHeadConfig, models: Models, target_path: str, resuming: bool
) -> tuple[Any, bool]:
    """The head training starts from, and whether it is a checkpoint to go on from."""
    from alphagate.measure.offline.models import resolve
    from alphagate.train.head import load_head, new_head
    from alphagate.train.loop import checkpoint

    ckpt = checkpoint(cfg.work / "checkpoint") if resuming else None
    if ckpt is not None:
        return load_head(str(ckpt), models.target, target_path, "--resume"), True
    if cfg.init is not None:
        return load_head(resolve(cfg.init, "--init"), models.target, target_path, "--init"), False
    return new_head(models.target, target_path, cfg.seed), False


def _measure(cfg: TrainHeadConfig, models: Models, head: str, say: Progress) -> MeasureResult:
    """``measure offline`` of ``head`` on the held-out requests, with the target loaded once."""
    from alphagate.measure.offline.proposers import DrafterSpec, load_proposer

    spec = DrafterSpec("eagle3", head)
    t = models.target
    dtype = next(t.model.parameters()).dtype
    m = dataclasses.replace(
        models, drafter=spec, proposer=load_proposer(spec, t, models.tokenizer, t.device, dtype)
    )
    oc = OfflineConfig(
        logs=(cfg.held_out_log,),
        target=cfg.target,
        drafter="eagle3",
        drafter_path=head,
        k=cfg.k,
        class_field=cfg.class_field,
        class_rules=cfg.class_rules,
        seed=cfg.seed,
    )
    return measure_offline(
        oc, models=m, on_progress=lambda d, n, tok: say(Tick("measure", d, n, tok))
    )


def _train(
    cfg: TrainHeadConfig,
    models: Models,
    captured: list[Captured],
    model: Any,
    resume: bool,
    say: Progress,
) -> tuple[TrainingStats, list[EvalPoint]]:
    """The optimizer steps not yet done, and the held-out α every ``--eval-every`` steps."""
    from alphagate.train.head import save_head
    from alphagate.train.loop import LoopSettings, train_loop

    s = LoopSettings(
        cfg.steps,
        cfg.lr,
        cfg.tokens_per_step,
        cfg.ttt_steps,
        cfg.seed,
        cfg.checkpoint_every,
        cfg.eval_every,
    )
    evals: list[EvalPoint] = []

    def on_step(st: StepStats) -> None:
        say(Tick("train", st.step, cfg.steps, st.tokens, st.loss, st.agreement[0]))

    def on_eval(step: int) -> None:
        folder = cfg.work / "eval"
        save_head(model, folder)
        m = _measure(cfg, models, str(folder), say)
        alpha = {n: e.alpha_iid for n, e in m.classes.items()}
        ci = {n: e.alpha_iid_ci for n, e in m.classes.items()}
        if m.overall is not None:
            alpha["all"], ci["all"] = m.overall.alpha_iid, m.overall.alpha_iid_ci
        evals.append(EvalPoint(step=step, alpha=alpha, alpha_ci=ci))

    stats = train_loop(
        model,
        (cfg.work / "data", captured),
        s,
        cfg.work / "checkpoint",
        resume=resume,
        on_step=on_step,
        on_eval=on_eval,
    )
    return _training_stats(cfg, stats), evals


def _training_stats(cfg: TrainHeadConfig, stats: list[StepStats]) -> TrainingStats:
    seconds = sum(st.seconds for st in stats)
    tokens = sum(st.tokens for st in stats)
    last = stats[-_LAST:]
    return TrainingStats(
        steps=cfg.steps,
        steps_run=len(stats),
        ttt_steps=cfg.ttt_steps,
        tokens_per_step=cfg.tokens_per_step,
        seconds=seconds,
        tokens=tokens,
        tokens_per_s=tokens / seconds if seconds > 0 else None,
        loss_first=stats[0].loss if stats else None,
        loss_last=sum(st.loss for st in last) / len(last) if last else None,
        agreement=[sum(st.agreement[j] for st in last) / len(last) for j in range(cfg.ttt_steps)]
        if last
        else [],
    )


def _gpu_commands(
    cfg: TrainHeadConfig, data: _Data, captured: list[Captured], model: Any, target_path: str
) -> list[str]:
    """The data and the start head in ``speculators``' formats; the commands that train on them."""
    import numpy as np

    from alphagate.train.head import save_head
    from alphagate.train.speculators import speculators_argv, write_dataset

    tokens = [np.concatenate([e.prompt, e.output]).tolist() for _, e in data.train]
    write_dataset(cfg.work / "data", captured, tokens)
    start = cfg.work / "start"
    save_head(model, start)
    argv = speculators_argv(cfg, cfg.target, cfg.work / "data", start, captured)
    return [shlex.join(a) for a in argv]


def _classes(reqs: list[LoggedRequest]) -> list[str]:
    return sorted({r.cls for r in reqs if r.cls is not None})
