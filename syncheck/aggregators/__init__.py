"""Aggregators: sentence features -> probability that the sentence is faithful (SynCheck-LR/XGB/MLP).

>>> from syncheck.aggregators import make_aggregator, save_aggregator, load_aggregator
>>> agg = make_aggregator("mlp", feature_names=names).fit(X, y)     # doctest: +SKIP
>>> save_aggregator(agg, "my-aggregator")                           # doctest: +SKIP
>>> load_aggregator("my-aggregator").score_features([s.features for s in result.sentences])  # doctest: +SKIP

Labels are 1 = faithful, 0 = unfaithful. See :mod:`.base` for what every
aggregator shares (scaling, feature names, tuned threshold) and :mod:`.io`
for the on-disk format (JSON / XGBoost JSON / safetensors, never pickle).
"""

from syncheck.aggregators.apply import (
    RESPONSE_AGGREGATIONS,
    FeatureMismatchError,
    aggregate_response,
    check_features,
    feature_matrix,
    resolve_response_aggregation,
    score_sentences,
)
from syncheck.aggregators.base import BaseAggregator
from syncheck.aggregators.boosted import XGBAggregator
from syncheck.aggregators.final import final_sentence_scores
from syncheck.aggregators.io import (
    KINDS,
    load_aggregator,
    load_final_model,
    make_aggregator,
    read_meta,
    save_aggregator,
)
from syncheck.aggregators.linear import LogisticAggregator
from syncheck.aggregators.mlp import MLPAggregator
from syncheck.aggregators.resolve import (
    default_aggregator_dir,
    portable_aggregator_dir,
    resolve_aggregator,
    scorer_config,
    shipped_aggregator_dirs,
)
from syncheck.aggregators.response import ResponseVerdict, load_response_model, pad_scores, save_response_model

__all__ = [
    "final_sentence_scores",
    "load_final_model",
    "KINDS",
    "RESPONSE_AGGREGATIONS",
    "BaseAggregator",
    "FeatureMismatchError",
    "LogisticAggregator",
    "MLPAggregator",
    "ResponseVerdict",
    "XGBAggregator",
    "aggregate_response",
    "check_features",
    "default_aggregator_dir",
    "feature_matrix",
    "load_aggregator",
    "load_response_model",
    "make_aggregator",
    "pad_scores",
    "portable_aggregator_dir",
    "shipped_aggregator_dirs",
    "read_meta",
    "resolve_aggregator",
    "resolve_response_aggregation",
    "save_aggregator",
    "save_response_model",
    "score_sentences",
    "scorer_config",
]
