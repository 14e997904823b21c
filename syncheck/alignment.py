"""Alignment backends by spec, with syncheck's model loader for the ones that need a causal LM.

:func:`features.alignment.make_alignment_scorer` builds every backend, but
``features/`` cannot load a causal LM by syncheck's model names (it is the
bottom layer and never imports ``syncheck``); this wrapper gives it :func:`syncheck.model.models.load_model`
(aliases, GGUF files, the cache,
``HF_HUB_OFFLINE``) for ``llm-judge[:MODEL]``.
"""

from __future__ import annotations

from typing import Any

from features.alignment import AlignmentScorer, parse_alignment_spec
from features.alignment import make_alignment_scorer as _make


def make_alignment_scorer(spec: AlignmentScorer | str, **kwargs: Any) -> AlignmentScorer:
    """:func:`features.alignment.make_alignment_scorer` with ``loader=syncheck.model.models.load_model`` for LLM
    judges."""
    if isinstance(spec, str) and parse_alignment_spec(spec)[0] == "llm-judge":
        from syncheck.model.models import load_model

        kwargs.setdefault("loader", load_model)
    return _make(spec, **kwargs)


__all__ = ["make_alignment_scorer"]
