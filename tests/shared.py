"""Setups made once per test run and shared by every xdist worker: a folder made by one worker
under a file lock, which the others wait for and read (pytest-xdist's recipe for a session
fixture that runs once). For what costs seconds and several modules read: tiny models, plans."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from filelock import FileLock

#: written last into a made folder: a folder without it was cut short and is made again
DONE = ".made"


def shared_root(factory: pytest.TempPathFactory) -> Path:
    """A folder every xdist worker of this run sees (the run's base temporary folder's parent
    under xdist, the base folder itself without it)."""
    base = factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def made_once(folder: Path, make: Callable[[Path], object]) -> Path:
    """``folder``, filled by ``make(folder)`` the first time any worker asks for it this run."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder) + ".lock"):
        if not (folder / DONE).is_file():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            make(folder)
            (folder / DONE).touch()
    return folder
