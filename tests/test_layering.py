"""Layer rules: imports point down the layers only; theory/ imports neither torch nor any HTTP
library, and neither prints nor opens files."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

FORBIDDEN = [
    "torch",
    "transformers",
    "tokenizers",
    "aiohttp",
    "httpx",
    "requests",
    "urllib3",
    "http.client",
]


def test_theory_and_sim_import_no_torch_or_http() -> None:
    code = (
        "import sys, alphagate.theory, alphagate.specs, alphagate.sim.sweep, alphagate.sim.closed_loop; "
        f"bad = [m for m in {FORBIDDEN!r} if m in sys.modules]; "
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"alphagate.theory pulled in: {out.stdout.strip()}"


def test_theory_does_not_print_or_open_files() -> None:
    import inspect

    import alphagate.theory as theory_pkg

    for name in theory_pkg.__all__:
        obj = getattr(theory_pkg, name)
        if inspect.isfunction(obj):
            src = inspect.getsource(obj)
            assert not re.search(r"(?<![\w.])(print|open)\(", src), name


ROOT = Path(__file__).resolve().parents[1] / "src" / "alphagate"

#: The layers, bottom up (the README's architecture diagram). Equal ranks may not import each other.
RANK = {
    "core": 0,
    "theory": 1,
    "specs": 2,
    "sim": 3,
    "measure": 3,
    "twin": 4,
    "bench": 4,
    "plan": 5,
    "calibrate": 5,
    "gate": 6,
    "report": 7,
    "testing": 7,
    "cli": 8,
}


def _imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        out |= {n.split(".")[1] for n in names if n.startswith("alphagate.")}
    return out


def test_imports_point_down_the_layers() -> None:
    wrong = []
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT)
        if len(rel.parts) == 1:
            continue  # alphagate/__init__.py (lazy names for the Python API) and __main__.py
        layer = rel.parts[0]
        assert layer in RANK, f"{rel}: a package the layer table does not know"
        for target in _imports(path) - {layer}:
            if RANK[target] >= RANK[layer]:
                wrong.append(f"{rel} imports alphagate.{target}")
    assert not wrong, wrong
