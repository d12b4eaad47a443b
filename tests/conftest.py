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
from hypothesis import settings
from typer.testing import CliRunner

from alphagate.cli import app
from alphagate.sim.cost import StepCostModel, build_cost_model
from alphagate.specs import DeploymentConfig, resolve_deployment

if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    # started in the background by a shell without job control, the tests inherit SIGINT
    # ignored, and so would every alphagate they start and interrupt: restore the default
    signal.signal(signal.SIGINT, signal.default_int_handler)

# A property test checks an invariant, not a speed: Hypothesis' default 200 ms deadline per
# example fails a test whose example a loaded 2-core machine runs late (378 ms seen in
# tests/theory/test_speedup.py), so the project's profile sets none.
settings.register_profile("alphagate", deadline=None)
settings.load_profile("alphagate")


#: Test modules that start a server, a subprocess, a browser or Prometheus (or use a fixture
#: that does): the ``integration`` tier. Everything else is the unit tier, ``pytest -m "not
#: integration"`` (``make test-unit``), where starting one fails the test (see
#: :func:`_unit_tests_start_nothing`). Found by running the suite with ``socket.listen`` and
#: ``subprocess.Popen`` traced; a module that starts one later fails there and belongs here.
INTEGRATION_MODULES = frozenset(
    f"tests/{m}.py"
    for m in (
        "bench/test_bench_faults", "bench/test_bench_twin", "net/test_client",
        "bench/test_validity", "bench/test_workers",
        "calibrate/test_sweep", "calibrate/test_twin_coverage", "calibrate/test_twin_roundtrip",
        "cli/test_bench", "cli/test_bench_goodput", "cli/test_bench_limits", "cli/test_bench_plot",
        "cli/test_bench_trace", "cli/test_bench_workers", "cli/test_calibrate",
        "cli/test_full_disk", "cli/test_hardening", "cli/test_hardening_rounds2",
        "cli/test_measure_offline", "cli/test_model", "cli/test_report", "cli/test_signals",
        "explain/test_injected",
        "fuzz/test_fuzz",
        "gate/test_evaluate", "gate/test_evidence", "gate/test_soundness", "gate/test_stages",
        "measure/offline/test_ray", "measure/test_live", "measure/test_prometheus",
        "measure/test_sglang",
        "report/test_browser", "report/test_charts", "report/test_figures", "report/test_html",
        "report/test_inputs", "report/test_plots",
        "test_docs", "test_secrets",
        "train/test_capture_disk", "train/test_speculators_run",
        "twin/test_background", "twin/test_metrics", "twin/test_server", "twin/test_statslog",
    )
)  # fmt: skip


ROOT = Path(__file__).resolve().parent.parent


#: Test modules that load torch and transformers (tiny models built, saved and loaded back by
#: the real loading code; a head trained): seconds of import in each worker before their first
#: test, and seconds of CPU each. Pure computation, but not the unit tier's: it is numpy's.
TORCH_MODULES = frozenset(
    f"tests/{m}.py"
    for m in (
        "measure/offline/test_eagle3", "measure/offline/test_eagle3_numerics",
        "measure/offline/test_extra",  # without transformers: torch is imported, then refused
        "measure/offline/test_run", "measure/offline/test_suffix",
        "measure/offline/test_tree_models",
        "testing/test_tiny_models",
        "train/test_head", "train/test_run", "train/test_speculators",
    )
)  # fmt: skip


def _integration_path(path: Path) -> bool:
    """A module of the integration tier, or the real-engine folder (or a file in it)."""
    rel = path.resolve().relative_to(ROOT).as_posix()
    return (
        rel in INTEGRATION_MODULES
        or rel in TORCH_MODULES
        or (rel + "/").startswith("tests/real_engine/")
    )


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """In the unit tier (``-m "not integration"``) the integration modules are not imported at
    all: each xdist worker collects, and their imports (torch, matplotlib, the servers) would cost
    every worker seconds for tests it deselects."""
    if " ".join(str(config.getoption("markexpr", "")).split()) != "not integration":
        return None
    return True if _integration_path(collection_path) else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The integration tier: the modules above, the ``timing`` tests, and the ``slow`` ones —
    heavy pure computations (a head trained with torch, Monte-Carlo studies of thousands of
    windows, the default 70B sweep) that start nothing but would hold the unit tier past its
    minute. ``make test`` runs them all: it selects on ``timing`` alone."""
    for item in items:
        if (
            _integration_path(Path(str(item.fspath)))
            or item.get_closest_marker("timing")
            or item.get_closest_marker("slow")
        ):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(autouse=True)
def _unit_tests_start_nothing(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A unit test that listens on a socket or starts a process fails, naming the tier it
    belongs to: the unit tier stays fast because nothing in it waits on a server."""
    if request.node.get_closest_marker("integration"):
        return
    import socket

    def refuse(*args: object, **kwargs: object) -> None:
        raise RuntimeError(
            f"{request.node.nodeid} starts a server or a process: add its module to "
            "tests/conftest.py INTEGRATION_MODULES"
        )

    monkeypatch.setattr(socket.socket, "listen", refuse)
    monkeypatch.setattr(subprocess.Popen, "__init__", refuse)


def _one_torch_thread() -> None:
    """Tests run tiny models: torch's default of a thread per core makes each worker's OpenMP
    threads spin against the other's on two cores (measured: measure/offline/test_run.py took 51 s of
    CPU at the default, 10 s at one thread), and the product's own advice for small models on
    busy cores is one (``measure offline --threads``). Set where torch is already loaded: the
    tests that use it import it, the others never pay for it."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.get_num_threads() != 1:
        torch.set_num_threads(1)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> object:
    _one_torch_thread()  # for fixtures that build models
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> object:
    _one_torch_thread()  # for a test whose fixture imported torch
    return (yield)


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


@pytest.fixture(scope="session")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The offline tests' tiny models (``tests.measure.offline.fixtures.build``: a target, a draft
    model, EAGLE-3 heads), built once per test run for every module and worker that reads them;
    torch is imported only by the tests that ask."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from tests.measure.offline.fixtures import Tiny, build
    from tests.shared import made_once, shared_root

    return Tiny.at(made_once(shared_root(tmp_path_factory) / "offline-models", build))


@pytest.fixture(scope="session")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A target small enough to train an EAGLE-3 head on in seconds, and its request log
    (:mod:`tests.train.synthetic`), built once per test run for every worker that reads them."""
    pytest.importorskip("torch")
    pytest.importorskip("speculators.models.eagle3")  # ~3 s of imports: not at collection
    from tests.shared import made_once, shared_root
    from tests.train.synthetic import Synthetic, build

    root = made_once(shared_root(tmp_path_factory) / "train-synthetic", build)
    return Synthetic(root / "target", root / "log.jsonl")


# The results files (sweep, plan, bench A/B, measure, gate) written once per session for the report
# and CLI tests: registered here, at the root, so that one session computes them once.
from tests.plans import chat_code_plan, plans  # noqa: E402
from tests.results_files import results  # noqa: E402

__all__ = ["Cli", "chat_code_plan", "demo_run", "plans", "results", "synthetic"]
