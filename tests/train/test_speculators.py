"""``train-head --backend speculators``: the commands for a GPU machine, as ``speculators``' own
parser reads them, and the data they point at, as ``speculators``' own dataset reads it — each
sample the request's tokens, its output tokens as the loss mask, and the target's hidden states
recomputed here independently."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import numpy as np
import pytest

from alphagate.measure.offline.requests import read_logs
from alphagate.train.split import class_requests, split_requests
from tests.conftest import Cli
from tests.train.synthetic import LAYERS, Synthetic, code_class

torch = pytest.importorskip("torch")


def test_the_gpu_commands_and_their_data_are_what_speculators_reads(
    synthetic: Synthetic, tmp_path: Path
) -> None:
    out = tmp_path / "head"
    r = Cli().run(
        *code_class(synthetic),
        "--out",
        str(out),
        "--steps",
        "7",
        "--lr",
        "0.002",
        "--backend",
        "speculators",
    )
    assert r.exit_code == 0, r.output
    result = json.loads((out / "train.json").read_text())
    train_cmd, measure_cmd = (shlex.split(c) for c in result["commands"])
    for c in result["commands"]:
        assert c in r.output  # printed whole, as they run
    assert (
        not (out / "alpha.json").exists() and result["after"] is None and result["training"] is None
    )

    from speculators.train.config import TrainConfig

    assert train_cmd[:2] == ["speculators", "train"]
    cfg = TrainConfig.resolve(train_cmd[2:])
    data, start = out / ".train" / "data", out / ".train" / "start"
    assert (cfg.verifier.verifier_name_or_path, cfg.draft.from_pretrained) == (
        str(synthetic.target),
        str(start),
    )
    assert (cfg.data.data_path, cfg.generation.on_missing) == (str(data), "raise")
    assert (cfg.optimizer.optimizer, cfg.optimizer.lr, cfg.trainer.max_steps) == ("adamw", 0.002, 7)
    assert (cfg.loss.loss_fn, cfg.loss.ttt_steps, cfg.data.total_seq_len) == ("kl_div", 3, 1024)
    head = Path(result["head"])
    assert head.parent == Path(cfg.trainer.save_path)
    assert measure_cmd[:3] == ["alphagate", "measure", "offline"]
    assert measure_cmd[measure_cmd.index("--drafter") + 1] == f"eagle3:{head}"
    assert measure_cmd[measure_cmd.index("--log") + 1] == result["held_out_log"]

    _check_dataset(synthetic, data)
    # the start head loads as --from-pretrained loads it
    from speculators.models.eagle3 import Eagle3DraftModel

    model = Eagle3DraftModel.from_pretrained(str(start))
    assert model.config.eagle_aux_hidden_state_layer_ids == [1, 2, 3]


def _check_dataset(s: Synthetic, data: Path) -> None:
    from speculators.train.data import ArrowDataset

    from alphagate.measure.offline.models import CausalLM

    ds = ArrowDataset(
        max_len=4096, datapath=str(data), on_missing="raise", hidden_states_dtype=torch.float32
    )
    reqs = class_requests(read_logs([s.log], class_field="cls").requests, "code", "")
    train = split_requests(reqs, 0.2, seed=0).train
    assert len(ds) == len(train)
    lm = CausalLM(str(s.target), "--target", "cpu", torch.float32)
    for i in (0, len(train) // 2, len(train) - 1):
        r, got = train[i], ds[i]
        prompt, output = list(r.prompt_token_ids or ()), list(r.output_token_ids or ())
        assert got["input_ids"].tolist() == prompt + output
        assert got["loss_mask"].tolist() == [0] * len(prompt) + [1] * len(output)
        _, aux, _ = lm.hidden(np.asarray(prompt + output), aux_ids=(1, 2, 3, LAYERS))
        assert aux is not None
        h = aux.shape[1] // 4
        torch.testing.assert_close(got["hidden_states"], aux[:, : 3 * h])
        torch.testing.assert_close(got["verifier_last_hidden_states"], aux[:, 3 * h :])
