"""``alphagate train-head`` as a user runs it: the head and the files ``plan --alpha-from`` and
``gate --measure`` read, the training's figures labelled as what they are, and every bad input
refused with exit 2 and a message naming its flag or file."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import Cli
from tests.train.synthetic import Synthetic, tokenizer, write_log

#: every test reads the synthetic target and log (seconds of torch and speculators imports and a
#: model build), and three train a head: ~25 s of CPU, run by ``make test``
pytestmark = pytest.mark.slow


def _run(s: Synthetic, out: Path, *extra: str, json_out: bool = False) -> object:
    args = [
        "train-head",
        "--log",
        str(s.log),
        "--class-field",
        "cls",
        "--target",
        str(s.target),
        "--out",
        str(out),
        "--steps",
        "2",
        *extra,
    ]
    cli = Cli()
    return cli.json(*args) if json_out else cli.run(*args)


def test_the_files_it_writes_are_what_plan_and_gate_read(
    synthetic: Synthetic, tmp_path: Path
) -> None:
    from tests.train.test_head import _vllm_head

    init = _vllm_head(synthetic.target, tmp_path / "general")
    out = tmp_path / "code-head"
    r = _run(synthetic, out, "--class", "code", "--init", str(init))
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "teacher-forced top-1 agreement on the train split" in text
    assert "(a training figure, not α)" in text
    assert "held-out requests (measure offline, K=3)" in text
    result = json.loads((out / "train.json").read_text())
    assert result["verb"] == "train-head" and result["start"] == str(init)
    gain = result["gains"][0]
    assert gain["name"] == "code" and gain["alpha_start"] is not None
    # alpha.json: the new head on the held-out requests, as measure offline writes it
    after = json.loads((out / "alpha.json").read_text())
    assert after["verb"] == "measure offline" and after == result["after"]
    assert after["classes"]["code"]["alpha_iid"] == pytest.approx(gain["alpha"])
    assert json.loads((out / "alpha-start.json").read_text()) == result["before"]
    plan = Cli().json(
        "plan",
        "--model",
        "llama-3.1-8b",
        "--class",
        "code:1",
        "-c",
        "8",
        "--alpha-from",
        str(out / "alpha.json"),
    )
    code = plan["classes"][0]
    assert code["alpha"] == pytest.approx(gain["alpha"]) and "measured" in code["alpha_source"]
    # --json prints the same record
    again = _run(synthetic, tmp_path / "again", "--class", "code", json_out=True)
    assert again["verb"] == "train-head" and again["after"]["verb"] == "measure offline"  # type: ignore[index]


def _refused(r: object, *needles: str) -> None:
    out = " ".join(r.output.split())  # type: ignore[attr-defined]
    assert r.exit_code == 2, out  # type: ignore[attr-defined]
    assert "Traceback" not in out
    for n in needles:
        assert n in out, out


def test_a_class_with_no_requests_is_refused_naming_the_classes(
    synthetic: Synthetic, tmp_path: Path
) -> None:
    r = _run(synthetic, tmp_path / "h", "--class", "chat")
    _refused(r, "--class chat: no request of this class", "its classes: code (64), prose (24)")


def test_too_few_tokens_to_train_or_hold_out_say_how_many(
    synthetic: Synthetic, tmp_path: Path
) -> None:
    _refused(_run(synthetic, tmp_path / "a", "--class", "prose"), "training needs at least 1,024")
    r = _run(synthetic, tmp_path / "b", "--class", "code", "--held-out", "0.05")
    _refused(r, "--held-out", "needs at least 8 requests and 256 output tokens")


def test_a_log_tokenized_by_another_tokenizer_is_refused(
    synthetic: Synthetic, tmp_path: Path
) -> None:
    mine = tokenizer(tmp_path / "mine")
    # another tokenizer of the same size: the same pieces under other ids
    log = write_log(
        tmp_path / "log.jsonl", synthetic.target, mine, vocab_of=lambda t: (t * 7 + 3) % 300
    )
    s = Synthetic(synthetic.target, log)
    _refused(_run(s, tmp_path / "h"), "--log: the token ids of", "do not round-trip", "log.jsonl:1")


def test_a_starting_head_of_another_width_is_refused_naming_init(
    synthetic: Synthetic, tmp_path: Path
) -> None:
    from tests.train.synthetic import target
    from tests.train.test_head import _vllm_head

    wide = tmp_path / "wide"
    target(wide, len(tokenizer(wide)), hidden=48)  # type: ignore[arg-type]
    init = _vllm_head(wide, tmp_path / "wide-head")
    r = _run(synthetic, tmp_path / "h", "--class", "code", "--init", str(init))
    _refused(r, "--init: hidden_size 48 ≠ the target's hidden_size 32")


def test_resuming_with_other_flags_or_without_resume_is_refused(
    synthetic: Synthetic, tmp_path: Path
) -> None:
    out = tmp_path / "h"
    assert _run(synthetic, out, "--class", "code").exit_code == 0
    _refused(
        _run(synthetic, out, "--class", "code"), "holds a train-head run already", "add --resume"
    )
    r = _run(synthetic, out, "--class", "code", "--resume", "--lr", "0.002")
    _refused(r, "--lr: the run in", "was started with 0.001, this one gives 0.002")
    r = _run(synthetic, out, "--resume", "--class", "prose")
    _refused(r, "--class: the run in", "started with code, this one gives prose")
    _refused(_run(synthetic, tmp_path / "none", "--resume"), "--resume:", "holds no train-head run")
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    _refused(_run(synthetic, busy), "--out", "not an empty folder")


def test_without_speculators_it_says_how_to_install_it(
    synthetic: Synthetic, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "speculators.models.eagle3", None)  # import fails
    r = _run(synthetic, tmp_path / "h", "--class", "code")
    _refused(
        r,
        "train-head needs the speculators library",
        'pip install "datasets>=4,<=5.1" "openai>=2" "loguru>=0.7.2,<=0.7.3" '
        '"pydantic-settings>=2" && pip install --no-deps "speculators==0.9.0" '
        '"hs-connectors==0.9.0"',
    )


def test_ctrl_c_names_the_checkpoint_kept_and_the_command_that_resumes(
    synthetic: Synthetic, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from alphagate.cli import _app
    from alphagate.train import run as train_run

    out = tmp_path / "h"
    cut = ["--log", str(synthetic.log), "--class-field", "cls", "--class", "code"]

    def ctrl_c(tick: train_run.Tick) -> None:
        if tick.phase == "train" and tick.done == 3:
            raise KeyboardInterrupt

    args = [
        "train-head",
        *cut,
        "--target",
        str(synthetic.target),
        "--out",
        str(out),
        "--steps",
        "4",
        "--checkpoint-every",
        "2",
    ]
    original = train_run.train_head
    monkeypatch.setattr(
        train_run, "train_head", lambda cfg, **kw: original(cfg, on_progress=ctrl_c)
    )
    monkeypatch.setattr(_app, "COMMAND_LINE", args)
    r = Cli().run(*args)
    text = " ".join(r.output.split())
    assert r.exit_code == 130, text
    assert f"the checkpoint of step 2 is kept in {out / '.train' / 'checkpoint'}" in text
    assert f"continue with: alphagate {' '.join(args)} --resume" in text
    monkeypatch.setattr(train_run, "train_head", original)
    r = Cli().run(*args, "--resume")
    assert r.exit_code == 0, r.output
    assert "(2 resumed)" in " ".join(r.output.split())
