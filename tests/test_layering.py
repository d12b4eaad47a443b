"""Layer rules: imports point down the layers only, in every form Python has for them; no import
cycle between files; theory/ imports neither torch nor any HTTP library, and neither prints nor
opens files.

The import finder reads each file's syntax tree and sees: ``import p.x.y [as z]``, ``from p.x
import y`` (y a module or a name in it), ``from p import X`` where X is one of the package's lazy
public names (``_EXPORTS`` in its ``__init__``: an import of the name is an import of the module
that defines it), relative imports (``from . import x``, ``from ..sim import y``),
``importlib.import_module("p.x")`` and ``__import__("p.x")`` with a literal (or an f-string's
literal head: ``f"p.cli.{verb}"`` imports from ``p.cli``), ``p.X`` / ``p.x.y`` read through a
bound ``import p [as q]``, and all of these inside functions. An import under ``if
TYPE_CHECKING:`` is no runtime edge (it is left out of the cycle check) but must point down all
the same: a type is a dependency of the design. The finder is tested on a package of its own
(:func:`test_the_finder_sees_every_form_once`)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

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

SRC = Path(__file__).resolve().parents[1] / "src"

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
    "explain": 6,
    "report": 7,
    "testing": 7,
    "cli": 8,
    "api": 8,
}


# ---------------------------------------------------------------- the import finder
@dataclass(frozen=True)
class Package:
    """A top-level package on disk: ``root`` is its folder, ``name`` its import name, ``exports``
    its lazy public names → the module defining each (read from ``_EXPORTS`` in its ``__init__``)."""

    root: Path
    name: str
    exports: dict[str, str] = field(hash=False)

    @classmethod
    def at(cls, root: Path) -> Package:
        return cls(root, root.name, _exports_literal(root / "__init__.py"))

    def module_of(self, path: Path) -> str:
        rel = path.relative_to(self.root.parent).with_suffix("")
        return ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)

    def exists(self, module: str) -> bool:
        head, _, rest = module.partition(".")
        if head != self.name:
            return False
        rel = self.root.joinpath(*rest.split(".")) if rest else self.root
        return rel.with_suffix(".py").is_file() or (rel / "__init__.py").is_file()

    def files(self) -> Iterator[Path]:
        return iter(sorted(self.root.rglob("*.py")))


@dataclass(frozen=True)
class Edges:
    """The package's modules one file imports: at run time, and under ``if TYPE_CHECKING:``."""

    runtime: frozenset[str]
    typing: frozenset[str]

    @property
    def all(self) -> frozenset[str]:
        return self.runtime | self.typing


def _exports_literal(init: Path) -> dict[str, str]:
    """The ``_EXPORTS`` dict literal of a package's ``__init__`` ({} without one)."""
    if not init.is_file():
        return {}
    for node in ast.parse(init.read_text(encoding="utf-8")).body:
        target = node.target if isinstance(node, ast.AnnAssign) else None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
        if isinstance(target, ast.Name) and target.id == "_EXPORTS" and node.value is not None:
            value = ast.literal_eval(node.value)
            assert isinstance(value, dict)
            return {str(k): str(v) for k, v in value.items()}
    return {}


def _walk(tree: ast.AST, *, statements_only: bool) -> Iterator[tuple[ast.AST, bool]]:
    """Every node (or every statement: ``import`` is one) with whether it sits under ``if
    TYPE_CHECKING:`` (its ``else`` runs)."""
    todo: list[tuple[ast.AST, bool]] = [(tree, False)]
    inner = (ast.stmt, ast.excepthandler, ast.match_case) if statements_only else (ast.AST,)
    while todo:
        node, typing_only = todo.pop()
        yield node, typing_only
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            todo.extend((n, True) for n in node.body)
            todo.extend((n, typing_only) for n in node.orelse)
            continue
        todo.extend((n, typing_only) for n in ast.iter_child_nodes(node) if isinstance(n, inner))


