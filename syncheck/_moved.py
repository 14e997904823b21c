"""The flat module paths that moved into the pipeline's subpackages still import, with a ``DeprecationWarning``.

``import syncheck.monitor`` gives the module ``syncheck.live.monitor`` itself, the same object under both names in
``sys.modules``, so patching an attribute through either name patches the one module. :class:`MovedFinder` (first
on ``sys.meta_path``, put there when ``syncheck`` is imported) answers only for the old names in :data:`MOVED`; the
new module is imported when the old name is, not before. The finder and its loader keep the protocols of
``importlib.abc.MetaPathFinder`` and ``importlib.abc.Loader`` without subclassing them: ``importlib.abc`` imports
``importlib.resources``, which would add to every ``import syncheck``.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
import warnings
from types import ModuleType

#: old module name -> where the module lives now
MOVED = {
    "syncheck.calibrate": "syncheck.calibration.calibrate",
    "syncheck.calibrations": "syncheck.calibration.calibrations",
    "syncheck.labels": "syncheck.calibration.labels",
    "syncheck.folds": "syncheck.calibration.folds",
    "syncheck.provenance": "syncheck.checking.provenance",
    "syncheck.support": "syncheck.checking.support",
    "syncheck.models": "syncheck.model.models",
    "syncheck.kv": "syncheck.model.kv",
    "syncheck.attention": "syncheck.model.attention",
    "syncheck.passes": "syncheck.model.passes",
    "syncheck.prompts": "syncheck.model.prompts",
    "syncheck.monitor": "syncheck.live.monitor",
    "syncheck.pool": "syncheck.live.pool",
    "syncheck.logits_processor": "syncheck.live.logits_processor",
}


class MovedLoader:
    """Loads an old name as the module at its new place (imported then), with a warning that names the new place."""

    def __init__(self, new: str) -> None:
        self.new = new
        self.spec: importlib.machinery.ModuleSpec | None = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        # stacklevel 2: the frame past this one and importlib's own (which warnings skips) is the import statement
        warnings.warn(f"{spec.name} moved to {self.new}; import it from there", DeprecationWarning, stacklevel=2)
        module = importlib.import_module(self.new)
        self.spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # the import system has just set the module's __spec__ to the old name's; the module keeps its own
        module.__spec__ = self.spec


class MovedFinder:
    """Finds the old names of :data:`MOVED`, and nothing else."""

    #: marks the finder on ``sys.meta_path``, so installing it again (a re-imported ``syncheck``) replaces it
    syncheck_moved = True

    def find_spec(self, fullname: str, path=None, target=None) -> importlib.machinery.ModuleSpec | None:
        new = MOVED.get(fullname)
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, MovedLoader(new))


def install() -> None:
    """Put :class:`MovedFinder` first on ``sys.meta_path``, once (an earlier one, of an earlier import, goes)."""
    sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, "syncheck_moved", False)]
    sys.meta_path.insert(0, MovedFinder())
