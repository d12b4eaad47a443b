"""A disk that fills while the hidden states are captured, for real (a small tmpfs, as root):
exit 2 saying so, every file on disk whole and nothing half-written, and ``--resume`` on a disk
with room captures only what is missing."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.cli.test_full_disk import tmpfs
from tests.conftest import Cli
from tests.train.synthetic import Synthetic, code_class

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")


def test_a_capture_that_fills_the_disk_is_resumed_where_it_stopped(
    synthetic: Synthetic, tmp_path: Path
) -> None:
    args = [
        *code_class(synthetic),
        "--steps",
        "1",
    ]
    with tmpfs(tmp_path / "disk", "1m") as disk:
        out = disk / "head"
        r = Cli().run(*args, "--out", str(out))
        text = " ".join(r.output.split())
        assert r.exit_code == 2, text
        assert "the disk is full after capturing" in text and "run again with --resume" in text
        kept = int(text.split("after capturing ")[1].split()[0])
        assert 0 < kept < 51
        hidden = out / ".train" / "data" / "hidden_states"
        files = sorted(p.name for p in hidden.iterdir())
        assert files == sorted(f"hs_{i}.safetensors" for i in range(kept))  # no partial file
        subprocess.run(["mount", "-o", "remount,size=32m", str(disk)], check=True)
        r = Cli().run(*args, "--out", str(out), "--resume", "--json")
        assert r.exit_code == 0, r.output
        capture = json.loads(r.stdout)["capture"]
        assert capture["captured_here"] == capture["requests"] - kept