def _resolve(node: ast.ImportFrom, package: str) -> str:
    """The absolute module an ``ImportFrom`` reads from (relative ones against ``package``)."""
    if not node.level:
        return node.module or ""
    base = package.split(".")
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _literal_head(arg: ast.expr) -> str | None:
    """A string literal, or the package an f-string's literal head names (``f"a.b.{x}"`` → a.b)."""
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    if isinstance(arg, ast.JoinedStr) and arg.values:
        head = arg.values[0]
        if isinstance(head, ast.Constant) and isinstance(head.value, str) and "." in head.value:
            return head.value.rpartition(".")[0]
    return None


def _dynamic_import(node: ast.Call, package: str) -> str | None:
    """The module ``importlib.import_module(...)`` or ``__import__(...)`` names, if literal."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    if name not in ("import_module", "__import__") or not node.args:
        return None
    module = _literal_head(node.args[0])
    if module is None or not module.startswith("."):
        return module
    anchor = node.args[1] if len(node.args) > 1 else None
    for kw in node.keywords:
        anchor = kw.value if kw.arg == "package" else anchor
    base = _literal_head(anchor) if anchor is not None else package
    if base is None:
        return None
    dots = len(module) - len(module.lstrip("."))
    parts = base.split(".")
    return ".".join([*parts[: len(parts) - (dots - 1)], module.lstrip(".")]).rstrip(".")


def _bound_modules(tree: ast.AST, pkg: Package) -> dict[str, str]:
    """Local names bound to one of the package's modules by ``import p[.x] [as q]``."""
    bound: dict[str, str] = {}
    for node, _ in _walk(tree, statements_only=True):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == pkg.name:
                    bound[a.asname or pkg.name] = a.name if a.asname else pkg.name
    return bound


def _attribute_chain(node: ast.Attribute) -> tuple[str, list[str]] | None:
    """``q.a.b`` → ("q", ["a", "b"]); None unless the chain starts at a plain name."""
    attrs: list[str] = []
    cur: ast.expr = node
    while isinstance(cur, ast.Attribute):
        attrs.append(cur.attr)
        cur = cur.value
    return (cur.id, attrs[::-1]) if isinstance(cur, ast.Name) else None


def _names_read(node: ast.AST, pkg: Package, bound: dict[str, str]) -> set[str]:
    """``q.X`` (a lazy public name) and ``q.x.y`` (a module) through a bound package name."""
    if not isinstance(node, ast.Attribute) or isinstance(getattr(node, "ctx", None), ast.Store):
        return set()
    chain = _attribute_chain(node)
    if chain is None or chain[0] not in bound:
        return set()
    base, attrs = bound[chain[0]], chain[1]
    out = {".".join([base, *attrs[:i]]) for i in range(1, len(attrs) + 1)}
    if base == pkg.name and attrs[0] in pkg.exports:
        out.add(pkg.exports[attrs[0]])
    return out


def _imported(node: ast.AST, pkg: Package, package: str) -> set[str]:
    """The modules one node imports (candidates: kept only where they exist)."""
    if isinstance(node, ast.Import):
        return {a.name for a in node.names}
    if isinstance(node, ast.ImportFrom):
        module = _resolve(node, package)
        out = {module}
        for a in node.names:
            if module == pkg.name and a.name in pkg.exports:
                out.add(pkg.exports[a.name])
            else:
                out.add(f"{module}.{a.name}")  # a submodule, where one exists
        return out
    if isinstance(node, ast.Call):
        module = _dynamic_import(node, package)
        return {module} if module else set()
    return set()


def edges(path: Path, pkg: Package) -> Edges:
    """Every module of ``pkg`` the file at ``path`` imports, in any form (the module docstring)."""
    here = pkg.module_of(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text)
    bound = _bound_modules(tree, pkg)
    # imports are statements; calls and attribute reads are looked for where the text has them
    every_node = bool(bound) or "import_module" in text or "__import__" in text
    runtime: set[str] = set()
    typing: set[str] = set()
    for node, typing_only in _walk(tree, statements_only=not every_node):
        found = _imported(node, pkg, package) | _names_read(node, pkg, bound)
        (typing if typing_only else runtime).update(found)
    # the package's own __init__ (its lazy names) belongs to no layer: only its modules count
    keep = {m for m in runtime | typing if "." in m and pkg.exists(m) and m != here}
    return Edges(frozenset(runtime & keep), frozenset((typing - runtime) & keep))


