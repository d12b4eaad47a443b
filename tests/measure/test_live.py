"""``alphagate measure live`` against twins on 127.0.0.1: acceptance within its interval of the
configured α, replicas summed, restarts survived, and every way a source can be wrong."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from aiohttp import web

from alphagate import theory
from alphagate.core.traffic import TrafficClass
from alphagate.measure.live import LiveConfig, measure_live
from alphagate.measure.results import MeasureError
from alphagate.specs import DeploymentConfig, WorkloadConfig
from alphagate.twin.background import serve_in_thread
from alphagate.twin.config import TwinConfig
from tests.conftest import Cli
from tests.servers import serve, traffic, twin

ALPHA, K = 0.6, 3
CFG = TwinConfig(
    deployment=DeploymentConfig(model="llama-3.1-8b", weight_dtype="bf16"),
    workload=WorkloadConfig(classes=(TrafficClass(name="a", share=1.0, alpha=ALPHA),)),
    k=K,
    time_scale=0.0,
)


def test_live_acceptance_matches_the_configured_alpha() -> None:
    with twin(CFG) as (url, _), traffic(url):
        m = measure_live(LiveConfig(urls=(url,), min_drafts=3000, interval_s=0.2))
    e = m.overall
    assert e is not None and e.num_drafts >= 3000 and e.k == K
    rho = float(theory.draft_acceptance_rate(ALPHA, K))
    ci = e.draft_acceptance_rate_ci
    assert (ci is not None and ci.low <= rho <= ci.high) or abs(
        e.draft_acceptance_rate - rho
    ) < 0.03  # type: ignore[operator]
    assert e.alpha_by_pos_ci[0] is not None
    assert abs((e.alpha_by_pos[0] or 0) - ALPHA) < 0.05


def test_replicas_are_summed_and_a_restart_survived() -> None:
    with twin(CFG) as (u1, e1), twin(CFG.model_copy(update={"engine_index": 1})) as (u2, _):
        seen = []
        with traffic(u1, concurrency=2), traffic(u2, concurrency=2):

            def on_update(r):  # type: ignore[no-untyped-def]
                seen.append(r)
                if len(seen) == 3:  # counters have grown for three intervals: a restart drops them
                    e1.reset_metrics()  # replica 1 restarts inside the window
                return len(seen) >= 6  # counted by scrapes, not by the clock of a loaded machine

            # the duration is only a backstop; the watch ends after six scrapes
            cfg = LiveConfig(urls=(u1, u2), min_drafts=10**9, duration_s=300.0, interval_s=0.3)
            m = measure_live(cfg, on_update)
    assert len(seen) == 6
    assert m.sources == 2 and m.counter_reset
    e = m.overall
    assert e is not None and e.num_drafts > 0
    assert e.draft_acceptance_rate is not None and 0.0 < e.draft_acceptance_rate < 1.0


def _html_app() -> web.Application:
    async def page(request: web.Request) -> web.Response:
        return web.Response(
            text="<html><body>{not prometheus</body></html>", content_type="text/html"
        )

    app = web.Application()
    app.router.add_get("/metrics", page)
    return app


def test_bad_sources_are_clear_errors(cli: Cli, tmp_path: Path) -> None:
    with pytest.raises(MeasureError, match="cannot reach"):
        measure_live(LiveConfig(urls=("http://127.0.0.1:9",), interval_s=0.1))
    with serve(_html_app()) as url, pytest.raises(MeasureError, match="not return Prometheus"):
        measure_live(LiveConfig(urls=(url,), interval_s=0.1))
    with twin(CFG.model_copy(update={"k": 0})) as (url, _):
        r = cli.run("measure", "live", "--url", url, "--interval", "0.1")
    assert r.exit_code == 2 and "speculation is off" in r.output and "Traceback" not in r.output
    with twin(CFG) as (url, _):
        r = cli.run(
            "measure", "live", "--url", url, "--model-name", "llama-70b", "--interval", "0.1"
        )
    assert r.exit_code == 2 and "alphagate-twin" in r.output  # names the model_name values on offer
    r = cli.run("measure", "live", "--url", "notaurl")
    assert r.exit_code == 2 and "--url" in r.output


def test_not_enough_drafts_yet_is_exit_3(cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "m.json"
    with twin(CFG) as (url, _):  # no traffic: nothing is drafted
        r = cli.run(
            "measure",
            "live",
            "--url",
            url,
            "--duration",
            "0.5",
            "--interval",
            "0.1",
            "--out",
            str(out),
            "--json",
        )
    assert r.exit_code == 3, r.output
    assert "not enough evidence" in r.stderr
    assert out.exists()  # the (empty) window is still written


def test_cli_writes_what_plan_and_gate_read(cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "live.json"
    with twin(CFG) as (url, _), traffic(url):
        d = cli.json(
            "measure",
            "live",
            "--url",
            url,
            "--min-drafts",
            "2500",
            "--interval",
            "0.2",
            "--out",
            str(out),
        )
    assert d["verb"] == "measure live" and d["overall"]["num_drafts"] >= 2500
    plan = cli.json(
        "plan",
        "--class",
        "chat:1",
        "--concurrency",
        "16",
        "--model",
        "llama-3.1-8b",
        "--alpha-from",
        str(out),
        "--alpha-overall",
    )
    assert plan["classes"][0]["alpha_source"] == "measured"
    assert abs(plan["classes"][0]["alpha"] - ALPHA) < 0.06


def test_a_sliding_window_sees_a_late_drop() -> None:
    """Watching a canary, the gate judges the last --window of scrapes: after the traffic moves
    from α 0.8 to α 0.2, the window's α is the new one while everything-since-start is a blend."""
    import asyncio
    import time

    from alphagate.measure.live import LiveWindow

    cfg = CFG.model_copy(
        update={
            "workload": WorkloadConfig(
                classes=(
                    TrafficClass(name="chat", share=0.5, alpha=0.8),
                    TrafficClass(name="code", share=0.5, alpha=0.2),
                )
            )
        }
    )
    with twin(cfg) as (url, _):
        win = LiveWindow(LiveConfig(urls=(url,), interval_s=0.2))
        asyncio.run(win.scrape())
        for cls in ("chat", "code"):
            with traffic(url, cls=cls):
                for _ in range(8):
                    time.sleep(0.25)
                    asyncio.run(win.scrape())
    recent = win.result(window_s=1.0).overall
    whole = win.result().overall
    assert recent is not None and whole is not None
    assert recent.alpha_iid == pytest.approx(0.2, abs=0.05)
    assert 0.3 < (whole.alpha_iid or 0) < 0.75
    assert whole.interval_basis.endswith("batches (cluster-robust)")  # one batch per scrape


