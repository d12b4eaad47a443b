"""`alphagate plan --plot`: the plan's figures as PNGs, from the same charts as the report."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import Cli
from tests.plans import PlanRun


def test_plan_plot_writes_the_plan_figures(chat_code_plan: PlanRun) -> None:
    assert "plots written to" in chat_code_plan.output
    names = sorted(p.name for p in chat_code_plan.plots.iterdir())
    # one given α per class and nothing measured: no α-by-position chart (a flat line says
    # nothing the table does not)
    assert names == [
        "acceptance_length.png",
        "itl_per_token.png",
        "speedup_vs_concurrency.png",
    ]
    for p in chat_code_plan.plots.iterdir():
        assert p.read_bytes()[:4] == b"\x89PNG" and p.stat().st_size > 10_000


def test_plan_plot_into_a_file_is_refused(cli: Cli, tmp_path: Path) -> None:
    f = tmp_path / "a-file"
    f.write_text("x")
    r = cli.run("plan", "--class", "chat:1:0.7", "--concurrency", "8", "--plot", str(f))
    assert r.exit_code == 2 and "--plot" in r.output
