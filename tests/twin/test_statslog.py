"""``alphagate twin`` writes vLLM's ``SpecDecoding metrics`` line, and ``measure logs`` reading
it gets exactly the counts the twin's ``/metrics`` exports for the same traffic."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from alphagate.measure.logs import parse_log_line
from alphagate.measure.prom import parse_spec_counters
from tests.conftest import Cli
from tests.servers import free_port, traffic


def test_the_twins_log_lines_add_up_to_its_counters(cli: Cli, tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "twin.log"
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "alphagate", "twin", "--model", "llama-3.1-8b", "--dtype",
             "bf16", "--alpha", "0.6", "--k", "4", "--time-scale", "0", "--port", str(port),
             "--log-stats-interval", "0.5"],
            stdout=subprocess.DEVNULL, stderr=err,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    with urllib.request.urlopen(url + "/health", timeout=2):
                        break
                except OSError:
                    assert time.monotonic() < deadline and proc.poll() is None, log.read_text()
                    time.sleep(0.2)
            with traffic(url, concurrency=3):
                time.sleep(2.5)
            time.sleep(1.5)  # the last interval is logged
            with urllib.request.urlopen(url + "/metrics", timeout=5) as r:
                counters = parse_spec_counters(r.read().decode())
        finally:
            proc.terminate()
            proc.wait(30)
    lines = [x for x in log.read_text().splitlines() if "SpecDecoding metrics" in x]
    assert len(lines) >= 3
    assert all(parse_log_line(x) is not None for x in lines)
    d = cli.json("measure", "logs", str(log))
    o = d["overall"]
    assert o["k"] == 4
    assert o["num_draft_tokens"] == counters.draft_tokens > 0
    assert o["num_accepted_tokens"] == counters.accepted
    assert o["num_drafts"] == counters.drafts  # every draft proposes K tokens: exact
    for got, want in zip(
        o["accepted_per_pos"], [counters.per_pos[i] for i in range(4)], strict=True
    ):
        assert abs(got - want) <= 0.0005 * counters.drafts + 1e-9  # rates printed to 3 decimals
    assert json.dumps(d)
