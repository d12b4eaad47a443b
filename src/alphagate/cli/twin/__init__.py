"""``alphagate twin``: a vLLM-like OpenAI endpoint on the simulator, with or without speculation."""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from alphagate.cli._app import app, console
from alphagate.cli._check import config_error, fail, finite_float

if TYPE_CHECKING:
    from alphagate.specs.deployment import Method
from alphagate.cli._groups import takes_groups
from alphagate.cli._options import (
    CalibrationOpt,
    CostFlags,
    DeploymentFlags,
    LengthFlags,
    SeedOpt,
    calibrated_deployment,
    given,
    traffic_classes,
)
from alphagate.cli._paths import check_output_path


@app.command("twin", short_help="A vLLM-like endpoint on the simulator.")
@takes_groups
def twin_cmd(
    ctx: typer.Context,
    deploy: DeploymentFlags = DeploymentFlags(),
    k: Annotated[
        int, typer.Option("--k", "-k", min=0, max=64, help="Drafts per step; 0 = no speculation.")
    ] = 3,
    alpha: Annotated[
        float,
        typer.Option(
            "--alpha",
            "-a",
            callback=finite_float("--alpha", 0.0, 1.0),
            help="α of the single class.",
        ),
    ] = 0.7,
    classes: Annotated[
        list[str] | None,
        typer.Option(
            "--class",
            help="NAME:SHARE:ALPHA or NAME:SHARE:A1,A2,… (α per draft position), repeated "
            "(replaces --alpha).",
        ),
    ] = None,
    lengths: LengthFlags = LengthFlags(),
    time_scale: Annotated[
        float,
        typer.Option(
            "--time-scale",
            callback=finite_float("--time-scale", 0.0, 1000.0),
            help="Wall seconds per simulated second; 0 = as fast as possible.",
        ),
    ] = 1.0,
    max_model_len: Annotated[int, typer.Option("--max-model-len", min=2, max=1_048_576)] = 8192,
    host: Annotated[
        str, typer.Option("--host", help="Bind address (loopback by default).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535)] = 8000,
    served: Annotated[
        str, typer.Option("--served-model-name", help="Model name clients send.")
    ] = "alphagate-twin",
    api_key: Annotated[
        str | None,
        typer.Option(
            "--api-key",
            envvar="ALPHAGATE_API_KEY",
            help="Require this Bearer key (or $ALPHAGATE_API_KEY).",
        ),
    ] = None,
    seed: SeedOpt = 0,
    log_stats_interval: Annotated[
        float,
        typer.Option(
            "--log-stats-interval",
            callback=finite_float("--log-stats-interval", 0.0, 86_400.0),
            help="Seconds between vLLM-format 'SpecDecoding metrics' lines on stderr (vLLM's "
            "VLLM_LOG_STATS_INTERVAL; 0 = none). `alphagate measure logs` reads them.",
        ),
    ] = 10.0,
    calibration: CalibrationOpt = None,
    cost: CostFlags = CostFlags(),
    speculative_config: Annotated[
        str | None,
        typer.Option(
            "--speculative-config",
            help="As vLLM's flag (a JSON object): num_speculative_tokens sets K, "
            "num_speculative_tokens_per_batch_size the batch-size schedule, method the drafter "
            "(when --method is not given); other keys are the engine's and are ignored.",
        ),
    ] = None,
    per_request_spec_decode_metrics: Annotated[
        Literal["none", "summary", "detailed"],
        typer.Option(
            "--per-request-spec-decode-metrics",
            help="As vLLM's flag: each reply's final usage chunk carries its own "
            "metrics.speculative_decoding counts (summary; detailed adds per-step arrays), which "
            "bench records per request and per class.",
        ),
    ] = "none",
    per_request_metrics: Annotated[
        bool,
        typer.Option(
            "--enable-per-request-metrics",
            help="As vLLM's flag: each reply's final usage chunk carries its timing "
            "(time_to_first_token_ms, queue_time_ms, generation_time_ms, …; model time).",
        ),
    ] = False,
    emit_send_time: Annotated[bool, typer.Option("--emit-send-time", hidden=True)] = False,
    background: Annotated[
        bool,
        typer.Option(
            "--background",
            help="Start the twin in a child process, wait until it listens, print its URL and "
            "process id, and return (stop it with the printed kill command). Its output goes "
            "to --log-file.",
        ),
    ] = False,
    log_file: Annotated[
        Path | None,
        typer.Option(
            "--log-file",
            help="With --background: where the twin's output goes (default: "
            "alphagate-twin-PID.log in the system's temporary folder).",
        ),
    ] = None,
) -> None:
    """A vLLM-like OpenAI endpoint on the simulator, with or without speculative decoding.

    Step timing comes from the simulator's roofline model for MODEL on GPU, acceptance from α,
    and /metrics uses vLLM's metric names. A request's class is its `alphagate_class` body field,
    else the suffix of `model` ("NAME:CLASS"), else drawn by the class shares.
    """
    from pydantic import ValidationError

    from alphagate.core.errors import ConfigError
    from alphagate.core.traffic import TrafficClass
    from alphagate.twin.config import TwinConfig
    from alphagate.twin.server import serve

    _check_host(host)
    if ":" in served:
        fail(
            f"{served!r}: ':' separates a traffic class from the model name (NAME:CLASS picks "
            "the class per request), so a served name cannot hold one",
            "--served-model-name",
        )
    if classes and given(ctx, "alpha"):
        fail("--class gives each traffic class its α: drop --alpha (or --class)", "--alpha")
    if os.environ.get("ALPHAGATE_API_KEY") == "" and api_key is None:
        api_key = ""  # an empty variable is a mistake, not "no authentication"
    if api_key is not None and not api_key.strip():
        fail(
            "the API key is empty; omit --api-key (and unset ALPHAGATE_API_KEY) to serve without one",
            "--api-key",
        )
    schedule = None
    if speculative_config is not None:
        k, schedule, method = _speculative(ctx, speculative_config, deploy.method)
        deploy = dataclasses.replace(deploy, method=method)
    mix = (
        traffic_classes(classes, require_alpha=True)
        if classes
        else (TrafficClass(name="default", share=1.0, alpha=alpha),)
    )
    dep, profile = calibrated_deployment(ctx, deploy.config(), calibration, cost)
    try:
        cfg = TwinConfig(
            deployment=dep,
            workload=lengths.workload(mix),
            k=k,
            k_by_batch_size=schedule,
            served_model_name=served,
            time_scale=time_scale,
            max_model_len=max_model_len,
            api_key=api_key,
            seed=seed,
            log_stats_interval_s=log_stats_interval,
            emit_send_time=emit_send_time,
            per_request_spec_decode_metrics=per_request_spec_decode_metrics,
            enable_per_request_metrics=per_request_metrics,
        )
        spec = (
            f"K={k}, α " + ", ".join(f"{c.name} {c.alpha_label()}" for c in mix)
            if k
            else "no speculation"
        )
        where = f"[{host}]" if ":" in host else host

        def listening(actual: int) -> None:
            console.print(
                f"alphagate twin: {served} on http://{where}:{actual} — {dep.model} on {dep.gpu}, "
                f"{spec}, time scale {time_scale:g}"
                + (f"; {profile.summary()}" if profile is not None else ""),
                soft_wrap=True,
            )

        if background:
            _start_in_background(host, log_file)
            return
        serve(cfg, host, port, listening)
    except ConfigError as exc:
        config_error(exc, "--model/--gpu/--tp/--dtype")
    except ValidationError as exc:
        fields = {str(e["loc"][0]) for e in exc.errors() if e["loc"]}
        config_error(exc, "--served-model-name" if "served_model_name" in fields else None)
    except OSError as exc:
        fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}", "--host/--port")


#: seconds a background twin may take to start listening
_START_TIMEOUT_S = 120.0


def _start_in_background(host: str, log_file: Path | None) -> None:
    """Run this command line again without ``--background`` in a child that ignores SIGHUP (as
    ``nohup`` does, so it outlives the terminal and stays in the caller's process group), wait
    for its "listening" line, and print how to reach and stop it."""
    import signal
    import subprocess
    import sys
    import tempfile
    import time

    from alphagate.cli import _app

    if _app.COMMAND_LINE is None:
        fail(
            "--background needs the alphagate command line (run `alphagate twin …`)", "--background"
        )
    argv = [a for a in _app.COMMAND_LINE if a != "--background"]
    log = log_file or Path(tempfile.gettempdir()) / f"alphagate-twin-{os.getpid()}.log"
    check_output_path(log, "--log-file", directory=False)
    old = signal.signal(signal.SIGHUP, signal.SIG_IGN)  # inherited through exec
    try:
        with log.open("wb") as out:
            child = subprocess.Popen(
                [sys.executable, "-m", "alphagate", *argv],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, "COLUMNS": "200", "NO_COLOR": "1"},
            )
    finally:
        signal.signal(signal.SIGHUP, old)
    deadline = time.monotonic() + _START_TIMEOUT_S
    url = None
    while url is None:
        text = log.read_text(encoding="utf-8", errors="replace")
        m = re.search(r"alphagate twin: .*? on (http://\S+?) —", text)
        if m:
            url = m.group(1)
        elif child.poll() is not None:
            fail(
                f"the twin exited with code {child.returncode} before listening:\n{text.strip()}",
                "--background",
            )
        elif time.monotonic() > deadline:
            child.kill()
            fail(
                f"the twin did not listen within {_START_TIMEOUT_S:g} s (log: {log})",
                "--background",
            )
        else:
            time.sleep(0.05)
    console.print(
        f"alphagate twin: listening on {url} (pid {child.pid}, log {log}); stop it with: "
        f"kill {child.pid}",
        soft_wrap=True,
    )