def layer_violations(pkg: Package, rank: dict[str, int]) -> list[str]:
    """Every import (run time or typing) from a layer into one at its rank or above."""
    wrong = []
    for path in pkg.files():
        rel = path.relative_to(pkg.root)
        if len(rel.parts) == 1:
            continue  # the package's __init__ (lazy names for the Python API) and __main__
        layer = rel.parts[0]
        assert layer in rank, f"{rel}: a package the layer table does not know"
        for target in sorted(edges(path, pkg).all):
            to = target.split(".")[1] if "." in target else ""
            if to in rank and to != layer and rank[to] >= rank[layer]:
                wrong.append(f"{rel.as_posix()} imports {target}")
    return wrong


def import_graph(pkg: Package) -> dict[str, set[str]]:
    """module → the modules it imports at run time (deferred imports in function bodies
    included: a cycle through them is still a knot in the design; typing-only ones are not)."""
    return {pkg.module_of(p): set(edges(p, pkg).runtime) for p in pkg.files()}


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[frozenset[str]] = []
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
                found.append(frozenset(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


# ---------------------------------------------------------------- the finder on a package of its own
#: one file per import form, in ``toy/cli/`` (the top layer) unless it is the deliberate upward
#: import: the source, and the module the finder must report
FORMS = {
    "from_name.py": ("from toy import build_thing\n", "toy.mid.thing"),
    "from_module.py": ("from toy.mid import thing\n", "toy.mid.thing"),
    "from_package.py": ("from toy import low\n", "toy.low"),
    "import_as.py": ("import toy.mid.thing as t\n", "toy.mid.thing"),
    "relative_dot.py": ("from . import helper\n", "toy.cli.helper"),
    "relative_up.py": ("from ..mid import thing\n", "toy.mid.thing"),
    "relative_up_name.py": ("from ..low.base import VALUE\n", "toy.low.base"),
    "import_module.py": (
        "import importlib\n\nimportlib.import_module('toy.low.base')\n",
        "toy.low.base",
    ),
    "import_module_relative.py": (
        "from importlib import import_module\n\nimport_module('..low.base', package='toy.cli')\n",
        "toy.low.base",
    ),
    "dunder_import.py": ("__import__('toy.low.base')\n", "toy.low.base"),
    "fstring.py": ("import importlib\n\nimportlib.import_module(f'toy.mid.{1}')\n", "toy.mid"),
    "in_function.py": (
        "def f():\n    from toy.mid import thing\n    return thing\n",
        "toy.mid.thing",
    ),
    "bound_attr.py": ("import toy as q\n\nq.build_thing()\n", "toy.mid.thing"),
    "bound_module_attr.py": ("import toy\n\ntoy.low.base.VALUE\n", "toy.low.base"),
}
#: an upward import (low → mid) at run time, and another (low → cli) for typing only
UPWARD = "from toy.mid.thing import build_thing\n"
UPWARD_TYPING = (
    "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from toy.cli import helper\n"
)
TOY_RANK = {"low": 0, "mid": 1, "cli": 2}


def _toy(root: Path) -> Package:
    files = {
        "__init__.py": "_EXPORTS: dict[str, str] = {'build_thing': 'toy.mid.thing'}\n",
        "low/__init__.py": "",
        "low/base.py": "VALUE = 1\n",
        "mid/__init__.py": "",
        "mid/thing.py": "from toy.low.base import VALUE\n\n\ndef build_thing():\n    return VALUE\n",
        "cli/__init__.py": "",
        "cli/helper.py": "",
        **{f"cli/{name}": src for name, (src, _) in FORMS.items()},
    }
    for rel, text in files.items():
        (root / "toy" / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / "toy" / rel).write_text(text, encoding="utf-8")
    return Package.at(root / "toy")


@pytest.mark.parametrize("form", sorted(FORMS))
def test_the_finder_sees_every_form_once(tmp_path: Path, form: str) -> None:
    pkg = _toy(tmp_path)
    want = FORMS[form][1]
    got = edges(pkg.root / "cli" / form, pkg)
    assert want in got.runtime and not got.typing, (form, got)


def test_the_finder_catches_an_upward_import_at_run_time_and_for_typing(tmp_path: Path) -> None:
    pkg = _toy(tmp_path)
    assert layer_violations(pkg, TOY_RANK) == []
    (pkg.root / "low" / "up.py").write_text(UPWARD, encoding="utf-8")
    (pkg.root / "low" / "up_typing.py").write_text(UPWARD_TYPING, encoding="utf-8")
    assert layer_violations(pkg, TOY_RANK) == [
        "low/up.py imports toy.mid.thing",
        "low/up_typing.py imports toy.cli",
        "low/up_typing.py imports toy.cli.helper",
    ]
    # the typing import is no run-time edge: it makes no cycle with a run-time import back
    typing_only = edges(pkg.root / "low" / "up_typing.py", pkg)
    assert typing_only.runtime == frozenset() and typing_only.typing == {
        "toy.cli",
        "toy.cli.helper",
    }
    (pkg.root / "cli" / "helper.py").write_text("from toy.low import up_typing\n")
    assert cycles(import_graph(pkg)) == []
    # a run-time import back from low → mid closes one
    (pkg.root / "mid" / "back.py").write_text("from toy.low import up\n", encoding="utf-8")
    (pkg.root / "low" / "up.py").write_text("from toy.mid import back\n", encoding="utf-8")
    assert cycles(import_graph(pkg)) == [frozenset({"toy.low.up", "toy.mid.back"})]


def test_the_finder_reads_no_names_as_modules(tmp_path: Path) -> None:
    """A name imported from a module, a store into an attribute, another package's import and a
    non-literal ``import_module`` are no edges of their own."""
    pkg = _toy(tmp_path)
    probe = pkg.root / "cli" / "probe.py"
    probe.write_text(
        "import json\nimport importlib\nimport toy\nfrom toy.low.base import VALUE\n"
        "toy.anything = 1\nimportlib.import_module(json.dumps('toy.mid'))\n",
        encoding="utf-8",
    )
    assert edges(probe, pkg) == Edges(frozenset({"toy.low.base"}), frozenset())


def test_the_cycle_finder_finds_cycles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"d"}}
    assert cycles(graph) == [frozenset("abc")]
    assert cycles({"a": {"b"}, "b": set()}) == []


