"""Every module imports on its own in a fresh interpreter: an import cycle or a model loaded at import time shows."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("features", "syncheck", "fod")


def modules() -> list[str]:
    out = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out.append(".".join(parts))
    return out


CHECK = """
import gc, importlib, sys
import torch

def big_modules():
    return sum(1 for o in gc.get_objects()
               if isinstance(o, torch.nn.Module) and sum(p.numel() for p in o.parameters()) > 1_000_000)

failures = []
for name in sys.argv[1:]:
    # forget every module of ours, so this one is imported first, as in a fresh interpreter (third-party
    # packages stay loaded: they cannot be part of a cycle of ours, and reloading torch would take minutes)
    for loaded in [m for m in sys.modules if m.split(".")[0] in ("features", "syncheck", "fod")]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except ImportError as exc:
        if "pip install 'syncheck[" not in str(exc):  # else: an integration whose optional extra is not installed
            failures.append(f"{name}: {exc.__class__.__name__}: {exc}")
        continue
    except Exception as exc:
        failures.append(f"{name}: {exc.__class__.__name__}: {exc}")
        continue
    if big_modules():
        failures.append(f"{name}: loads a model at import time")
print("\\n".join(failures))
sys.exit(1 if failures else 0)
"""


def test_every_module_imports_alone_without_loading_a_model():
    # two interpreters, each with every other module, run side by side: the check is mostly import time
    names = modules()
    procs = [subprocess.Popen([sys.executable, "-c", CHECK, *names[i::2]], cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for i in range(2)]
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, out + err[-2000:]


#: the applications: the CLIs, the server, and fod's adapters for the server; every other module is a core layer
APPS = ("syncheck.cli", "syncheck.serve", "fod.cli", "fod.serving")
#: what each layer may import of ours: features <- syncheck core <- fod core <- the applications
MAY_IMPORT = {
    "features": {"features"},
    "syncheck": {"features", "syncheck"},
    "fod": {"features", "syncheck", "fod"},
    "syncheck app": {"features", "syncheck", "syncheck app"},  # never fod: decoders come by entry point
    "fod app": {"features", "syncheck", "fod", "syncheck app", "fod app"},
}


def layer(module: str) -> str:
    top = module.split(".")[0]
    if any(module == a or module.startswith(a + ".") for a in APPS):
        return f"{top} app"
    return top


def imports_of(path: Path, module: str) -> list[tuple[str, int]]:
    """Every module of ours ``path`` imports, at module level or inside a function, with its line."""
    import ast

    out = []
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against the package
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            names = [f"{base}.{a.name}" if base else a.name for a in node.names]
        else:
            continue
        out += [(n, node.lineno) for n in names if n.split(".")[0] in PACKAGES]
    return out


def test_layers_point_one_way():
    """features <- syncheck core <- fod <- applications; nothing under syncheck/ or features/ imports fod."""
    wrong = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            own = layer(module)
            for imported, line in imports_of(path, module):
                if layer(imported) not in MAY_IMPORT[own]:
                    wrong.append(f"{path.relative_to(ROOT)}:{line} ({own}) imports {imported} ({layer(imported)})")
    assert not wrong, "imports against the layer order:\n" + "\n".join(wrong)


def test_layer_test_sees_an_upward_import(tmp_path):
    bad = tmp_path / "generation.py"
    bad.write_text("def f():\n    from fod.generator import FODGenerator\n", encoding="utf-8")
    (imported, line), = imports_of(bad, "syncheck.serve.generation")
    assert imported == "fod.generator.FODGenerator" and line == 2
    assert layer(imported) not in MAY_IMPORT[layer("syncheck.serve.generation")]


def test_features_never_imports_syncheck_or_fod():
    for path in (ROOT / "features").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        for bad in ("from syncheck", "import syncheck", "from fod", "import fod"):
            assert bad not in text, f"{path.relative_to(ROOT)} imports {bad.split()[-1]}: features/ is the bottom layer"


#: the floors inside syncheck/: each subpackage or top-level module ("unit") imports only units on lower floors (and
#: itself); a new module gets a floor here. 1: leaves (the standard library, numpy, scikit-learn, torch); 10 and 11:
#: the applications (the integrations, the server, and the CLI that starts it).
FLOORS = {
    "syncheck._lazy": 1,
    "syncheck.build_info": 1,
    "syncheck.cache": 1,
    "syncheck.data": 1,  # the shipped aggregators and corpora, no code
    "syncheck.decoding": 1,
    "syncheck.fitting": 1,
    "syncheck.io": 1,
    "syncheck.jsonl": 1,
    "syncheck.records": 2,
    "syncheck.results": 1,
    "syncheck.shipped_models": 1,  # the registry of the shipped models: features' manifest reader only
    "syncheck.stats": 1,
    "syncheck.user_warnings": 1,
    "syncheck": 2,  # the package: lazy names only
    "syncheck.calibration.registry": 2,  # a leaf module of a higher package: its own floor
    "syncheck.model": 2,
    "syncheck.probes": 2,
    "syncheck.aggregators": 3,
    "syncheck.alignment": 3,
    "syncheck.lid_reference": 3,
    "syncheck.featurize": 4,
    "syncheck.scorer_config": 4,
    "syncheck.pipeline": 5,
    "syncheck.scorer": 6,
    "syncheck.checking": 7,
    "syncheck.runners": 7,
    "syncheck.engines": 8,  # the runners' old path, an alias of syncheck.runners
    "syncheck.live": 7,
    "syncheck.calibration": 8,
    "syncheck.report": 9,
    "syncheck.training": 9,
    "syncheck.integrations": 10,
    "syncheck.serve": 10,
    "syncheck.cli": 11,
}


def unit(module: str) -> str:
    """The unit of syncheck that ``module`` belongs to: the longest name in :data:`FLOORS` it is or lies under (a
    module of a package may have a floor of its own), else its subpackage or top-level module."""
    parts = module.split(".")
    for n in range(len(parts), 2, -1):
        if ".".join(parts[:n]) in FLOORS:
            return ".".join(parts[:n])
    return ".".join(parts[:2])


def syncheck_units() -> dict[str, list[Path]]:
    out: dict[str, list[Path]] = {}
    for path in sorted((ROOT / "syncheck").rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        out.setdefault(unit(".".join(parts[:-1] if parts[-1] == "__init__" else parts)), []).append(path)
    return out


def upward_imports(own: str, paths: list[Path]) -> list[str]:
    """Imports (anywhere in the files, functions included) from ``paths`` of unit ``own`` to a unit of syncheck on
    the same or a higher floor."""
    wrong = []
    for path in paths:
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        for imported, line in imports_of(path, module):
            target = unit(imported)
            if imported.split(".")[0] != "syncheck" or target == own or FLOORS.get(target, 0) < FLOORS[own]:
                continue
            wrong.append(f"{path.relative_to(ROOT)}:{line} (floor {FLOORS[own]}) imports {imported} "
                         f"(floor {FLOORS.get(target)})")
    return wrong


def test_every_unit_of_syncheck_has_a_floor():
    assert not set(syncheck_units()) - set(FLOORS), "give these a floor in FLOORS: " + ", ".join(
        sorted(set(syncheck_units()) - set(FLOORS)))


@pytest.mark.parametrize("own", sorted(FLOORS))
def test_no_import_in_syncheck_runs_up_a_floor(own):
    paths = syncheck_units().get(own, [])
    assert not upward_imports(own, paths), "imports that run up a floor:\n" + "\n".join(upward_imports(own, paths))


def test_floor_test_sees_an_upward_import(tmp_path):
    bad = tmp_path / "probes.py"
    bad.write_text("def f():\n    from syncheck.aggregators.base import BaseAggregator\n", encoding="utf-8")
    (imported, line), = imports_of(bad, "syncheck.probes")
    assert line == 2 and FLOORS[unit(imported)] >= FLOORS["syncheck.probes"]


def test_a_module_with_a_floor_of_its_own_is_its_own_unit():
    assert unit("syncheck.calibration.registry.find_calibration") == "syncheck.calibration.registry"
    assert unit("syncheck.calibration.labels.read_labels") == "syncheck.calibration"
