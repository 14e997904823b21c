"""Alignment backends by spec: those that run a causal LM here, every other one by
:func:`features.alignment.make_alignment_scorer`.

``features/`` runs no causal LM (it is the bottom layer and never imports ``syncheck``): ``llm-judge[:MODEL]`` is
:class:`syncheck.model.llm_judge.LLMJudgeScorer` and ``probe:DIR`` is :class:`syncheck.model.probe_verifier.
ProbeScorer`, each LM loaded by :func:`syncheck.model.models.load_model` (aliases, GGUF files, the cache,
``HF_HUB_OFFLINE``).

A spec that names one of syncheck's own models without a directory (``verifier``, ``reader``, ``probe``) means the
one shipped in the package: its directory comes from :mod:`syncheck.shipped_models` and is passed down.
"""

from __future__ import annotations

from typing import Any

from features.alignment import AlignmentScorer, parse_alignment_spec
from features.alignment import make_alignment_scorer as _make
from syncheck.shipped_models import ALIGNMENT_DEFAULTS, shipped_model_dir


def make_alignment_scorer(spec: AlignmentScorer | str, **kwargs: Any) -> AlignmentScorer:
    """:func:`features.alignment.make_alignment_scorer`, and the backends that run a causal LM: ``llm-judge[:MODEL]``
    (default ``smollm2-135m``) as :class:`~syncheck.model.llm_judge.LLMJudgeScorer` loaded by
    :func:`~syncheck.model.models.load_model`, and ``probe:DIR`` (a head on the LM it names) as
    :class:`~syncheck.model.probe_verifier.ProbeScorer` (``model=`` passes its LM already loaded). ``verifier``,
    ``reader`` and ``probe`` without a directory are the shipped ones (:data:`syncheck.shipped_models.
    ALIGNMENT_DEFAULTS`)."""
    kind, arg = parse_alignment_spec(spec) if isinstance(spec, str) else ("", "")
    if kind in ALIGNMENT_DEFAULTS and not arg:
        arg = str(shipped_model_dir(ALIGNMENT_DEFAULTS[kind]))
        spec = f"{kind}:{arg}"
    if kind == "llm-judge":
        from syncheck.model.llm_judge import LLMJudgeScorer

        return LLMJudgeScorer(arg or "smollm2-135m", **kwargs)
    if kind == "probe":
        from syncheck.model.probe_verifier import ProbeScorer

        return ProbeScorer(arg, **kwargs)
    return _make(spec, **kwargs)


__all__ = ["make_alignment_scorer"]
