"""The modules that moved into subpackages still import by their old names: the same module object, with a warning.

``syncheck._moved.MOVED`` maps each old name to the new one; no file is left at an old place, and nothing in the
repository imports an old name (this file is the one exception: it tests them).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
from pathlib import Path

import pytest

import syncheck
from syncheck import _moved
from syncheck._moved import MOVED

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def forget_old_names():
    """No old name imported yet (so importing one runs the finder), and none left behind afterwards."""
    before = {old: sys.modules.pop(old, None) for old in MOVED}
    attributes = {old: syncheck.__dict__.pop(old.split(".", 1)[1], None) for old in MOVED}
    yield
    for old, module in before.items():
        sys.modules.pop(old, None)
        if module is not None:
            sys.modules[old] = module
    for old, value in attributes.items():
        syncheck.__dict__.pop(old.split(".", 1)[1], None)
        if value is not None:
            setattr(syncheck, old.split(".", 1)[1], value)


@pytest.mark.parametrize("old", sorted(MOVED))
def test_old_name_is_the_new_module_with_a_warning(old, forget_old_names):
    new = MOVED[old]
    with pytest.warns(DeprecationWarning, match=f"^{old} moved to {new}; import it from there$"):
        module = importlib.import_module(old)
    assert module is importlib.import_module(new) is sys.modules[old] is sys.modules[new]
    assert module.__name__ == new and module.__spec__.name == new  # the module keeps its own name and spec


def test_from_old_name_import_and_attribute_access(forget_old_names):
    import syncheck.live.monitor

    with pytest.warns(DeprecationWarning, match="syncheck.monitor moved to syncheck.live.monitor") as record:
        from syncheck.monitor import Monitor
    assert Monitor is syncheck.live.monitor.Monitor
    assert record[0].filename == __file__  # the warning points at the import statement, not at importlib

    with pytest.warns(DeprecationWarning, match="syncheck.provenance moved to syncheck.checking.provenance"):
        import syncheck.provenance
    assert syncheck.provenance is syncheck.checking.provenance

    with pytest.warns(DeprecationWarning, match="syncheck.models moved to syncheck.model.models"):
        from syncheck import models
    assert models is sys.modules["syncheck.model.models"]

    with pytest.warns(DeprecationWarning, match="syncheck.folds moved to syncheck.calibration.folds"):
        from syncheck.folds import grouped_folds
    assert grouped_folds is sys.modules["syncheck.calibration.folds"].grouped_folds


def test_patching_either_name_patches_the_one_module(forget_old_names, monkeypatch):
    with pytest.warns(DeprecationWarning):
        old = importlib.import_module("syncheck.folds")
    new = importlib.import_module("syncheck.calibration.folds")
    monkeypatch.setattr(old, "grouped_folds", "patched")
    assert new.grouped_folds == "patched"


def test_public_names_of_syncheck(recwarn):
    from syncheck.live.logits_processor import SynCheckLogitsProcessor
    from syncheck.live.monitor import Monitor
    from syncheck.model.models import LoadedModel, load_model
    from syncheck.scorer import Scorer

    assert (syncheck.Monitor, syncheck.SynCheckLogitsProcessor, syncheck.load_model, syncheck.LoadedModel,
            syncheck.Scorer) == (Monitor, SynCheckLogitsProcessor, load_model, LoadedModel, Scorer)
    assert not [w for w in recwarn if "moved to" in str(w.message)]


def test_every_target_exists_and_no_file_is_left_at_an_old_place():
    for old, new in MOVED.items():
        assert old.count(".") == 1 and new.startswith("syncheck.") and new.rsplit(".", 1)[1] == old.split(".")[1]
        assert (ROOT / (new.replace(".", "/") + ".py")).is_file(), new
        assert not (ROOT / (old.replace(".", "/") + ".py")).exists(), f"{old}: a file at the old place"
        assert importlib.util.find_spec(new).origin == str(ROOT / (new.replace(".", "/") + ".py"))


def test_installing_again_keeps_one_finder():
    _moved.install()
    _moved.install()
    finders = [f for f in sys.meta_path if getattr(f, "syncheck_moved", False)]
    assert len(finders) == 1 and sys.meta_path[0] is finders[0]
    assert finders[0].find_spec("syncheck.scorer") is None and finders[0].find_spec("syncheck.model") is None


def old_imports(path: Path) -> list[str]:
    """The imports of an old name in ``path``: ``import syncheck.monitor``, ``from syncheck.monitor import x``,
    ``from syncheck import monitor``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names if a.name in MOVED]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            if node.module in MOVED:
                out.append(node.module)
            elif node.module == "syncheck":
                out += [f"syncheck.{a.name}" for a in node.names if f"syncheck.{a.name}" in MOVED]
    return out


def test_nothing_in_the_repository_imports_an_old_name():
    found = []
    for package in ("syncheck", "fod", "features", "benchmarks", "tests"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if path == Path(__file__).resolve() or "runs" in path.relative_to(ROOT).parts:
                continue
            found += [f"{path.relative_to(ROOT)}: {name}" for name in old_imports(path)]
    assert not found, "imports of a moved module by its old name:\n" + "\n".join(found)
