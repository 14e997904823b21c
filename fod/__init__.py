"""fod: faithfulness-oriented decoding (SynCheck paper, Algorithm 1) over the syncheck live monitor.

Importing this package loads no model.

- :class:`fod.generator.FODGenerator` — backtracking + threshold-pruned sentence-level beam search.
- :mod:`fod.baselines` — greedy, abstention, reranking, context-aware decoding (CAD) and AdaCAD, same interface.
- :class:`fod.config.FODConfig` — the settings every one of them takes.
"""

from __future__ import annotations

from syncheck._lazy import lazy_getattr

__version__ = "0.1.0"

_LAZY = {
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

__all__ = list(_LAZY)
