"""Docs that cannot lie: every shell example in the README and the documentation pages.

- A ``console`` block after a ``<!-- runnable -->`` line is run as printed — its ``$`` lines, in
  one shell, in a scratch folder beside a copy of ``examples/`` — against twins on 127.0.0.1
  that the block starts itself; every command must exit 0 (a line ending ``# exit N`` must exit
  N), and the servers it started are stopped at the end.
- Every other ``alphagate …`` command in a ``console``, ``sh`` or ``bash`` block (one that needs
  a GPU or a real engine) is parsed with the real CLI's own parser: a flag the CLI does not have,
  or a value it refuses, fails.
- The architecture page names every module of the package, and the site builds with ``--strict``
  (``make docs-build``, part of ``make test``).
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.servers import DISTORTED, RERUNS

REPO = Path(__file__).resolve().parents[1]
PAGES = sorted([REPO / "README.md", *(REPO / "docs").rglob("*.md")])
BLOCK = re.compile(r"(<!--\s*runnable\s*-->\s*\n)?```(console|sh|bash)\n(.*?)^```", re.S | re.M)


def _commands(body: str) -> list[str]:
    """The ``$`` lines of a block, with their ``\\`` continuations joined."""
    out: list[str] = []
    lines = body.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("$ "):
            cmd = line[2:]
            while cmd.rstrip().endswith("\\") and i + 1 < len(lines):
                i += 1
                cmd = cmd.rstrip()[:-1] + " " + lines[i].strip()
            out.append(cmd)
        i += 1
    return out


def _blocks() -> list[tuple[str, bool, list[str]]]:
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for n, m in enumerate(BLOCK.finditer(text)):
            lang, body = m.group(2), m.group(3)
            cmds = (
                _commands(body)
                if lang == "console"
                else [ln for ln in body.splitlines() if ln.startswith("alphagate ")]
            )
            if cmds:
                found.append((f"{page.relative_to(REPO)}#{n}", bool(m.group(1)), cmds))
    return found


BLOCKS = _blocks()
RUNNABLE = [b for b in BLOCKS if b[1]]


def test_the_docs_have_runnable_examples() -> None:
    assert len(RUNNABLE) >= 3, [b[0] for b in BLOCKS]
    assert any(b[0].startswith("README.md") for b in RUNNABLE)  # the quick start runs


#: blocks run at once: each mostly waits on its twins, whose ports differ (checked below)
PARALLEL = 3


def _run_block(commands: list[str], cwd: Path) -> tuple[int, str]:
    """One block's ``$`` lines in one bash, in ``cwd``; (exit code, what it printed)."""
    shutil.copytree(REPO / "examples", cwd / "examples")
    env = {**os.environ, "COLUMNS": "80", "NO_COLOR": "1"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    script = ["set -uo pipefail"]
    for i, cmd in enumerate(commands):
        want = re.search(r"\s*#\s*exit\s+(\d+)\s*$", cmd)
        code = want.group(1) if want else "0"
        run = cmd[: want.start()] if want else cmd
        script.append(
            f"( {run} ) > out-{i}.txt 2>&1; rc=$?; "
            f'if [ $rc -ne {code} ]; then echo {shlex.quote(f"FAILED [{i}] {cmd}")} "(exit $rc, '
            f'wanted {code})"; cat out-{i}.txt; exit 1; fi'
        )
    proc = subprocess.Popen(
        ["bash", "-c", "\n".join(script)],
        cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,  # its background servers share its process group: stopped below
    )  # fmt: skip
    try:
        out, _ = proc.communicate(timeout=600)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
    return proc.returncode, out


@pytest.fixture(scope="module")
def block_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[int, str]]:
    """Every runnable block, :data:`PARALLEL` at a time."""
    from concurrent.futures import ThreadPoolExecutor

    def run(cmds: list[str]) -> tuple[int, str]:
        rc, out = _run_block(cmds, tmp_path_factory.mktemp("block"))
        for _ in range(RERUNS):
            if rc == 0 or DISTORTED not in out:
                break
            # the gate found an A/B distorted by a loaded machine and says "rerun", once the
            # block's twins (stopped with its process group) have let go of their ports
            time.sleep(3)
            rc, out = _run_block(cmds, tmp_path_factory.mktemp("block"))
        return rc, out

    tmp_path_factory.getbasetemp()  # made here, once: the threads would race to create it
    with ThreadPoolExecutor(PARALLEL) as pool:
        futures = {where: pool.submit(run, cmds) for where, _, cmds in RUNNABLE}
        return {where: f.result() for where, f in futures.items()}


def test_runnable_blocks_use_ports_of_their_own() -> None:
    """Blocks run side by side: a port may appear in one block only."""
    owner: dict[str, str] = {}
    clash = []
    for where, _, cmds in RUNNABLE:
        for port in set(re.findall(r"--port (\d{4,5})", " ".join(cmds))):
            if owner.setdefault(port, where) != where:
                clash.append(f"{port}: {owner[port]} and {where}")
    assert not clash, clash


@pytest.mark.slow
@pytest.mark.timing
@pytest.mark.xdist_group("docs")  # one worker runs the module's blocks (their fixture), once
@pytest.mark.parametrize("where", [b[0] for b in RUNNABLE])
def test_a_runnable_example_runs_as_printed(
    where: str, block_runs: dict[str, tuple[int, str]]
) -> None:
    code, out = block_runs[where]
    assert code == 0, f"{where}:\n{out}"


def _cli_args(cmd: str) -> list[str]:
    argv = shlex.split(cmd.split(" #", 1)[0].rstrip(" &"))
    return [a for a in argv[1:] if a not in (">", "2>&1") and not a.startswith(">")]


@pytest.mark.parametrize(
    "where,cmd",
    [(b[0], c) for b in BLOCKS if not b[1] for c in b[2] if c.startswith("alphagate ")],
)
def test_every_other_command_parses_with_the_cli_s_own_parser(where: str, cmd: str) -> None:
    """Commands that need a GPU or a real engine are not run, but every flag and value of them
    is one the CLI accepts (Typer's own parser, resilient to nothing)."""
    import typer.main

    from alphagate.cli import app

    root = typer.main.get_command(app)
    args = _cli_args(cmd)
    if ">" in cmd:
        args = _cli_args(cmd.split(">", 1)[0])
    sub = root
    ctx_args = list(args)
    while getattr(sub, "commands", None) and ctx_args and ctx_args[0] in sub.commands:
        sub = sub.commands[ctx_args.pop(0)]
    assert not getattr(sub, "commands", None), f"{where}: {cmd} names no verb"
    try:
        sub.make_context(cmd.split()[1], ctx_args)
    except SystemExit as exc:  # --help and the like
        assert exc.code == 0, f"{where}: {cmd}"
    except Exception as exc:  # click's usage errors, reported with the page
        pytest.fail(f"{where}: {cmd}\n{type(exc).__name__}: {exc}")


def test_the_architecture_page_names_every_module() -> None:
    page = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    pkg = REPO / "src" / "alphagate"
    missing = [
        str(p.relative_to(pkg))
        for p in pkg.rglob("*.py")
        if p.name != "__init__.py" and str(p.relative_to(pkg)) not in page
    ]
    assert not missing, f"docs/architecture.md does not mention: {missing}"
