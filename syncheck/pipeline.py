"""The scoring pipeline: a model, the featurizer for it and the aggregator that scores its features.

:func:`build_pipeline` builds it in order: the model and the feature switches (:class:`FeatureSetup`), then the
aggregator resolved for that setup (:mod:`syncheck.aggregators.resolve`), then the featurizer that feeds the
aggregator. :class:`~syncheck.scorer.Scorer` (and the live monitor through it) takes the finished pipeline, so no
part of it is resolved against a half-built scorer.

>>> pipeline = build_pipeline("smollm2-135m", aggregator="default")   # doctest: +SKIP
>>> scorer = Scorer.from_pipeline(pipeline)                            # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import torch

from features.alignment import AlignmentScorer
from features.context_influence import LARGE_KL_THRESHOLD
from features.registry import FEATURES, LID_PREFIX
from syncheck.aggregators.apply import resolve_response_aggregation
from syncheck.aggregators.resolve import probe_vector_layers, resolve_aggregator, resolve_final_model
from syncheck.featurize import SentenceFeaturizer
from syncheck.lid_reference import LIDReference, load_or_build
from syncheck.model.attention import enable_lookback
from syncheck.model.models import DEFAULT_MODEL, LoadedModel, load_model
from syncheck.probes import default_probe_layers


@dataclass(frozen=True)
class FeatureSetup:
    """The model and the switches that decide which features are computed (what an aggregator is checked against).

    Attributes: as the arguments of :class:`~syncheck.scorer.Scorer` of the same names; ``lm`` is the loaded model.
    """

    lm: LoadedModel
    alignment: AlignmentScorer | None = None
    align_with_question: bool = False
    lid: LIDReference | None = None
    kl: bool = True
    kl_threshold: float = LARGE_KL_THRESHOLD
    lookback: bool = False
    text_checks: bool = True

    @property
    def feature_names(self) -> list[str]:
        """Names of the features this setup produces, in the registry's order (before any probe)."""
        on = {"always": True, "kl": self.kl, "lookback": self.lookback, "lid": self.lid is not None,
              "text_checks": self.text_checks, "alignment": self.alignment is not None}
        names = []
        for spec in FEATURES:
            if spec.needs == "lid" and on["lid"]:
                names += [f"{LID_PREFIX}{layer}" for layer in self.lid.layers]
            elif spec.needs != "lid" and on.get(spec.needs):
                names.append(spec.name)
        return names


@dataclass(frozen=True)
class ScoringPipeline:
    """A model's features and their scores, ready to run.

    Attributes:
        setup: the model and its feature switches.
        featurizer: turns token statistics into scored sentences (probes and aggregator included).
        aggregator: the sentence aggregator (``score_features``), or ``None``.
        aggregator_source: ``"calibrated"``, ``"default"``, ``"portable"``, ``"directory"``, ``"estimator"`` or
            ``None``.
        probes: the aggregator's probes the featurizer runs.
        final_model: the aggregator's final (whole-answer) sentence model, or ``None``.
        response_aggregation: ``"min"``, ``"mean"`` or the fitted response verdict.
    """

    setup: FeatureSetup
    featurizer: SentenceFeaturizer
    aggregator: Any | None
    aggregator_source: str | None
    probes: tuple[Any, ...]
    final_model: Any | None
    response_aggregation: Any


def _alignment(spec: AlignmentScorer | str | None) -> AlignmentScorer | None:
    """An ``align_score`` backend from a spec (see :func:`features.alignment.make_alignment_scorer`)."""
    if spec is None or not isinstance(spec, str):
        return spec
    from syncheck.alignment import make_alignment_scorer

    return make_alignment_scorer(spec)


def build_setup(
    model: Any = DEFAULT_MODEL,
    tokenizer: Any = None,
    *,
    device: str | torch.device | None = None,
    dtype: torch.dtype | str = torch.float32,
    alignment: AlignmentScorer | str | None = "lexical",
    align_with_question: bool = False,
    lid: LIDReference | str | None = None,
    lid_layers: Sequence[int] | None = None,
    kl: bool = True,
    kl_threshold: float = LARGE_KL_THRESHOLD,
    lookback: bool = False,
    text_checks: bool = True,
) -> FeatureSetup:
    """The loaded model and its feature switches (arguments as :class:`~syncheck.scorer.Scorer`'s)."""
    lm = load_model(model, tokenizer, device=device, dtype=dtype)
    backend = _alignment(alignment)
    if lid == "auto":
        lid = load_or_build(lm, lid_layers)
    elif lid is not None and not isinstance(lid, LIDReference):
        raise ValueError("lid must be 'auto', None or an LIDReference")
    if lookback:
        enable_lookback(lm.model)
    return FeatureSetup(lm, backend, align_with_question, lid, kl, kl_threshold, lookback, text_checks)


def build_pipeline(
    model: Any = DEFAULT_MODEL,
    tokenizer: Any = None,
    *,
    vectors: bool | Sequence[int] = False,
    aggregator: Any = "default",
    response_aggregation: str | None = None,
    final_scores: bool | None = None,
    **setup: Any,
) -> ScoringPipeline:
    """The model, its featurizer and its aggregator, built in that order (arguments as
    :class:`~syncheck.scorer.Scorer`'s; ``setup`` takes :func:`build_setup`'s keywords)."""
    features = build_setup(model, tokenizer, **setup)
    vector_layers: list[int] = []
    if vectors is True:
        vector_layers = default_probe_layers(features.lm.num_layers)
    elif vectors:
        vector_layers = [int(x) for x in vectors]
    resolved = resolve_aggregator(aggregator, features)
    final_model = resolve_final_model(final_scores, resolved.model, features, resolved.probes)
    featurizer = SentenceFeaturizer(
        lid=features.lid, alignment=features.alignment, align_with_question=features.align_with_question,
        kl_threshold=features.kl_threshold, text_checks=features.text_checks,
        vector_layers=probe_vector_layers(resolved.probes, vector_layers, bool(vectors)),
        keep_vectors=bool(vectors), probes=list(resolved.probes), aggregator=resolved.model,
    )
    return ScoringPipeline(
        setup=features, featurizer=featurizer, aggregator=resolved.model, aggregator_source=resolved.source,
        probes=resolved.probes, final_model=final_model,
        response_aggregation=resolve_response_aggregation(
            response_aggregation, final_model if final_model is not None else resolved.model),
    )


__all__ = ["FeatureSetup", "ScoringPipeline", "build_pipeline", "build_setup"]
