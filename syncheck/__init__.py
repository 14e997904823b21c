"""syncheck: sentence-level faithfulness monitoring for retrieval-augmented LLMs.

Importing this package loads no model. Main entry points:

- :class:`syncheck.scorer.Scorer` — offline per-sentence SynCheck features.
- :class:`syncheck.scorer_config.ScorerConfig` — the scorer's settings, one frozen, checked object.
- :class:`syncheck.checking.provenance.ProvenanceChecker` — the Provenance answer check.
- :func:`syncheck.model.models.load_model` — load a model by alias, hub id, path or GGUF file.
- :func:`syncheck.calibration.calibrate.calibrate` — fit and register an aggregator for one model.

The pipeline's stages are subpackages: :mod:`syncheck.model` (loading and running a model), :mod:`syncheck.live`
(live decoding: the monitor and the pool), :mod:`syncheck.calibration` (labels, training, calibration) and
:mod:`syncheck.checking` (the Provenance answer check); :mod:`syncheck.pipeline` builds what a scorer runs.
"""

from __future__ import annotations

from syncheck._lazy import lazy_getattr

_LAZY = {
    "__version__": "syncheck.build_info",  # pyproject.toml's, from the package metadata
    "Scorer": "syncheck.scorer",
    "ScorerConfig": "syncheck.scorer_config",
    "ProvenanceChecker": "syncheck.checking.provenance",
    "load_model": "syncheck.model.models",
    "LoadedModel": "syncheck.model.models",
    "ScoredResponse": "syncheck.results",
    "ScoredSentence": "syncheck.results",
    "LIDReference": "syncheck.lid_reference",
    "Monitor": "syncheck.live.monitor",
    "SynCheckLogitsProcessor": "syncheck.live.logits_processor",
}

__getattr__ = lazy_getattr(__name__, _LAZY)

__all__ = [name for name in _LAZY if not name.startswith("_")]
