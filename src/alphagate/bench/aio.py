"""The bench client's event loop: uvloop where installed, with the cyclic garbage collector kept
off the hot path.

uvloop (https://github.com/MagicStack/uvloop, a dependency except on Windows) runs the loop's
machinery — readiness polling, callbacks, socket reads — in C (libuv), where asyncio's selector
loop runs five Python frames per network read; on the bench's streams that is 5–25% of the
client's CPU (``benchmarks/bench_client_cli.py``). Anything else — a platform without it —
gets asyncio's own loop; the client's code is the same on both.

A bench keeps every finished record, so the heap grows all run long, and CPython's generational
collector (https://docs.python.org/3/library/gc.html) rescans it again and again: at the default
thresholds (700, 10, 10) collections took ~13% of the client's CPU over 20,000 streamed
requests, for a few thousand cyclic objects freed in all. While the loop runs, what exists
before it (modules, prompts, config) is moved out of the collector's sight (``gc.freeze``) and the
youngest generation is collected every 10,000 net allocations instead of 700 (a bounded amount of
garbage held a little longer); both are undone when the loop ends.
"""

from __future__ import annotations

import asyncio
import gc
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["run"]

T = TypeVar("T")

#: the youngest generation's threshold while a bench runs (CPython's default: 700)
GC_GEN0_THRESHOLD = 10_000


_lock = threading.Lock()
_depth = 0  # runs in progress in this process (threads): the outermost sets and restores
_saved: tuple[tuple[int, int, int], bool] = ((700, 10, 10), False)


def run(main: Coroutine[Any, Any, T]) -> T:
    """Run ``main`` to completion on a new event loop (``asyncio.run``'s semantics: Ctrl-C
    cancels the main task, then raises ``KeyboardInterrupt``). A process that froze its own
    objects or turned automatic collection off (threshold 0) keeps that; overlapping runs in
    threads restore the settings once, when the last one ends."""
    global _depth, _saved
    with _lock:
        if _depth == 0:
            thresholds = gc.get_threshold()
            froze = gc.get_freeze_count() == 0
            if froze:
                gc.freeze()
            if thresholds[0]:
                gc.set_threshold(max(thresholds[0], GC_GEN0_THRESHOLD), *thresholds[1:])
            _saved = (thresholds, froze)
        _depth += 1
    try:
        try:
            import uvloop
        except ImportError:
            return asyncio.run(main)
        return uvloop.run(main)
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                thresholds, froze = _saved
                gc.set_threshold(*thresholds)
                if froze:
                    gc.unfreeze()
