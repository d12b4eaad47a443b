"""Shared fixtures: a CLI runner that returns parsed JSON."""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

from alphagate.cli import app
from alphagate.sim.cost import StepCostModel, build_cost_model
from alphagate.specs import DeploymentConfig, resolve_deployment


class Cli:
    """Invoke ``alphagate`` in-process; ``json(...)`` adds ``--json`` and parses the object."""

    def __init__(self) -> None:
        self.runner = CliRunner()

    def run(self, *args: str) -> Any:
        return self.runner.invoke(app, list(args))

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
