"""The scoring pipeline: a model, the featurizer for it and the aggregator that scores its features.

:func:`build_pipeline` builds it in order: the model and the feature switches (:class:`FeatureSetup`), then the
aggregator resolved for that setup (:mod:`syncheck.aggregators.resolve`), then the featurizer that feeds the
aggregator. :class:`~syncheck.scorer.Scorer` (and the live monitor through it) takes the finished pipeline, so no
part of it is resolved against a half-built scorer.

>>> pipeline = build_pipeline("smollm2-135m", ScorerConfig(aggregator="default"))   # doctest: +SKIP
>>> scorer = Scorer.from_pipeline(pipeline)                                          # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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
from syncheck.scorer_config import ScorerConfig


@dataclass(frozen=True)
class FeatureSetup:
    """The model and the switches that decide which features are computed (what an aggregator is checked against).

    Attributes: as the fields of :class:`~syncheck.scorer_config.ScorerConfig` of the same names; ``lm`` is the
    loaded model, ``alignment`` the built backend and ``lid`` the loaded reference set.
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
        config: the settings it was built from.
    """

    setup: FeatureSetup
    featurizer: SentenceFeaturizer
    aggregator: Any | None
    aggregator_source: str | None
    probes: tuple[Any, ...]
    final_model: Any | None
    response_aggregation: Any
    config: ScorerConfig | None = None


def _alignment(spec: AlignmentScorer | str | None) -> AlignmentScorer | None:
    """An ``align_score`` backend from a spec (see :func:`features.alignment.make_alignment_scorer`)."""
    if spec is None or not isinstance(spec, str):
        return spec
    from syncheck.alignment import make_alignment_scorer

    return make_alignment_scorer(spec)


def build_setup(model: Any = DEFAULT_MODEL, tokenizer: Any = None, config: ScorerConfig | None = None,
                **settings: Any) -> FeatureSetup:
    """The loaded model and its feature switches (``config``, :class:`ScorerConfig`; keywords override its fields)."""
    config = ScorerConfig.with_overrides(config, settings)
    lm = load_model(model, tokenizer, device=config.device, dtype=config.dtype)
    backend = _alignment(config.alignment)
    lid = config.lid
    if lid == "auto":
        lid = load_or_build(lm, config.lid_layers)
    if config.lookback:
        enable_lookback(lm.model)
    return FeatureSetup(lm, backend, config.align_with_question, lid, config.kl, config.kl_threshold, config.lookback,
                        config.text_checks)


def build_pipeline(model: Any = DEFAULT_MODEL, tokenizer: Any = None, config: ScorerConfig | None = None,
                   **settings: Any) -> ScoringPipeline:
    """The model, its featurizer and its aggregator, built in that order from ``config`` (:class:`ScorerConfig`;
    keywords override its fields, as :class:`~syncheck.scorer.Scorer`'s do)."""
    config = ScorerConfig.with_overrides(config, settings)
    features = build_setup(model, tokenizer, config)
    vectors = config.vectors
    vector_layers: list[int] = []
    if vectors is True:
        vector_layers = default_probe_layers(features.lm.num_layers)
    elif vectors:
        vector_layers = [int(x) for x in vectors]
    resolved = resolve_aggregator(config.aggregator, features)
    final_model = resolve_final_model(config.final_scores, resolved.model, features, resolved.probes)
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
            config.response_aggregation, final_model if final_model is not None else resolved.model),
        config=config,
    )


__all__ = ["FeatureSetup", "ScorerConfig", "ScoringPipeline", "build_pipeline", "build_setup"]
