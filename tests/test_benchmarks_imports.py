"""Every ``from M import N`` in ``benchmarks/`` (at the top or inside a function) names a module
that exists and a name that module defines: a benchmark whose helper moved fails here, not on
the first ``make bench`` after the move. Read from the sources, nothing imported."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BENCHMARKS = sorted((REPO / "benchmarks").glob("*.py"))
SIBLINGS = {p.stem for p in BENCHMARKS}  # a benchmark's own directory is on its path
OURS = ("alphagate", "tests", "benchmarks", *SIBLINGS)


def _source(module: str) -> Path | None:
    """The file that defines ``module`` (the repository's own packages only)."""
    parts = module.split(".")
    base = {"alphagate": REPO / "src", **dict.fromkeys(SIBLINGS, REPO / "benchmarks")}.get(
        parts[0], REPO
    )
    for path in (base.joinpath(*parts).with_suffix(".py"), base.joinpath(*parts, "__init__.py")):
        if path.is_file():
            return path
    return None


def _defined(path: Path) -> set[str]:
    """The names a module binds at its top level (definitions, assignments, imports)."""
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def _imports(path: Path) -> list[tuple[int, str, list[str]]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name, []) for a in node.names]
    return found


@pytest.mark.parametrize("bench", BENCHMARKS, ids=lambda p: p.name)
def test_every_import_of_a_benchmark_resolves(bench: Path) -> None:
    missing = []
    for line, module, names in _imports(bench):
        where = f"{bench.name}:{line}"
        if module.split(".")[0] in OURS:
            source = _source(module)
            if source is None:
                missing.append(f"{where}: no module {module}")
                continue
            # a package's submodules count as its names
            sub = (
                {p.stem for p in source.parent.iterdir()} if source.name == "__init__.py" else set()
            )
            missing += [
                f"{where}: {module} has no {n}" for n in names if n not in _defined(source) | sub
            ]
        elif importlib.util.find_spec(module.split(".")[0]) is None:
            missing.append(f"{where}: no module {module} in this environment")
    assert not missing, missing


def test_the_resolver_finds_a_moved_helper(tmp_path: Path) -> None:
    """The check above can fail: a module that does not exist, and a name a module lacks."""
    assert _source("tests.measure.offline_fixtures") is None
    assert _source("tests.measure.offline.fixtures") is not None
    defined = _defined(_source("tests.measure.offline.fixtures"))  # type: ignore[arg-type]
    assert {"build", "greedy_log"} <= defined and "no_such_helper" not in defined
