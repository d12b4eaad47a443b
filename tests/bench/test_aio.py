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


def test_a_process_that_froze_its_objects_or_disabled_collection_keeps_that() -> None:
    before = gc.get_threshold()
    gc.freeze()
    frozen = gc.get_freeze_count()
    try:
        gc.set_threshold(0)

        async def inside() -> tuple[int, int]:
            return gc.get_threshold()[0], gc.get_freeze_count()

        threshold, count = aio.run(inside())
        assert threshold == 0  # collection stays off
        assert 0 < count <= frozen  # nothing more frozen (frozen objects may still be freed)
        assert gc.get_threshold()[0] == 0 and 0 < gc.get_freeze_count() <= frozen  # still frozen
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()


def test_the_loop_is_uvloop_where_it_is_installed() -> None:
    uvloop = pytest.importorskip("uvloop", reason="uvloop is not installed on this platform")

    async def loop_type() -> type:
        return type(asyncio.get_running_loop())

    assert issubclass(aio.run(loop_type()), uvloop.Loop)
