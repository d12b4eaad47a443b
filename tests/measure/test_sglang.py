"""SGLang's acceptance surfaces, served on 127.0.0.1 in the shapes SGLang gives them: the
``sglang:spec_accept_length`` gauge (``python/sglang/srt/metrics/collector.py``),
``/get_server_info`` where metrics are off, logged ``/generate`` responses with ``meta_info``,
and the scheduler's ``Decode batch`` lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from aiohttp import web

from alphagate import theory
from alphagate.measure.live import GAUGE_SCRAPES
from tests.conftest import Cli
from tests.servers import serve

GAUGE = (
    "# HELP sglang:spec_accept_length The average acceptance length of speculative decoding.\n"
    "# TYPE sglang:spec_accept_length gauge\n"
    'sglang:spec_accept_length{{dp_rank="0",engine_type="unified",model_name="glm",tp_rank="0"}} {v}\n'
    "# HELP sglang:num_running_reqs The number of running requests.\n"
    "# TYPE sglang:num_running_reqs gauge\n"
    'sglang:num_running_reqs{{model_name="glm",tp_rank="0"}} 3.0\n'
)


def _gauge_app(values: list[float]) -> web.Application:
    seen = {"n": 0}

    async def metrics(request: web.Request) -> web.Response:
        v = values[min(seen["n"], len(values) - 1)]
        seen["n"] += 1
        return web.Response(text=GAUGE.format(v=v), content_type="text/plain")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    return app


def _no_metrics_app(tau: float | None) -> web.Application:
    async def metrics(request: web.Request) -> web.Response:
        return web.Response(text='sglang:num_running_reqs{model_name="glm"} 0.0\n')

    async def info(request: web.Request) -> web.Response:
        state = {"avg_spec_accept_length": tau} if tau is not None else {}
        return web.json_response({"internal_states": [state], "version": "0.5.5"})

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/get_server_info", info)
    return app


def test_live_averages_the_gauge_and_stops(cli: Cli) -> None:
    with serve(_gauge_app([2.0, 2.2, 2.4, 2.6, 2.8, 3.0])) as url:
        d = cli.json("measure", "live", "--url", url, "--interval", "0.05")
    o = d["overall"]
    # without counts there is nothing to wait for: the first GAUGE_SCRAPES values are averaged
    want = [2.0, 2.2, 2.4, 2.6, 2.8, 3.0][:GAUGE_SCRAPES]
    assert o["sglang_accept_length"] == pytest.approx(sum(want) / len(want))
    assert o["num_drafts"] == 0 and o["mean_acceptance_length_ci"] is None
    assert any("no counts" in n for n in d["notes"])


def test_live_falls_back_to_server_info(cli: Cli) -> None:
    with serve(_no_metrics_app(2.37)) as url:
        d = cli.json("measure", "live", "--url", url, "--interval", "0.05")
    assert d["overall"]["sglang_accept_length"] == pytest.approx(2.37)
    assert any("since the server started" in n for n in d["notes"])
    with serve(_no_metrics_app(None)) as url:  # speculation off: neither source has it
        r = cli.run("measure", "live", "--url", url, "--interval", "0.05")
    assert r.exit_code == 2 and "speculation is off" in r.output


def test_logged_generate_responses_give_counts(cli: Cli, tmp_path: Path) -> None:
    """τ = Σ completion_tokens ÷ Σ spec_verify_ct; with --k, ρ = (τ − 1) ÷ K and intervals."""
    rows = [(64, 25), (128, 52), (32, 13), (200, 81)]
    log = tmp_path / "responses.jsonl"
    log.write_text(
        "\n".join(
            json.dumps(
                {
                    "text": "…",
                    "meta_info": {
                        "id": str(i),
                        "prompt_tokens": 20,
                        "completion_tokens": n,
                        "spec_verify_ct": ct,
                        "finish_reason": None,
                    },
                }
            )
            for i, (n, ct) in enumerate(rows)
        )
        + "\nnot a response line\n"
    )
    d = cli.json("measure", "logs", str(log), "--k", "3")
    o = d["overall"]
    n, ct = sum(r[0] for r in rows), sum(r[1] for r in rows)
    assert o["num_drafts"] == ct
    assert o["mean_acceptance_length"] == pytest.approx(n / ct)
    assert o["draft_acceptance_rate"] == pytest.approx((n / ct - 1) / 3)
    assert o["alpha_iid"] == pytest.approx(
        float(theory.alpha_from_draft_acceptance_rate((n / ct - 1) / 3, 3))
    )
    assert o["mean_acceptance_length_ci"] is not None
    r = cli.run("measure", "logs", str(log), "--k", "1")  # τ ≈ 2.5 cannot come from K = 1
    assert r.exit_code == 2 and "--speculative-num-steps" in r.output
    d = cli.json("measure", "logs", str(log))  # without K: τ, and a note asking for K
    assert d["overall"]["draft_acceptance_rate"] is None
    assert any("--k" in x for x in d["notes"])


def test_decode_batch_lines_give_tau_only(cli: Cli, tmp_path: Path) -> None:
    log = tmp_path / "sglang.log"
    log.write_text(
        "[2025-11-30 10:00:00] Decode batch, #running-req: 8, #token: 4096, token usage: 0.05, "
        "accept len: 2.53, accept rate: 0.63, cuda graph: True, gen throughput (token/s): 812.3, "
        "#queue-req: 0, \n"
        "[2025-11-30 10:00:04] Decode batch, #running-req: 8, #token: 4200, token usage: 0.05, "
        "accept len: 2.47, accept rate: 0.62, cuda graph: True, gen throughput (token/s): 799.0, "
        "#queue-req: 0, \n"
    )
    d = cli.json("measure", "logs", str(log))
    assert d["overall"]["sglang_accept_length"] == pytest.approx(2.50)
    assert d["overall"]["mean_acceptance_length_ci"] is None
    assert any("no counts" in x for x in d["notes"])


def _sglang_server(version: str, topk: int) -> web.Application:
    async def metrics(request: web.Request) -> web.Response:
        text = (
            "# TYPE sglang:spec_accept_length gauge\n"
            'sglang:spec_accept_length{model_name="m"} 2.5\n'
        )
        return web.Response(text=text, content_type="text/plain")

    async def info(request: web.Request) -> web.Response:
        return web.json_response(
            {"version": version, "model_path": "m", "speculative_num_steps": 3,
             "speculative_eagle_topk": topk, "speculative_num_draft_tokens": 4 if topk == 1 else 8,
             "internal_states": [{"avg_spec_accept_length": 2.5}]}
        )  # fmt: skip

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/get_server_info", info)
    return app


def test_live_records_sglangs_version_and_shape(cli: Cli) -> None:
    with serve(_sglang_server("0.5.23", 4)) as url:
        d = cli.json("measure", "live", "--url", url, "--interval", "0.05")
    assert d["engine"]["engine"] == "sglang" and d["engine"]["version"] == "0.5.23"
    assert d["engine"]["source"] == "GET /get_server_info" and d["engine"]["eagle_topk"] == 4