# ---------------------------------------------------------------- alphagate's own rules
def test_imports_point_down_the_layers() -> None:
    wrong = layer_violations(Package.at(SRC / "alphagate"), RANK)
    assert not wrong, wrong


def test_no_import_cycle_between_files() -> None:
    found = cycles(import_graph(Package.at(SRC / "alphagate")))
    assert not found, f"import cycles between files: {[sorted(c) for c in found]}"


def test_the_lazy_public_names_are_read_from_the_package() -> None:
    """The finder's copy of ``_EXPORTS`` is the one ``alphagate.__getattr__`` resolves."""
    import alphagate

    assert Package.at(SRC / "alphagate").exports == alphagate._EXPORTS


def test_theory_does_not_print_or_open_files() -> None:
    import inspect

    import alphagate.theory as theory_pkg

    for name in theory_pkg.__all__:
        obj = getattr(theory_pkg, name)
        if inspect.isfunction(obj):
            src = inspect.getsource(obj)
            assert not re.search(r"(?<![\w.])(print|open)\(", src), name


# ---------------------------------------------------------------- what a fresh interpreter loads
@pytest.mark.integration
def test_theory_and_sim_import_no_torch_or_http() -> None:
    code = (
        "import sys, alphagate.theory, alphagate.specs, alphagate.sim.sweep, alphagate.sim.closed_loop; "
        f"bad = [m for m in {FORBIDDEN!r} if m in sys.modules]; "
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"alphagate.theory pulled in: {out.stdout.strip()}"


@pytest.mark.integration
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


@pytest.mark.integration
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
