"""syncheck.pipeline: the model, featurizer and aggregator are built before the scorer, and a scorer made from a
pipeline built beforehand scores exactly as one that builds its own (tiny model)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from syncheck.pipeline import FeatureSetup, build_pipeline
from syncheck.scorer import Scorer

CONTEXT = "The Eiffel Tower was completed in 1889. It is 330 metres tall."
RESPONSE = "The tower was completed in 1889. It is 500 metres tall."


def _scores(scorer: Scorer) -> list[tuple[float, dict]]:
    result = scorer.score(context=CONTEXT, question="When was it completed?", response=RESPONSE)
    assert result.error is None, result.error
    return [(s.score, s.features) for s in result.sentences]


def test_a_scorer_from_a_prebuilt_pipeline_scores_bit_for_bit_as_one_that_builds_it(tiny_lm):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # no aggregator is calibrated for the tiny model
        pipeline = build_pipeline(tiny_lm, lid=None, vectors=True)
        built = Scorer.from_pipeline(pipeline, batch_size=2)
        own = Scorer(tiny_lm, lid=None, vectors=True, batch_size=2)
    assert built.pipeline is pipeline and built.featurizer is pipeline.featurizer
    assert built.feature_names == own.feature_names and built.aggregator_source == own.aggregator_source
    for (a_score, a), (b_score, b) in zip(_scores(built), _scores(own), strict=True):
        assert a_score == b_score and a.keys() == b.keys()
        assert all(np.array_equal(a[k], b[k]) for k in a)


def test_the_setup_names_the_features_it_switches_on(tiny_lm):
    setup = FeatureSetup(tiny_lm)
    names = setup.feature_names
    assert "mean_contrastive_kl" in names and "align_score" not in names  # no alignment backend given
    assert "mean_contrastive_kl" not in FeatureSetup(tiny_lm, kl=False).feature_names


def test_a_pipeline_and_feature_arguments_together_are_refused(tiny_lm):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        pipeline = build_pipeline(tiny_lm, lid=None)
    with pytest.raises(TypeError, match=r"not both: pass those to build_pipeline"):
        Scorer(pipeline=pipeline, kl=False)
