"""Shared fixtures: a CLI runner that returns parsed JSON."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from alphagate.cli import app
from alphagate.sim.cost import StepCostModel, build_cost_model
from alphagate.specs import DeploymentConfig, resolve_deployment

if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    # started in the background by a shell without job control, the tests inherit SIGINT
    # ignored, and so would every alphagate they start and interrupt: restore the default
    signal.signal(signal.SIGINT, signal.default_int_handler)


class Cli:
    """Invoke ``alphagate`` in-process; ``json(...)`` adds ``--json`` and parses the object."""

    def __init__(self, width: int = 200) -> None:
        """``width``: the terminal's columns; wide by default, so that a long temporary path (a
        pytest-xdist worker's) is not broken across lines."""
        self.runner = CliRunner()
        self.width = width

    def run(self, *args: str) -> Any:
        from alphagate.cli import _app

        # the CLI's consoles are made at import; rich reads COLUMNS then, so set their width here
        consoles = (_app.console, _app.err_console)
        before = [c._width for c in consoles]
        for c in consoles:
            c.width = self.width
        try:
            return self.runner.invoke(app, list(args), env={"NO_COLOR": "1"})
        finally:
            for c, w in zip(consoles, before, strict=True):
                c._width = w

    def json(self, *args: str, exit_code: int = 0) -> dict[str, Any]:
        result = self.run(*args, "--json")
        assert result.exit_code == exit_code, result.output
        data: dict[str, Any] = json.loads(result.stdout)
        assert data["schema"] == "alphagate.results/v1"
        return data


@pytest.fixture
def cli() -> Cli:
    return Cli()


@pytest.fixture(scope="session")
def cost_8b() -> StepCostModel:
    """Llama-3.1-8B BF16 on one H100 with an EAGLE-3 head, a small prefill budget."""
    return build_cost_model(
        resolve_deployment(
            DeploymentConfig(model="llama-3.1-8b", weight_dtype="bf16", max_num_batched_tokens=512)
        )
    )


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """``alphagate demo`` run once per session as a user runs it — its own process, an empty
    folder, 120 columns: (the folder, what it printed). The demo's tests and the browser test of
    its report share it."""
    cwd = tmp_path_factory.mktemp("demo")
    env = {**os.environ, "COLUMNS": "120"}
    r = subprocess.run(
        [sys.executable, "-m", "alphagate", "demo"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return cwd, r.stdout


# The results files (sweep, plan, bench A/B, measure, gate) written once per session for the report
# and CLI tests: registered here, at the root, so that one session computes them once.
from tests.results_files import results  # noqa: E402

__all__ = ["Cli", "demo_run", "results"]
