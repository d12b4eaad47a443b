"""The bench loop runner: uvloop when installed, asyncio without it; GC settings restored."""

from __future__ import annotations

import asyncio
import gc
import sys

import pytest

from alphagate.bench import aio


async def _loop_type() -> str:
    await asyncio.sleep(0)
    return type(asyncio.get_running_loop()).__module__


def test_runs_without_uvloop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop raises ImportError
    assert aio.run(_loop_type()).startswith("asyncio")


def test_uses_uvloop_when_installed() -> None:
    pytest.importorskip("uvloop")
    assert aio.run(_loop_type()).startswith("uvloop")


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
