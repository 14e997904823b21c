"""No import circle anywhere in the repository: the modules of syncheck/, fod/, features/ and benchmarks/ import one
another (at the top or inside a function) along a graph with no cycle, so each can be read, and moved, on its own;
benchmarks/README.md gives every benchmarks/ module a line; and no benchmark reaches into another benchmark's private
names: what several share lives in :data:`SHARED`."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("syncheck", "fod", "features", "benchmarks")
#: the one private module of benchmarks/ that the others may import private names from (none here: its helpers are
#: public names of a private module)
SHARED = "benchmarks._common"


def modules() -> dict[str, Path]:
    """``{dotted name: path}`` of every module of :data:`PACKAGES` (a package by its ``__init__.py``)."""
    out = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "__pycache__" in path.parts or "runs" in path.relative_to(ROOT).parts:
                continue
            parts = path.relative_to(ROOT).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def imported_from(node: ast.ImportFrom, package: str) -> str:
    """The dotted module a ``from ... import`` in ``package`` names, a relative one resolved against ``package``."""
    if not node.level:
        return node.module or ""
    anchor = package
    for _ in range(node.level - 1):
        anchor = anchor.rpartition(".")[0]
    return f"{anchor}.{node.module}" if node.module else anchor


def import_graph(mods: dict[str, Path]) -> dict[str, set[str]]:
    """``{module: the modules of the repository it imports}``; ``from a import b`` counts ``a.b`` when b is one."""

    def known(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in mods}
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = imported_from(node, package)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            else:
                continue
            for target in targets:
                found = known(target) if target.split(".")[0] in PACKAGES else None
                if found and found != name:
                    graph[name].add(found)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_circle_in_the_repository():
    found = circles(import_graph(modules()))
    assert not found, "modules that import one another (move the shared part into the lower one):\n" + "\n".join(
        " <-> ".join(c) for c in found)


def test_the_check_finds_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_benchmarks_readme_lists_every_module():
    listing = (ROOT / "benchmarks" / "README.md").read_text(encoding="utf-8")
    names = sorted(name.removeprefix("benchmarks.") for name, path in modules().items()
                   if name.startswith("benchmarks.") and path.name != "__init__.py")
    missing = [name for name in names if f"- `{name}`:" not in listing]
    assert not missing, "benchmarks/README.md lists no line for: " + ", ".join(missing)


def private_imports(name: str, source: str) -> list[str]:
    """Where the benchmarks module ``name`` (its text ``source``) uses a private (``_x``) name of another benchmarks
    module than :data:`SHARED`: ``from benchmarks.x import _y``, or ``_y`` read off a benchmarks module it imported."""
    package = name.rpartition(".")[0]
    bound: dict[str, str] = {}  # local name -> the benchmarks module it stands for
    found = []
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "benchmarks":
                    bound[alias.asname or alias.name] = alias.name
        elif isinstance(node, ast.ImportFrom):
            base = imported_from(node, package)
            if base.split(".")[0] != "benchmarks":
                continue
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    if base not in (SHARED, name):
                        found.append(f"{name}:{node.lineno} imports {alias.name} from {base}")
                else:
                    bound[alias.asname or alias.name] = f"{base}.{alias.name}"
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                and isinstance(node.value, ast.Name) and node.value.id in bound
                and bound[node.value.id] not in (SHARED, name)):
            found.append(f"{name}:{node.lineno} reads {node.attr} of {bound[node.value.id]}")
    return found


def test_no_benchmark_imports_another_benchmarks_private_name():
    found = [hit for name, path in modules().items() if name.startswith("benchmarks")
             for hit in private_imports(name, path.read_text(encoding="utf-8"))]
    assert not found, f"move the shared helper into {SHARED} and import it from there:\n" + "\n".join(found)


def test_the_check_finds_a_private_import():
    assert private_imports("benchmarks.a", "from benchmarks.b import c, _d\n") == [
        "benchmarks.a:1 imports _d from benchmarks.b"]
    assert private_imports("benchmarks.ragtruth.a", "from .b import _d\n") == [
        "benchmarks.ragtruth.a:1 imports _d from benchmarks.ragtruth.b"]
    assert private_imports("benchmarks.a", "from benchmarks import b\nb._d()\n") == [
        "benchmarks.a:2 reads _d of benchmarks.b"]
    assert private_imports("benchmarks.a", f"from {SHARED} import percentile\nfrom benchmarks.b import c\n") == []
    assert private_imports("benchmarks.a", "from benchmarks.a import _self\nfrom syncheck.x import _y\n") == []
