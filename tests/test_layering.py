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


def test_measure_offline_imports_torch_only_to_load_its_models() -> None:
    """Its run, Ray driver and results (and the measure verb) load without torch: the models
    (``models``, ``eagle3``, ``proposers``, ``replay``) are imported when a run loads them."""
    code = (
        "import sys, alphagate.measure.offline.run, alphagate.measure.offline.ray, "
        "alphagate.measure.results, alphagate.cli.measure; "
        "print(','.join(m for m in ('torch', 'transformers', 'safetensors') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"measure offline pulled in: {out.stdout.strip()}"


def test_train_head_imports_torch_only_when_a_run_starts() -> None:
    """The verb, the run's phases and its results load without torch or speculators: the
    capture, the head and the loop are imported when a run loads its models."""
    code = (
        "import sys, alphagate.train.run, alphagate.train.results, alphagate.cli.train_head, "
        "alphagate.report.train; "
        "print(','.join(m for m in ('torch', 'transformers', 'safetensors', 'speculators') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"train-head pulled in: {out.stdout.strip()}"


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
    "net": 1,
    "specs": 2,
    "sim": 3,
    "measure": 3,
    "twin": 4,
    "bench": 4,
    "train": 4,
    "plan": 5,
    "calibrate": 5,
    "gate": 6,
    "report": 7,
    "testing": 7,
    "cli": 8,
    "api": 8,
}


def _exports() -> dict[str, str]:
    """``alphagate``'s lazy public names → the module that defines each."""
    import alphagate

    return dict(alphagate._EXPORTS)


def _module_of(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _modules(path: Path) -> set[str]:
    """Every ``alphagate`` module a file imports, in any form: ``import alphagate.x``, ``from
    alphagate.x import y``, ``from alphagate import x`` (a submodule, or a lazy public name → the
    module defining it), relative imports, and ``importlib.import_module("alphagate.x")``."""
    here = _module_of(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    exports = _exports()
    out: set[str] = set()
    for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            out.add(module)
            for a in node.names:
                if module == "alphagate" and a.name in exports:
                    out.add(exports[a.name])
                else:
                    out.add(f"{module}.{a.name}")  # a submodule, where one exists (kept below)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            out.add(node.args[0].value)
    return {m for m in out if m.startswith("alphagate.") and _exists(m)}


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node but those under ``if TYPE_CHECKING:`` (annotations only: no runtime import)."""
    out: list[ast.AST] = []
    todo = [tree]
    while todo:
        node = todo.pop()
        out.append(node)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            todo.extend(node.orelse)
            continue
        todo.extend(ast.iter_child_nodes(node))
    return out


def _exists(module: str) -> bool:
    rel = Path(*module.split(".")[1:])
    return (ROOT / rel).with_suffix(".py").is_file() or (ROOT / rel / "__init__.py").is_file()


def _imports(path: Path) -> set[str]:
    """The layers (top-level packages) a file imports."""
    return {m.split(".")[1] for m in _modules(path)}


def test_every_import_form_is_seen(tmp_path: Path) -> None:
    """The checker cannot be walked around: each import form below names its layer."""
    probe = ROOT / "bench" / "_layering_probe.py"
    forms = {
        "from alphagate import plan": "plan",
        "from alphagate import evaluate": "gate",
        "from alphagate import build_plan": "api",
        "from ..gate import rules": "gate",
        "from ..report.page import x": "report",
        "import alphagate.cli.gate": "cli",
        "importlib.import_module('alphagate.calibrate.fit')": "calibrate",
    }
    try:
        for code, layer in forms.items():
            probe.write_text(code + "\n", encoding="utf-8")
            assert layer in _imports(probe), code
    finally:
        probe.unlink(missing_ok=True)


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


def _graph() -> dict[str, set[str]]:
    return {_module_of(p): _modules(p) - {_module_of(p)} for p in ROOT.rglob("*.py")}


def _cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    cycles: list[frozenset[str]] = []
    sys.setrecursionlimit(max(10_000, sys.getrecursionlimit()))

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(frozenset(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return cycles


def test_the_cycle_finder_finds_cycles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"d"}}
    assert _cycles(graph) == [frozenset("abc")]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_between_files() -> None:
    """Over module-level imports (deferred imports in function bodies included: a cycle through
    them is still a knot in the design)."""
    cycles = _cycles(_graph())
    assert not cycles, f"import cycles between files: {[sorted(c) for c in cycles]}"
