"""Apply an aggregator to sentence feature dicts: the one step offline scoring and the live monitor share.

- :func:`score_sentences`: ``n`` feature dicts -> ``(n,)`` P(faithful).
- :func:`aggregate_response`: sentence scores -> one response score (``learned``: the aggregator's response
  verdict, :mod:`syncheck.aggregators.response`; ``min``: the least faithful sentence decides; ``mean``);
  :func:`resolve_response_aggregation` picks what a scorer uses.

Which aggregator a scorer uses is decided in :mod:`syncheck.aggregators.resolve`.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, Mapping, Sequence

import numpy as np

from features.registry import feature_spec

RESPONSE_AGGREGATIONS = ("learned", "min", "mean")


class FeatureMismatchError(ValueError):
    """The aggregator expects features the scorer does not produce (or a value is missing / NaN)."""


def feature_hint(name: str, trained_with: Mapping[str, Any] | None = None) -> str:
    """How to make a scorer produce feature ``name`` (one hint covers all ``lid_layer_<L>``)."""
    cfg = dict(trained_with or {})
    try:
        spec = feature_spec(name)
    except KeyError:
        spec = None
    if spec is None or spec.needs == "lexical":
        return f"{name}: not a feature syncheck's scorer computes; retrain without it (`syncheck train --features ...`)"
    if spec.needs == "lid":
        where = f" (model {cfg.get('model')!r}, LID layers {cfg.get('lid_layers')})" if cfg.get("model") else ""
        return ("lid_layer_<L>: enable LID (drop --no-lid; Scorer(lid='auto') or an LID reference with those layers) "
                f"with the model the aggregator was trained for{where}")
    if spec.needs == "kl":
        return "KL and PMI features: enable the without-context pass (drop --no-kl; Scorer(kl=True))"
    if spec.needs == "lookback" or spec.vector == "lookback":
        return f"{name}: record attention to the context (--lookback; Scorer(lookback=True))"
    if spec.needs == "text_checks":
        return f"{name}: enable the string checks (drop --no-text-checks; Scorer(text_checks=True))"
    if spec.needs == "probe":
        what = {"hidden": "hidden states", "lookback": "lookback ratios"}.get(spec.vector, f"{spec.vector} vectors")
        return (f"{name}: the aggregator's probe (probes.safetensors) reads one model's {what}; fit "
                "one for this model with `syncheck calibrate --model M --data LABELLED.jsonl`")
    if spec.needs == "alignment":
        return f"{name}: enable --alignment {cfg.get('alignment') or 'lexical'} (Scorer(alignment=...))"
    return f"{name}: syncheck's Scorer always computes it; score the rows with `syncheck score` / Scorer"


def expected_features(agg: Any) -> list[str]:
    names = getattr(agg, "feature_names_in_", None)
    if names is None:
        raise FeatureMismatchError(
            "the aggregator does not know its feature names: fit it on a DataFrame, or pass feature_names=[...] "
            "to a syncheck aggregator"
        )
    return [str(n) for n in names]


def check_features(agg: Any, produced: Sequence[str], source: str = "this scorer") -> None:
    """Raise :class:`FeatureMismatchError` naming every expected feature ``produced`` lacks, with fixes."""
    missing = [n for n in expected_features(agg) if n not in set(produced)]
    if missing:
        trained_with = getattr(agg, "meta", {}).get("scorer") if hasattr(agg, "meta") else None
        hints = "; ".join(dict.fromkeys(feature_hint(n, trained_with) for n in missing))
        raise FeatureMismatchError(
            f"the aggregator needs features {source} does not produce: {', '.join(missing)}. To fix: {hints}. "
            "Or retrain it on features you do produce (`syncheck train ... --features a,b,c`)."
        )


def feature_matrix(features: Sequence[Mapping[str, float]], names: Sequence[str]) -> np.ndarray:
    """``n`` feature dicts -> ``(n, len(names))`` float64 in ``names`` order; missing or non-finite values raise."""
    X = np.empty((len(features), len(names)), dtype=np.float64)
    for i, feats in enumerate(features):
        for j, name in enumerate(names):
            value = feats.get(name)
            if value is None:
                raise FeatureMismatchError(
                    f"sentence {i + 1} has no {name!r} value (it has {sorted(feats)}). To fix: {feature_hint(name)}"
                )
            value = float(value)
            if not math.isfinite(value):
                raise FeatureMismatchError(
                    f"sentence {i + 1} has a non-finite {name!r} ({value}); aggregators need finite features: "
                    "check the model's dtype (use float32 on CPU) or drop the row"
                )
            X[i, j] = value
    return X


def positive_column(agg: Any) -> int:
    """Index of the faithful class (label 1) in ``agg.classes_``."""
    classes = list(getattr(agg, "classes_", []))
    if 1 not in classes:
        raise ValueError(
            f"the aggregator's classes are {classes}; train it with labels 1 (faithful) and 0 (unfaithful)"
        )
    return classes.index(1)


def score_sentences(agg: Any, features: Sequence[Mapping[str, float]]) -> np.ndarray:
    """``n`` sentence feature dicts -> ``(n,)`` probability that each sentence is faithful.

    ``agg`` is any fitted binary classifier with ``predict_proba``,
    ``classes_`` holding 1 (faithful) and ``feature_names_in_``; extra keys in
    the dicts are ignored, missing or non-finite ones raise
    :class:`FeatureMismatchError`.
    """
    if not features:
        return np.zeros(0, dtype=np.float64)
    X = feature_matrix(features, expected_features(agg))
    col = positive_column(agg)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="X does not have valid feature names")
        return np.asarray(agg.predict_proba(X), dtype=np.float64)[:, col]


def aggregate_response(scores: Sequence[float], how: Any = "min", model: Any = None) -> float | None:
    """One response score from its sentence scores (``None`` for a response with no scored sentence).

    Args:
        how: ``"min"``, ``"mean"``, ``"learned"`` (with ``model``), or a fitted response verdict itself (anything
            with ``predict_response(scores)``, e.g. :class:`~syncheck.aggregators.response.ResponseVerdict`): what
            :func:`resolve_response_aggregation` returns and ``Scorer.response_aggregation`` holds.
        model: the response verdict ``how="learned"`` applies.
    """
    if hasattr(how, "predict_response"):
        how, model = "learned", how
    if how not in RESPONSE_AGGREGATIONS:
        raise ValueError(f"response aggregation must be one of {RESPONSE_AGGREGATIONS}, got {how!r}")
    if how == "learned" and model is None:
        raise ValueError("response aggregation 'learned' needs the aggregator's response model (model=...); "
                         "use 'min' or 'mean' with an aggregator that has none")
    values = [float(s) for s in scores if s is not None]
    if not values:
        return None
    if how == "learned":
        return float(model.predict_response(values))
    return float(min(values)) if how == "min" else float(np.mean(values))


def resolve_response_aggregation(how: str | None, aggregator: Any) -> Any:
    """What ``Scorer(response_aggregation=how)`` aggregates with, for its resolved sentence ``aggregator``.

    ``None``: the aggregator's response verdict (``aggregator.response_model``, stored beside it as
    ``response.json``) when it has one, else ``"min"``. ``"learned"``: that verdict, or :class:`ValueError` when there
    is none. ``"min"`` / ``"mean"``: themselves. The verdict is returned as the object, so that
    ``aggregate_response(scores, result)`` applies it wherever the scorer's aggregation is passed on.
    """
    if how is not None and how not in RESPONSE_AGGREGATIONS:
        raise ValueError(f"response_aggregation must be one of {RESPONSE_AGGREGATIONS} (or None), got {how!r}")
    verdict = getattr(aggregator, "response_model", None)
    if how in (None, "learned") and verdict is not None:
        return verdict
    if how == "learned":
        raise ValueError("response_aggregation='learned', but the aggregator has no response model (response.json "
                         "beside its meta.json): use 'min' or 'mean', or fit an aggregator with one for the model "
                         "(`syncheck calibrate --model M --data LABELLED.jsonl`)")
    return how or "min"


class EstimatorScoreModel:
    """Adapter giving any fitted scikit-learn classifier the ``score_features`` method the featurizer calls."""

    def __init__(self, estimator: Any) -> None:
        self.estimator = estimator
        self.feature_names_in_ = getattr(estimator, "feature_names_in_", None)
        self.meta = getattr(estimator, "meta", {})

    def score_features(self, features: Sequence[Mapping[str, float]]) -> np.ndarray:
        return score_sentences(self.estimator, features)
