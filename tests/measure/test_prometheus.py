"""``alphagate measure prometheus`` and ``gate --prometheus`` over a real Prometheus server
(Debian's ``prometheus``) scraping two twins on 127.0.0.1 every second.

Traffic shifts from a class with α = 0.8 to one with α = 0.2 mid-run: the series shows the drop,
each replica has its own figure, a restart inside the window is flagged, a replica that goes away
leaves gaps that are reported, and a selector that matches nothing is a clear error.
"""

from __future__ import annotations

import json
import time
from contextlib import ExitStack
from pathlib import Path

import pytest

from alphagate import theory
from alphagate.core.traffic import TrafficClass
from alphagate.specs import DeploymentConfig, WorkloadConfig
from alphagate.twin.config import TwinConfig
from tests.conftest import Cli
from tests.servers import prometheus, prometheus_query, traffic, twin

#: wall-clock behaviour: `make test` runs these alone (see the Makefile)
pytestmark = pytest.mark.timing

K = 3
HIGH, LOW = 0.8, 0.2
CFG = TwinConfig(
    deployment=DeploymentConfig(model="llama-3.1-8b", weight_dtype="bf16"),
    workload=WorkloadConfig(
        classes=(
            TrafficClass(name="chat", share=0.5, alpha=HIGH),
            TrafficClass(name="code", share=0.5, alpha=LOW),
        )
    ),
    k=K,
    time_scale=0.0,
)
SELECTOR = '{model_name="alphagate-twin"}'
PHASE_S = 6.0


def _scrapes_since(prom: str, since: float, n_targets: int, need: int) -> None:
    """Wait until Prometheus holds ``need`` samples per target after ``since``."""
    deadline = time.monotonic() + 60
    window = max(2, round(time.time() - since))
    while time.monotonic() < deadline:
        rows = prometheus_query(
            prom, f"count_over_time(vllm:spec_decode_num_drafts_total{SELECTOR}[{window}s])"
        )
        counts = [int(float(r["value"][1])) for r in rows]  # type: ignore[index]
        if len(counts) >= n_targets and min(counts) >= need:
            return
        time.sleep(0.5)
        window = max(2, round(time.time() - since))
    raise AssertionError("Prometheus did not collect the samples in time")


@pytest.mark.slow
def test_measure_prometheus_over_a_real_server(cli: Cli, tmp_path: Path) -> None:
    rho_hi = float(theory.draft_acceptance_rate(HIGH, K))
    rho_lo = float(theory.draft_acceptance_rate(LOW, K))
    with ExitStack() as stack:
        u1, e1 = stack.enter_context(twin(CFG))
        twin2 = ExitStack()
        u2, _ = twin2.enter_context(twin(CFG.model_copy(update={"engine_index": 1})))
        prom = stack.enter_context(prometheus([u1, u2], tmp_path))
        t0 = time.time()
        with traffic(u1, cls="chat"), traffic(u2, cls="chat"):
            _scrapes_since(prom, t0, 2, 3)
            time.sleep(PHASE_S)
        with traffic(u1, cls="code"), traffic(u2, cls="code"):
            time.sleep(PHASE_S / 2)
            e1.reset_metrics()  # replica 1 restarts while the low-α traffic runs
            time.sleep(PHASE_S / 2)
        window = round(time.time() - t0) + 1
        args = ["measure", "prometheus", "--url", prom, "--selector", SELECTOR]
        d = cli.json(*args, "--window", f"{window}s", "--step", "3s", "--by", "instance")
        text = cli.run(*args, "--window", f"{window}s")

        # α over time: the shift from the α = 0.8 class to the α = 0.2 class is visible
        # steps with a few hundred drafts at least (the edges of the traffic leave a handful)
        series = [p for p in d["series"] if p["num_drafts"] > 300 and p["instance"] == u2[7:]]
        assert len(series) >= 4
        assert series[1]["draft_acceptance_rate"] == pytest.approx(rho_hi, abs=0.06)
        assert series[-1]["draft_acceptance_rate"] == pytest.approx(rho_lo, abs=0.06)
        overall = d["overall"]["draft_acceptance_rate"]
        assert rho_lo + 0.05 < overall < rho_hi - 0.05
        assert d["overall"]["k"] == K and d["counter_reset"] is True
        assert set(d["replicas"]) == {u1[7:], u2[7:]}
        assert all(r["num_drafts"] > 0 for r in d["replicas"].values())
        # the PromQL used is printed
        assert text.exit_code == 0, text.output
        assert "increase(vllm:spec_decode_num_drafts_total" in text.output
        assert "PromQL" in text.output

        # every step of a window inside the traffic has data: no gap is reported. Each step
        # covers five scrape intervals, so one scrape that a loaded 2-core machine lets time out
        # (the twins and their traffic share this process) does not empty a step
        inner = round(time.time() - t0) - 4
        d2 = cli.json(*args, "--window", f"{inner}s", "--step", "5s", "--by", "instance")
        scrapes = {
            q: prometheus_query(prom, f"{q}_over_time({m}[{inner}s])")
            for q, m in (("min", "up"), ("max", "scrape_duration_seconds"))
        }
        assert not any("gaps" in n for n in d2["notes"]), (d2["notes"], scrapes)
        # a window shorter than two scrapes holds no increase: say so, exit 3
        r = cli.run(*args, "--window", "1s")
        assert r.exit_code == 3 and "fewer than two samples" in r.output, r.output

        # the gate over the last window (α = 0.2 traffic only)
        gate = ["gate", "--prometheus", prom, "--selector", SELECTOR, "--window", "4s"]
        r = cli.run(*gate, "--min-alpha", "0.5", "--min-drafts", "200")
        assert r.exit_code == 1, r.output
        r = cli.run(*gate, "--min-alpha", "0.1", "--min-drafts", "200")
        assert r.exit_code == 0, r.output

        # replica 2 goes away: its steps after that are gaps, and the output says so
        twin2.close()
        with traffic(u1, cls="chat"):
            time.sleep(6)
        window = round(time.time() - t0) + 1
        d = cli.json(*args, "--window", f"{window}s", "--step", "3s", "--by", "instance")
        assert any("gaps" in n for n in d["notes"])

        # a selector that matches nothing names what is there; an idle window is exit 3
        r = cli.run("measure", "prometheus", "--url", prom, "--selector", '{model_name="x"}')
        assert r.exit_code == 2 and "alphagate-twin" in r.output
        time.sleep(4)
        r = cli.run(*args, "--window", "3s")
        assert r.exit_code == 3 and "no drafts" in r.output
        # a URL that is not Prometheus
        r = cli.run("measure", "prometheus", "--url", u1, "--window", "1m")
        assert r.exit_code == 2 and "Traceback" not in r.output
    out = json.dumps(d)
    assert "alphagate.results/v1" in out
