"""Every benchmark whose command benchmarks/RESULTS.md states (``python -m benchmarks.X``) has a smoke test that runs
its ``main([...])`` on tiny inputs, or a reason in :data:`NOT_SMOKE_TESTED` why it cannot run cheaply. Read from the
tests' text, importing nothing."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"

#: cited benchmarks no test runs, each with why (a smoke test would need a large model, the network or hours)
NOT_SMOKE_TESTED: dict[str, str] = {}


def cited_modules(results: str) -> set[str]:
    """The benchmarks modules ``results`` (RESULTS.md's text) gives a command of, without ``benchmarks.``."""
    return set(re.findall(r"python -m benchmarks\.([A-Za-z_][\w.]*\w)", results))


def _bindings(nodes: list[ast.AST]) -> tuple[dict[str, str], dict[str, str]]:
    """``({local name: module whose main it is}, {local name: module})`` of the benchmarks imports in ``nodes``."""
    mains: dict[str, str] = {}
    modules: dict[str, str] = {}
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == "benchmarks":
            for alias in node.names:
                if alias.name == "main":
                    mains[alias.asname or "main"] = node.module
                else:
                    modules[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("benchmarks.") and alias.asname:
                    modules[alias.asname] = alias.name
    return mains, modules


def mains_called(source: str) -> set[str]:
    """The benchmarks modules whose ``main`` the test file ``source`` calls: ``from benchmarks.x import main`` (under
    any name) and a call of it, or ``x.main(...)`` on a module imported as ``from benchmarks import x``,
    ``from benchmarks.a import x`` or ``import benchmarks.x as x``; an import inside a function counts in that
    function only."""
    tree = ast.parse(source)
    functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    inner = {id(n) for f in functions for n in ast.walk(f)}
    top_mains, top_modules = _bindings([n for n in ast.walk(tree) if id(n) not in inner])
    called = set()
    for scope in [tree, *functions]:
        own = [n for n in ast.walk(scope) if scope is not tree or id(n) not in inner]
        local_mains, local_modules = _bindings(own) if scope is not tree else ({}, {})
        mains, modules = {**top_mains, **local_mains}, {**top_modules, **local_modules}
        for node in own:
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if isinstance(func, ast.Name) and func.id in mains:
                called.add(mains[func.id])
            elif (isinstance(func, ast.Attribute) and func.attr == "main" and isinstance(func.value, ast.Name)
                  and func.value.id in modules):
                called.add(modules[func.value.id])
    return {name.removeprefix("benchmarks.") for name in called}


def smoke_tested() -> set[str]:
    """The benchmarks modules some test in tests/ runs the ``main`` of."""
    return {m for path in TESTS.glob("test_*.py") for m in mains_called(path.read_text(encoding="utf-8"))}


def test_every_benchmark_results_md_cites_has_a_smoke_test_or_a_reason():
    cited = cited_modules((ROOT / "benchmarks" / "RESULTS.md").read_text(encoding="utf-8"))
    assert cited, "RESULTS.md states no `python -m benchmarks.X` command: has its format changed?"
    tested = smoke_tested()
    missing = sorted(cited - tested - set(NOT_SMOKE_TESTED))
    assert not missing, ("RESULTS.md cites benchmarks no test runs: add a smoke test calling their main([...]) on "
                         "tiny inputs, or a reason in NOT_SMOKE_TESTED: " + ", ".join(missing))
    stale = sorted((set(NOT_SMOKE_TESTED) - cited) | (set(NOT_SMOKE_TESTED) & tested))
    assert not stale, "NOT_SMOKE_TESTED names benchmarks RESULTS.md no longer cites or a test now runs: " + ", ".join(
        stale)
    assert all(reason.strip() for reason in NOT_SMOKE_TESTED.values())


def test_the_check_reads_commands_and_main_calls():
    assert cited_modules("`python -m benchmarks.ragtruth.run --folds 5`; python -m benchmarks.fod_table2.") == {
        "ragtruth.run", "fod_table2"}
    source = ("from benchmarks.a import main\nfrom benchmarks.b import main as b_main\n"
              "from benchmarks import c\nfrom benchmarks.d import e\nimport benchmarks.f as f\n"
              "from benchmarks.g import main as unused\n"
              "def test():\n    main([])\n    b_main([])\n    c.main([])\n    e.main([])\n    f.main([])\n")
    assert mains_called(source) == {"a", "b", "c", "d.e", "f"}
    two = ("def test_one():\n    from benchmarks.a import main\n    main([])\n"
           "def test_two():\n    from benchmarks.b import main\n\n"
           "def test_three():\n    from benchmarks.c import main\n    main([])\n")
    assert mains_called(two) == {"a", "c"}
