"""``train-head --backend speculators --run`` runs the printed ``speculators train`` command as
printed — here a stand-in on PATH that records its arguments and writes the head a trainer would
(the start head: a GPU run is not possible on this machine) — then measures that head on the
held-out requests and writes what ``plan --alpha-from`` reads."""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

import pytest

from tests.conftest import Cli
from tests.train.synthetic import Synthetic, code_class

STAND_IN = """#!{python}
import json, shutil, sys
args = sys.argv[1:]
json.dump(args, open({record!r}, "w"))
start = args[args.index("--from-pretrained") + 1]
save = args[args.index("--save-path") + 1]
epochs = int(args[args.index("--epochs") + 1])
shutil.copytree(start, f"{{save}}/{{epochs - 1}}")
"""


def test_run_executes_the_printed_command_then_measures_its_head(
    synthetic: Synthetic, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = tmp_path / "argv.json"
    exe = bin_dir / "speculators"
    exe.write_text(STAND_IN.format(python=sys.executable, record=str(record)))
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    out = tmp_path / "head"
    from tests.train.test_head import _vllm_head

    init = _vllm_head(synthetic.target, tmp_path / "general")
    r = Cli().run(
        *code_class(synthetic),
        "--init",
        str(init),
        "--out",
        str(out),
        "--steps",
        "3",
        "--backend",
        "speculators",
        "--run",
    )
    assert r.exit_code == 0, r.output
    result = json.loads((out / "train.json").read_text())
    assert ["speculators", *json.loads(record.read_text())] == shlex.split(result["commands"][0])
    after = json.loads((out / "alpha.json").read_text())
    assert after["verb"] == "measure offline" and after == result["after"]
    # the head measured is the one the command wrote; the stand-in wrote back the start head,
    # so it drafts as the start head did, to the last count
    assert after["offline"]["drafter"] == f"eagle3 {result['head']}"
    assert after["classes"] == result["before"]["classes"]
    assert after["classes"]["code"]["num_drafts"] > 0


def test_a_failed_speculators_run_says_so(
    synthetic: Synthetic, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "speculators"
    exe.write_text(f"#!{sys.executable}\nimport sys\nsys.exit(3)\n")
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    r = Cli().run(
        *code_class(synthetic),
        "--out",
        str(tmp_path / "h"),
        "--backend",
        "speculators",
        "--run",
    )
    assert r.exit_code == 1, r.output
    assert "speculators train exited 3" in " ".join(r.output.split())
