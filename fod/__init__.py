"""fod: faithfulness-oriented decoding (SynCheck paper, Algorithm 1) over the syncheck live monitor.

Importing this package loads no model.

- :class:`fod.generator.FODGenerator` — backtracking + threshold-pruned sentence-level beam search.
- :mod:`fod.baselines` — greedy, abstention, reranking, context-aware decoding (CAD) and AdaCAD, same interface.
"""

from __future__ import annotations

__version__ = "0.1.0"

_LAZY = {
    "FODGenerator": "fod.generator",
    "GenerationResult": "fod.results",
    "GreedyGenerator": "fod.baselines",
    "AbstainGenerator": "fod.baselines",
    "RerankGenerator": "fod.baselines",
    "CADGenerator": "fod.baselines",
    "AdaCADGenerator": "fod.baselines",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'fod' has no attribute {name!r}")


__all__ = list(_LAZY)
