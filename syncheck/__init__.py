"""syncheck: sentence-level faithfulness monitoring for retrieval-augmented LLMs.

Importing this package loads no model. Main entry points:

- :class:`syncheck.scorer.Scorer` — offline per-sentence SynCheck features.
- :func:`syncheck.models.load_model` — load a model by alias, hub id, path or GGUF file.
- :func:`syncheck.calibrate.calibrate` — fit and register an aggregator for one model.
"""

from __future__ import annotations

__version__ = "0.2.0"

_LAZY = {
    "Scorer": "syncheck.scorer",
    "load_model": "syncheck.models",
    "LoadedModel": "syncheck.models",
    "ScoredResponse": "syncheck.results",
    "ScoredSentence": "syncheck.results",
    "LIDReference": "syncheck.lid_reference",
    "Monitor": "syncheck.monitor",
    "SynCheckLogitsProcessor": "syncheck.logits_processor",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'syncheck' has no attribute {name!r}")


__all__ = list(_LAZY)
