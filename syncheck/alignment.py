"""Alignment backends by spec: the LLM judge here, every other one by :func:`features.alignment.make_alignment_scorer`.

``features/`` runs no causal LM (it is the bottom layer and never imports ``syncheck``): ``llm-judge[:MODEL]`` is
:class:`syncheck.model.llm_judge.LLMJudgeScorer`, loaded by :func:`syncheck.model.models.load_model` (aliases, GGUF
files, the cache, ``HF_HUB_OFFLINE``).
"""

from __future__ import annotations

from typing import Any

from features.alignment import AlignmentScorer, parse_alignment_spec
from features.alignment import make_alignment_scorer as _make


def make_alignment_scorer(spec: AlignmentScorer | str, **kwargs: Any) -> AlignmentScorer:
    """:func:`features.alignment.make_alignment_scorer`, and ``llm-judge[:MODEL]`` (default ``smollm2-135m``) as
    :class:`~syncheck.model.llm_judge.LLMJudgeScorer` loaded by :func:`~syncheck.model.models.load_model`."""
    if isinstance(spec, str) and parse_alignment_spec(spec)[0] == "llm-judge":
        from syncheck.model.llm_judge import LLMJudgeScorer

        return LLMJudgeScorer(parse_alignment_spec(spec)[1] or "smollm2-135m", **kwargs)
    return _make(spec, **kwargs)


__all__ = ["make_alignment_scorer"]
