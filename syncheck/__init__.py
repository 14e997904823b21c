"""syncheck: sentence-level faithfulness monitoring for retrieval-augmented LLMs.

Importing this package loads no model. Main entry points:

- :class:`syncheck.scorer.Scorer` — offline per-sentence SynCheck features.
- :func:`syncheck.model.models.load_model` — load a model by alias, hub id, path or GGUF file.
- :func:`syncheck.calibration.calibrate.calibrate` — fit and register an aggregator for one model.

The pipeline's stages are subpackages: :mod:`syncheck.model` (loading and running a model), :mod:`syncheck.live`
(live decoding: the monitor and the pool), :mod:`syncheck.calibration` (labels, folds, calibration) and
:mod:`syncheck.checking` (the Provenance answer check). The paths these modules had directly under
``syncheck`` still import, with a ``DeprecationWarning`` (:mod:`syncheck._moved`).
"""

from __future__ import annotations

from syncheck import _moved
from syncheck._lazy import lazy_getattr

__version__ = "0.2.0"

_moved.install()

_LAZY = {
    "Scorer": "syncheck.scorer",
    "load_model": "syncheck.model.models",
    "LoadedModel": "syncheck.model.models",
    "ScoredResponse": "syncheck.results",
    "ScoredSentence": "syncheck.results",
    "LIDReference": "syncheck.lid_reference",
    "Monitor": "syncheck.live.monitor",
    "SynCheckLogitsProcessor": "syncheck.live.logits_processor",
}

__getattr__ = lazy_getattr(__name__, _LAZY)

__all__ = list(_LAZY)
