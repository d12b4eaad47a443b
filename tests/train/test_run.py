"""A whole ``train-head`` run on a synthetic target: the requests split by request and the head
judged on those it never saw, the head written where vLLM loads it, and a run stopped by Ctrl-C
resumed from its last checkpoint to the same head an uninterrupted run trains."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from alphagate.measure.offline.requests import read_logs
from alphagate.train.config import TrainHeadConfig
from tests.train.synthetic import CODE, Synthetic

torch = pytest.importorskip("torch")


def _cfg(s: Synthetic, out: Path, **kw: Any) -> TrainHeadConfig:
    base = dict(
        logs=(s.log,),
        class_field="cls",
        only_class="code",
        target=str(s.target),
        out=out,
        steps=4,
        tokens_per_step=256,
        checkpoint_every=2,
    )
    return TrainHeadConfig(**(base | kw))  # type: ignore[arg-type]


def _hs_sequences(out: Path) -> set[tuple[int, ...]]:
    from safetensors.torch import load_file

    files = sorted((out / ".train" / "data" / "hidden_states").glob("hs_*.safetensors"))
    return {tuple(load_file(str(f))["token_ids"].tolist()) for f in files}


def test_a_run_trains_on_one_part_and_measures_the_head_on_the_other(
    synthetic: Synthetic, tmp_path: Path
) -> None:
    from alphagate.measure.offline.eagle3 import Eagle3Head
    from alphagate.measure.offline.models import CausalLM
    from alphagate.train.run import train_head

    cfg = _cfg(synthetic, tmp_path / "head", eval_every=2)
    r = train_head(cfg)
    # every code request is in exactly one part; the held-out ones are measured, as logged
    held = read_logs([cfg.held_out_log], class_field="cls").requests
    assert {x.cls for x in held} == {"code"}
    assert r.requests_train + r.requests_held_out == CODE - sum(r.skipped.values())
    assert len(held) == r.requests_held_out == round(0.2 * (r.requests_train + len(held)))
    run = json.loads((cfg.out / "run.json").read_text())
    logged = synthetic.log.read_text().splitlines()
    lines = [logged[int(w.split(":")[1]) - 1] for w in run["held_out"]]
    assert cfg.held_out_log.read_text().splitlines() == lines
    seqs = {tuple(x.prompt_token_ids or ()) + tuple(x.output_token_ids or ()) for x in held}
    captured = _hs_sequences(cfg.out)
    assert len(captured) == r.requests_train and captured.isdisjoint(seqs)
    assert r.after is not None and r.after.source == str(cfg.held_out_log)
    assert set(r.after.classes) == {"code"} and r.after.classes["code"].num_drafts > 0
    assert r.before is None and r.gains[0].alpha_start is None  # a new head: nothing before
    # the measurements at --eval-every steps; the last is the head written
    assert [e.step for e in r.evals] == [2, 4]
    assert r.evals[-1].alpha["code"] == pytest.approx(r.after.classes["code"].alpha_iid)
    # the training's own figures: the loss fell; agreement is a share, one per TTT step
    t = r.training
    assert t is not None and t.steps_run == 4 and t.loss_last < t.loss_first  # type: ignore[operator]
    assert len(t.agreement) == 3 and all(0.0 <= a <= 1.0 for a in t.agreement)
    # the head: speculators' format, read back as vLLM reads it
    lm = CausalLM(str(synthetic.target), "--target", "cpu", torch.float32)
    assert Eagle3Head(str(cfg.out), lm, "cpu", torch.float32).aux_ids == (1, 2, 3)


def _weights(folder: Path) -> dict[str, Any]:
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


def test_ctrl_c_keeps_the_last_checkpoint_and_resume_trains_the_same_head(
    synthetic: Synthetic, tmp_path: Path
) -> None:
    from alphagate.train.run import Tick, checkpoint_step, train_head

    whole = train_head(_cfg(synthetic, tmp_path / "whole", steps=6))
    cfg = _cfg(synthetic, tmp_path / "cut", steps=6)

    def ctrl_c(t: Tick) -> None:
        if t.phase == "train" and t.done == 5:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train_head(cfg, on_progress=ctrl_c)
    assert checkpoint_step(cfg) == 4  # the checkpoint of step 4 (every 2), whole
    assert not (cfg.out / "model.safetensors").exists()  # no head yet
    resumed = train_head(cfg.model_copy(update={"resume": True}))
    assert resumed.capture is not None and resumed.capture.captured_here == 0
    assert resumed.training is not None and resumed.training.steps_run == 2
    a, b = _weights(cfg.out), _weights(tmp_path / "whole")
    assert a.keys() == b.keys()
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=0, atol=1e-6, msg=name)
    assert resumed.after is not None and whole.after is not None
    assert resumed.after.classes["code"].num_accepted_tokens == pytest.approx(
        whole.after.classes["code"].num_accepted_tokens
    )
    np.testing.assert_equal(resumed.requests_held_out, whole.requests_held_out)
