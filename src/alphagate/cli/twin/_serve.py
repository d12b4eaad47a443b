"""Where the twin listens, as an option group (:mod:`alphagate.cli._groups`): the address, the
served model name and key, and ``--background``, which starts it in a child process."""

from __future__ import annotations

import ipaddress
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from alphagate.cli._app import console
from alphagate.cli._check import fail
from alphagate.cli._options import API_KEY_ENV, api_key_option
from alphagate.cli._paths import check_output_path

__all__ = ["ServeFlags", "start_in_background"]


@dataclass(frozen=True)
class ServeFlags:
    """The address, the name clients send, the key they must send, and whether to return once
    a child process serves."""

    host: Annotated[str, typer.Option("--host", help="Bind address (loopback by default).")] = (
        "127.0.0.1"
    )
    port: Annotated[int, typer.Option("--port", min=0, max=65535)] = 8000
    served: Annotated[str, typer.Option("--served-model-name", help="Model name clients send.")] = (
        "alphagate-twin"
    )
    api_key: Annotated[
        str | None,
        api_key_option("Require this Bearer key (or $ALPHAGATE_API_KEY)."),
    ] = None
    background: Annotated[
        bool,
        typer.Option(
            "--background",
            help="Start the twin in a child process, wait until it listens, print its URL and "
            "process id, and return (stop it with the printed kill command). Its output goes "
            "to --log-file.",
        ),
    ] = False
    log_file: Annotated[
        Path | None,
        typer.Option(
            "--log-file",
            help="With --background: where the twin's output goes (default: "
            "alphagate-twin-PID.log in the system's temporary folder).",
        ),
    ] = None

    def check(self) -> None:
        """A bind address and a served name the twin can use."""
        _check_host(self.host)
        if ":" in self.served:
            fail(
                f"{self.served!r}: ':' separates a traffic class from the model name (NAME:CLASS "
                "picks the class per request), so a served name cannot hold one",
                "--served-model-name",
            )

    def key(self) -> str | None:
        """The API key clients must send (None: none); an empty one is refused."""
        api_key = self.api_key
        if os.environ.get(API_KEY_ENV) == "" and api_key is None:
            api_key = ""  # an empty variable is a mistake, not "no authentication"
        if api_key is not None and not api_key.strip():
            fail(
                "the API key is empty; omit --api-key (and unset ALPHAGATE_API_KEY) to serve "
                "without one",
                "--api-key",
            )
        return api_key

    def url(self, port: int) -> str:
        where = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{where}:{port}"


#: seconds a background twin may take to start listening
_START_TIMEOUT_S = 120.0


def start_in_background(log_file: Path | None) -> None:
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
