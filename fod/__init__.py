"""fod: faithfulness-oriented decoding (SynCheck paper, Algorithm 1) over the syncheck live monitor.

Importing this package loads no model.

- :class:`fod.generator.FODGenerator` — backtracking + threshold-pruned sentence-level beam search.
- :mod:`fod.baselines` — greedy, abstention, reranking, context-aware decoding (CAD) and AdaCAD, same interface.
- :class:`fod.config.FODConfig` — the settings every one of them takes.
"""

from __future__ import annotations

from syncheck._lazy import lazy_getattr

_LAZY = {
    "__version__": "syncheck.build_info",  # one version for syncheck and fod: pyproject.toml's
    "FODGenerator": "fod.generator",
    "FODConfig": "fod.config",
    "GenerationResult": "fod.results",
    "SentenceEvent": "fod.results",
    "GreedyGenerator": "fod.baselines",
    "AbstainGenerator": "fod.baselines",
    "RerankGenerator": "fod.baselines",
    "CADGenerator": "fod.baselines",
    "AdaCADGenerator": "fod.baselines",
}

__getattr__ = lazy_getattr(__name__, _LAZY)

__all__ = [name for name in _LAZY if not name.startswith("_")]
