"""A full or read-only disk, for real: a small tmpfs mounted and removed by each test (root only;
CI runs as root). Nothing that was complete is lost, and an old file survives a failed write."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from alphagate.specs import DeploymentConfig
from alphagate.twin.config import TwinConfig
from tests.conftest import Cli
from tests.servers import twin


@contextmanager
def tmpfs(path: Path, size: str, read_only: bool = False) -> Iterator[Path]:
    path.mkdir(parents=True, exist_ok=True)
    opts = f"size={size}" + (",ro" if read_only else "")
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(path)], capture_output=True
    )
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.decode().strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="mounting a tmpfs needs root (CI runs as root)"
)


def test_bench_on_a_disk_that_fills_loses_no_completed_record(cli: Cli, tmp_path: Path) -> None:
    cfg = TwinConfig(
        deployment=DeploymentConfig(model="llama-3.1-8b", weight_dtype="bf16"), k=2, time_scale=0.0
    )
    with tmpfs(tmp_path / "small", "24k") as disk, twin(cfg) as (url, _):
        out = disk / "run"
        r = cli.run(
            "bench",
            "--url",
            url,
            "-n",
            "400",
            "--concurrency",
            "4",
            "--dataset",
            "synthetic:in=8,out=64",
            "--out",
            str(out),
            "--json",
        )
        assert r.exit_code == 1, r.output
        assert "Traceback" not in r.output
        assert "cannot write the records file" in r.stderr
        assert "No space left on device" in r.stderr
        lines = (out / "requests.jsonl").read_bytes().split(b"\n")
        assert lines[-1] == b""  # the file ends with a whole line
        recs = [json.loads(x) for x in lines[:-1]]  # and every line is a whole record
        assert 5 <= len(recs) < 400
        assert all(x["output_tokens"] == 64 and x["error_type"] is None for x in recs)
        # the summary did not fit on the disk either: it is printed instead, marked as stopped
        printed = json.loads(r.stdout)
        assert printed["stop_reason"].startswith("cannot write the records file")
        assert printed["levels"][0]["overall"]["completed"] >= len(recs)


def test_an_old_plan_survives_a_failed_write(cli: Cli, tmp_path: Path) -> None:
    args = ["plan", "--class", "chat:1:0.7", "--concurrency", "8", "--model", "llama-3.1-8b"]
    with tmpfs(tmp_path / "tiny", "8k") as disk:
        plan = disk / "plan.md"
        plan.write_text("the previous plan\n")
        fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT)
        try:  # fill the disk to the last byte
            while os.write(fd, b"x" * 512):
                pass
        except OSError:
            pass
        finally:
            os.close(fd)
        r = cli.run(*args, "--out", str(plan))
        assert r.exit_code == 2 and "No space left on device" in r.output
        assert plan.read_text() == "the previous plan\n"
        assert sorted(p.name for p in disk.iterdir()) == ["filler", "plan.md"]  # no temp file left


def test_read_only_disk_is_refused_before_any_work(cli: Cli, tmp_path: Path) -> None:
    with tmpfs(tmp_path / "ro", "8k", read_only=True) as disk:
        r = cli.run(
            "plan", "--class", "chat:1:0.7", "--concurrency", "8", "--out", str(disk / "p.md")
        )
        assert r.exit_code == 2 and "cannot be written" in r.output
        r = cli.run("simulate", "--plot", str(disk / "plots"))
        assert r.exit_code == 2 and "--plot" in r.output
        r = cli.run("bench", "--url", "http://127.0.0.1:9", "--out", str(disk / "b"))
        assert r.exit_code == 2 and "--out" in r.output