def test_one_replica_under_two_names_is_refused(cli: Cli, tmp_path: Path) -> None:
    """``127.0.0.1:P`` and ``localhost:P`` (or ``…/metrics/``) are one server: the host is
    resolved, and address, port and path compared, so its drafts are not counted twice."""
    with twin(CFG) as (url, _):
        port = url.rsplit(":", 1)[1]
        for other in (f"http://localhost:{port}", f"{url}/metrics/", f"{url}/"):
            with pytest.raises(MeasureError, match="given twice"):
                measure_live(LiveConfig(urls=(url, other), interval_s=0.1))
        r = cli.run("measure", "live", "--url", url, "--url", f"http://localhost:{port}",
                    "--interval", "0.1", "--out", str(tmp_path / "m.json"))  # fmt: skip
    assert r.exit_code == 2 and "given twice" in r.output and "Traceback" not in r.output
    assert not (tmp_path / "m.json").exists()


def _binary_app() -> web.Application:
    async def page(request: web.Request) -> web.Response:
        return web.Response(body=b"\x89PNG\r\n\x1a\n\xff\xfe\x00binary", content_type="image/png")

    app = web.Application()
    app.router.add_get("/metrics", page)
    return app


def test_a_binary_metrics_body_is_a_clear_error(cli: Cli) -> None:
    with serve(_binary_app()) as url:
        for verb in (["measure", "live", "--url", url, "--interval", "0.1"],
                     ["gate", "--url", url, "--min-alpha", "0.5", "--window", "2s"]):  # fmt: skip
            r = cli.run(*verb)
            assert r.exit_code == 2, (verb, r.output)
            assert isinstance(r.exception, SystemExit)  # no traceback
            assert "not UTF-8 text" in r.output


def test_ctrl_c_before_the_first_scrape_is_exit_130_without_a_traceback(tmp_path: Path) -> None:
    """Interrupted while the first scrape waits on a server that has not answered, there is no
    window to keep: exit 130 and a clear message, no traceback, no file."""
    import signal
    import subprocess
    import sys
    import threading

    asked = threading.Event()

    async def slow(request: web.Request) -> web.Response:
        asked.set()
        await asyncio.sleep(30)
        return web.Response(text="")

    app = web.Application()
    app.router.add_get("/metrics", slow)
    out = tmp_path / "m.json"
    with serve_in_thread(app, handler_cancellation=True) as url:
        proc = subprocess.Popen(
            [sys.executable, "-m", "alphagate", "measure", "live", "--url", url,
             "--out", str(out)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert asked.wait(60), "the scrape never arrived"
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and "before the first scrapes completed" in stderr
    assert not out.exists()
