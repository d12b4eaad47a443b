"""``alphagate twin --background``: returns once the child listens, prints how to reach and stop
it, and says why when the child cannot start."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

from tests.servers import free_port


def _twin(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "alphagate", "twin", *args, "--background"],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=180,
    )  # fmt: skip


def test_background_twin_serves_until_killed(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "twin.log"
    r = _twin("--port", str(port), "--log-file", str(log), cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    m = re.search(r"listening on (http://\S+) \(pid (\d+), log (.+?)\); stop it with: kill (\d+)",
                  r.stdout)  # fmt: skip
    assert m, r.stdout
    url, pid = m.group(1), int(m.group(2))
    assert url == f"http://127.0.0.1:{port}" and m.group(4) == str(pid)
    assert Path(m.group(3)) == log
    try:
        with urllib.request.urlopen(f"{url}/v1/models", timeout=10) as resp:
            assert json.loads(resp.read())["data"][0]["id"] == "alphagate-twin"
    finally:
        os.kill(pid, signal.SIGTERM)
    assert "alphagate twin:" in log.read_text()


def test_a_twin_that_cannot_start_says_why(tmp_path: Path) -> None:
    port = free_port()
    first = _twin("--port", str(port), cwd=tmp_path)
    pid = int(re.search(r"kill (\d+)", first.stdout).group(1))  # type: ignore[union-attr]
    try:
        r = _twin("--port", str(port), cwd=tmp_path)
        assert r.returncode == 2
        assert "exited with code 2 before listening" in r.stderr
        assert "Address already in use" in r.stderr
    finally:
        os.kill(pid, signal.SIGTERM)