#: a host name as RFC 1123 allows: dot-separated labels of letters, digits and inner hyphens
_HOST_NAME = re.compile(
    r"(?=.{1,253}\.?$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?"
)


def _check_host(host: str) -> None:
    """An IP address (v4 or v6) or a host name, else exit 2 before anything is bound."""
    if not host.strip():
        fail(
            "the bind address is empty; use 127.0.0.1 (loopback) or 0.0.0.0 (every interface)",
            "--host",
        )
    try:
        ipaddress.ip_address(host)
        return
    except ValueError:
        pass
    if not _HOST_NAME.fullmatch(host):
        fail(
            f"{host!r} is neither an IP address nor a host name (letters, digits, inner hyphens "
            "and single dots); use 127.0.0.1 (loopback) or 0.0.0.0 (every interface)",
            "--host",
        )


def _speculative(
    ctx: typer.Context, text: str, method: Method
) -> tuple[int, list[list[int]] | None, Method]:
    """K, the batch-size schedule and the method from a vLLM ``--speculative-config``."""
    import json

    from alphagate.specs.deployment import METHODS

    try:
        cfg = json.loads(text)
    except json.JSONDecodeError as exc:
        fail(f"not a JSON object: {exc}", "--speculative-config")
    if not isinstance(cfg, dict):
        fail("not a JSON object", "--speculative-config")
    k = cfg.get("num_speculative_tokens")
    if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= 64:
        fail("num_speculative_tokens must be an integer in 1..64", "--speculative-config")
    if ctx.params.get("k") is not None and given(ctx, "k") and ctx.params["k"] != k:
        fail(f"--k {ctx.params['k']} and num_speculative_tokens {k} disagree", "--k")
    schedule = cfg.get("num_speculative_tokens_per_batch_size")
    if schedule is not None and (
        not isinstance(schedule, list)
        or not all(isinstance(e, list) and all(isinstance(x, int) for x in e) for e in schedule)
    ):
        fail(
            "num_speculative_tokens_per_batch_size must be a list of [start, end, K]",
            "--speculative-config",
        )
    named = cfg.get("method")
    if isinstance(named, str) and named in METHODS and not given(ctx, "method"):
        method = named  # type: ignore[assignment]
    return k, schedule, method
