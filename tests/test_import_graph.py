"""The import graph between the files of features/, syncheck/ and fod/ has no circle, and points down the layers.

A circle is counted over the imports that run when a module is imported: those at module level and in class bodies
(inside ``if``/``try``/``with`` blocks too), not those inside functions (they run later) nor those under
``if TYPE_CHECKING:`` (they never run). The layering counts every import, wherever it stands: features/ imports
neither syncheck nor fod, and syncheck/ never imports fod.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("features", "syncheck", "fod")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_files() -> dict[str, Path]:
    """Module name -> its file, for every module of ours."""
    return {module_name(p): p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _import_nodes(body: list[ast.stmt], everywhere: bool) -> list[ast.Import | ast.ImportFrom]:
    """The import statements of ``body``: with ``everywhere``, all of them; else those that run at import time."""
    if everywhere:
        return [n for stmt in body for n in ast.walk(stmt) if isinstance(n, (ast.Import, ast.ImportFrom))]
    out: list[ast.Import | ast.ImportFrom] = []
    for stmt in body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            out.append(stmt)
        elif isinstance(stmt, ast.If):
            if not _is_type_checking(stmt.test):
                out += _import_nodes(stmt.body, False)
            out += _import_nodes(stmt.orelse, False)
        elif isinstance(stmt, ast.Try):
            for block in (stmt.body, *(h.body for h in stmt.handlers), stmt.orelse, stmt.finalbody):
                out += _import_nodes(block, False)
        elif isinstance(stmt, (ast.With, ast.ClassDef)):
            out += _import_nodes(stmt.body, False)
    return out


def imports_of(path: Path, modules: dict[str, Path], everywhere: bool = False) -> list[tuple[str, int]]:
    """The modules of ours that ``path`` imports, each with its line: the file an import loads (``from a import b``
    names module ``a.b`` when that is a module, else ``a``)."""
    module = module_name(path)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    out = []
    for node in _import_nodes(ast.parse(path.read_text(encoding="utf-8")).body, everywhere):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            base = node.module or ""
            if node.level:  # relative: resolve against the package
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        for target in targets:
            if target.split(".")[0] not in PACKAGES:
                continue
            while target and target not in modules:  # `import a.b.c` of a name that is no module: its module
                target = target.rpartition(".")[0]
            if target and target != module:
                out.append((target, node.lineno))
    return out


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One circle of ``graph`` (its nodes in order, the first repeated at the end), or ``None``."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)) is not None:
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)) is not None:
            return found
    return None


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    return {m: {t for t, _ in imports_of(p, modules)} for m, p in modules.items()}


def test_no_import_circle_between_files():
    modules = module_files()
    cycle = find_cycle(import_graph(modules))
    assert cycle is None, "import circle: " + " -> ".join(
        str(modules[m].relative_to(ROOT)) for m in cycle)


def test_layers():
    """Nothing in features/ imports syncheck or fod; nothing in syncheck/ imports fod."""
    forbidden = {"features": ("syncheck", "fod"), "syncheck": ("fod",), "fod": ()}
    modules = module_files()
    wrong = []
    for module, path in modules.items():
        top = module.split(".")[0]
        for target, line in imports_of(path, modules, everywhere=True):
            if target.split(".")[0] in forbidden[top]:
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {target}")
    assert not wrong, "imports against the layer order:\n" + "\n".join(wrong)


def test_the_graph_sees_a_circle(tmp_path, monkeypatch):
    """The check itself: a circle through a relative import and a class body is found; TYPE_CHECKING and
    function-level imports are not counted."""
    pkg = tmp_path / "syncheck"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("", encoding="utf-8")
    (pkg / "a.py").write_text("from . import b\n", encoding="utf-8")
    (pkg / "b.py").write_text("class B:\n    from syncheck.c import C\n", encoding="utf-8")
    (pkg / "c.py").write_text("from syncheck.a import x\n", encoding="utf-8")
    (pkg / "d.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from syncheck import e\n"
                              "def f():\n    from syncheck.e import y\n", encoding="utf-8")
    (pkg / "e.py").write_text("import syncheck.d\n", encoding="utf-8")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    modules = {module_name(p): p for p in sorted(pkg.rglob("*.py"))}
    graph = import_graph(modules)
    assert graph["syncheck.d"] == set() and graph["syncheck.e"] == {"syncheck.d"}
    assert find_cycle(graph) == ["syncheck.a", "syncheck.b", "syncheck.c", "syncheck.a"]
    assert imports_of(modules["syncheck.d"], modules, everywhere=True) == [("syncheck.e", 3), ("syncheck.e", 5)]
