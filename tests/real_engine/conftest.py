"""The real-engine tier: runs only under ``make test-vllm`` (ALPHAGATE_RUN_VLLM=1)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.real_engine.harness import MODEL_CACHE, POOL, VLLM_PYTHON

RUN = os.environ.get("ALPHAGATE_RUN_VLLM") == "1"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if RUN:
        # tests marked `alone` first, before the pool (harness.ServerPool) starts any server:
        # with five pooled servers idle beside it, vLLM's own sweep read the baseline's steps at
        # 7–8 ms instead of 5 and an EAGLE-3 run's whole replies in one chunk (idle servers
        # still poll and log on the same two cores)
        items.sort(key=lambda item: item.get_closest_marker("alone") is None)
        return
    skip = pytest.mark.skip(reason="real-engine tier: run `make test-vllm`")
    for item in items:
        if "real_engine" in str(item.fspath):
            item.add_marker(skip)


@pytest.fixture(scope="session")
def tiny():  # type: ignore[no-untyped-def]
    from alphagate.testing.tiny_models import build_tiny_models

    if not VLLM_PYTHON.exists():
        pytest.fail(f"the vLLM virtualenv is missing ({VLLM_PYTHON}); run `make test-vllm`")
    return build_tiny_models(MODEL_CACHE, log=print)


@pytest.fixture(scope="session", autouse=True)
def _stop_the_pool():  # type: ignore[no-untyped-def]
    """The servers the tier's tests shared stop when the session ends."""
    yield
    POOL.close()


@pytest.fixture(scope="session")
def logdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("vllm-logs")
