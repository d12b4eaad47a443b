"""Plans the tests read, each made once per test run as a user makes it — ``alphagate plan ARGS
--out plan.md`` (and ``--plot plots`` when asked) — and shared by every test and every xdist
worker that asks for the same arguments (:mod:`tests.shared`): a plan is seconds of CPU, and the
plan tests read some twenty of them from several files.

A run keeps what the user gets: the console tables (``output``), the markdown plan, and
``plan.json``, the payload ``--json`` prints (the same object: ``--out`` writes it beside the
markdown).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Cli
from tests.shared import made_once, shared_root

#: 70% chat at α 0.7, 30% code at α 0.4: the traffic most plan tests read
MIX = ("--class", "chat:0.7:0.7", "--class", "code:0.3:0.4")
#: the plan of :data:`MIX` at concurrency 64 with a peak of 256, its figures too
CHAT_CODE = (*MIX, "--concurrency", "64", "--peak-concurrency", "256")


@dataclass(frozen=True)
class PlanRun:
    """One ``alphagate plan`` run: its folder, what it printed, the JSON and the markdown."""

    folder: Path
    output: str

    @property
    def json(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.folder / "plan.json").read_text(encoding="utf-8"))
        assert data["schema"] == "alphagate.results/v1"
        return data

    @property
    def markdown(self) -> str:
        return (self.folder / "plan.md").read_text(encoding="utf-8")

    @property
    def plots(self) -> Path:
        return self.folder / "plots"


class Plans:
    """``plans(*args)``: the :class:`PlanRun` of ``alphagate plan *args``, made once per run."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def __call__(self, *args: str, plot: bool = False, width: int = 200) -> PlanRun:
        """``plot``: with ``--plot``; ``width``: the terminal's columns."""

        def make(folder: Path) -> None:
            extra = ["--plot", str(folder / "plots")] if plot else []
            r = Cli(width).run("plan", *args, "--out", str(folder / "plan.md"), *extra)
            assert r.exit_code == 0, r.output
            (folder / "output.txt").write_text(r.output, encoding="utf-8")

        key = hashlib.sha256(json.dumps([args, plot, width]).encode()).hexdigest()[:16]
        folder = made_once(self.root / key, make)
        return PlanRun(folder, (folder / "output.txt").read_text(encoding="utf-8"))


@pytest.fixture(scope="session")
def plans(tmp_path_factory: pytest.TempPathFactory) -> Plans:
    return Plans(shared_root(tmp_path_factory) / "plans")


@pytest.fixture(scope="session")
def chat_code_plan(plans: Plans) -> PlanRun:
    """:data:`CHAT_CODE`'s plan: the gate, the schedule, the markdown, the figures and the
    tables' widths are read from this one run."""
    return plans(*CHAT_CODE, plot=True)
