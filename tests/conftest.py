"""Shared fixtures: a CLI runner that returns parsed JSON."""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

from alphagate.cli import app


class Cli:
    """Invoke ``alphagate`` in-process; ``json(...)`` adds ``--json`` and parses the object."""

    def __init__(self) -> None:
        self.runner = CliRunner()

    def run(self, *args: str) -> Any:
        return self.runner.invoke(app, list(args))

    def json(self, *args: str) -> dict[str, Any]:
        result = self.run(*args, "--json")
        assert result.exit_code == 0, result.output
        data: dict[str, Any] = json.loads(result.stdout)
        assert data["schema"] == "alphagate.results/v1"
        return data


@pytest.fixture
def cli() -> Cli:
    return Cli()
