"""The bench loop runner: the collector's settings are raised while it runs and restored after,
also when the run fails."""

from __future__ import annotations

import asyncio
import gc

import pytest

from alphagate.bench import aio


def test_runs_the_coroutine_and_returns_its_value() -> None:
    async def value() -> int:
        await asyncio.sleep(0)
        return 42

    assert aio.run(value()) == 42


def test_gc_settings_are_restored_even_on_error() -> None:
    before = gc.get_threshold()

    async def boom() -> None:
        assert gc.get_threshold()[0] >= aio.GC_GEN0_THRESHOLD
        assert gc.get_freeze_count() > 0
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        aio.run(boom())
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
