"""Apply an aggregator to sentence feature dicts: the one step offline scoring and the live monitor share.

- :func:`score_sentences`: ``n`` feature dicts -> ``(n,)`` P(faithful).
- :func:`aggregate_response`: sentence scores -> one response score (``min``: the least faithful
  sentence decides; ``mean``).
- :func:`resolve_aggregator`: what ``Scorer(aggregator=...)`` accepts -> an estimator checked against
  the features the scorer produces.
"""

from __future__ import annotations

import math
import warnings
from importlib import resources
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

RESPONSE_AGGREGATIONS = ("min", "mean")
DEFAULT_SPEC = "default"


class FeatureMismatchError(ValueError):
    """The aggregator expects features the scorer does not produce (or a value is missing / NaN)."""


def default_aggregator_dir() -> Path:
    """Directory of the aggregator shipped with syncheck (trained for the default model ``smollm2-135m``)."""
    return Path(str(resources.files("syncheck.data").joinpath("aggregators", "default")))


def feature_hint(name: str, trained_with: Mapping[str, Any] | None = None) -> str:
    """How to make a scorer produce feature ``name`` (one hint covers all ``lid_layer_<L>``)."""
    cfg = dict(trained_with or {})
    if name.startswith("lid_layer_"):
        where = f" (model {cfg.get('model')!r}, LID layers {cfg.get('lid_layers')})" if cfg.get("model") else ""
        return ("lid_layer_<L>: enable LID (drop --no-lid; Scorer(lid='auto') or an LID reference with those layers) "
                f"with the model the aggregator was trained for{where}")
    if name in ("mean_contrastive_kl", "large_kl_pos", "pmi_min", "pmi_mean", "pmi_negative_share"):
        return "KL and PMI features: enable the without-context pass (drop --no-kl; Scorer(kl=True))"
    if name in ("lookback_ratio", "lookback_lens"):
        return f"{name}: record attention to the context (--lookback; Scorer(lookback=True))"
    if name in ("unsupported_specifics", "novel_bigram_share"):
        return f"{name}: enable the string checks (drop --no-text-checks; Scorer(text_checks=True))"
    if name == "hidden_probe":
        return ("hidden_probe: the aggregator must carry its probe (probes.safetensors), fitted on this model's hidden "
                "states; retrain it for this model")
    if name == "align_score":
        return f"align_score: enable --alignment {cfg.get('alignment') or 'lexical'} (Scorer(alignment=...))"
    if name in ("min_prob", "mean_prob", "max_entropy", "mean_entropy"):
        return f"{name}: syncheck's Scorer always computes it; score the rows with `syncheck score` / Scorer"
    return f"{name}: not a feature syncheck's scorer computes; retrain without it (`syncheck train --features ...`)"


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
        raise ValueError(f"the aggregator's classes are {classes}; train it with labels 1 (faithful) and 0 (unfaithful)")
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


def aggregate_response(scores: Sequence[float], how: str = "min") -> float | None:
    """One response score from its sentence scores (``None`` for a response with no scored sentence)."""
    if how not in RESPONSE_AGGREGATIONS:
        raise ValueError(f"response aggregation must be one of {RESPONSE_AGGREGATIONS}, got {how!r}")
    values = [float(s) for s in scores if s is not None]
    if not values:
        return None
    return float(min(values)) if how == "min" else float(np.mean(values))


class EstimatorScoreModel:
    """Adapter giving any fitted scikit-learn classifier the ``score_features`` method the featurizer calls."""

    def __init__(self, estimator: Any) -> None:
        self.estimator = estimator
        self.feature_names_in_ = getattr(estimator, "feature_names_in_", None)
        self.meta = getattr(estimator, "meta", {})

    def score_features(self, features: Sequence[Mapping[str, float]]) -> np.ndarray:
        return score_sentences(self.estimator, features)


def scorer_config(scorer: Any) -> dict[str, Any]:
    """The parts of a :class:`~syncheck.scorer.Scorer` an aggregator's features depend on (stored in meta.json)."""
    lid = getattr(scorer, "lid", None)
    alignment = getattr(scorer, "alignment", None)
    return {
        "model": getattr(getattr(scorer, "lm", None), "name", None),
        "alignment": getattr(alignment, "name", None) if alignment is not None else None,
        "align_with_question": bool(getattr(getattr(scorer, "featurizer", None), "align_with_question", False)),
        "lid_layers": list(lid.layers) if lid is not None else None,
        "lid_k": int(lid.k) if lid is not None else None,
        "kl": bool(getattr(scorer, "kl", False)),
        "kl_threshold": getattr(scorer, "kl_threshold", None),
        "lookback": bool(getattr(scorer, "lookback", False)),
        "text_checks": bool(getattr(getattr(scorer, "featurizer", None), "text_checks", False)),
    }


def resolve_aggregator(spec: Any, scorer: Any) -> Any | None:
    """What ``Scorer(aggregator=spec)`` uses: an object with ``score_features``, or ``None``.

    Args:
        spec: ``"default"`` (the aggregator shipped for the default model; skipped
            with a warning when the scorer does not produce its features), a
            directory written by ``syncheck train``, a fitted estimator, or ``None``.
        scorer: the scorer (its ``feature_names`` and configuration are checked).

    Raises:
        FeatureMismatchError: an explicitly given aggregator needs features the scorer does not produce.
    """
    from syncheck.aggregators.io import load_aggregator

    if spec is None:
        return None
    if isinstance(spec, str) and spec == DEFAULT_SPEC:
        if not (default_aggregator_dir() / "meta.json").is_file():
            warnings.warn("no faithfulness score: syncheck's default aggregator is not installed "
                          "(retrain it: python -m benchmarks.ragtruth.train_default)", UserWarning, stacklevel=3)
            return None
        agg = load_aggregator(default_aggregator_dir())
        probes = usable_probes(agg, scorer)
        produced = list(scorer.feature_names) + [p.name for p in probes]
        missing = [n for n in expected_features(agg) if n not in set(produced)]
        if missing:
            warnings.warn(
                f"no faithfulness score: the default aggregator (trained for {agg.meta['scorer'].get('model')!r}) needs "
                f"{', '.join(missing)}, which this scorer does not produce. Pass aggregator=None (--aggregator none) "
                "to silence this, or train one for this setup with `syncheck train`.",
                UserWarning, stacklevel=3)
            return None
    elif isinstance(spec, (str, Path)):
        agg = load_aggregator(spec)
        probes = usable_probes(agg, scorer)
        check_features(agg, list(scorer.feature_names) + [p.name for p in probes], "this scorer")
    elif hasattr(spec, "predict_proba"):
        agg = spec
        probes = usable_probes(agg, scorer)
        check_features(agg, list(scorer.feature_names) + [p.name for p in probes], "this scorer")
        positive_column(agg)
    else:
        raise ValueError(f"aggregator must be 'default', a directory, a fitted estimator or None, got {type(spec).__name__}")
    _warn_on_config_drift(agg, scorer_config(scorer))
    if probes:
        attach_probes(scorer.featurizer, probes)
    return agg if hasattr(agg, "score_features") else EstimatorScoreModel(agg)


def usable_probes(agg: Any, scorer: Any) -> list[Any]:
    """The aggregator's probes (``agg.probes``) whose input this scorer can compute for its model.

    A ``lookback_lens`` probe needs ``Scorer(lookback=True)``; a ``hidden_probe``
    needs layers and a hidden size this model has. Probes that cannot run are
    left out, so their feature shows up as missing with a hint.
    """
    from features.sentence import HIDDEN_VECTOR, LOOKBACK_VECTOR

    out = []
    for probe in getattr(agg, "probes", None) or []:
        if probe.input == LOOKBACK_VECTOR and not getattr(scorer, "lookback", False):
            continue
        if probe.input == HIDDEN_VECTOR:
            layers = list(probe.layers or [])
            try:
                width = scorer.lm.model.get_input_embeddings().weight.shape[1]
                depth = scorer.lm.num_layers
            except (AttributeError, ValueError):  # no model whose hidden states could be read
                continue
            if not layers or max(layers) > depth or len(probe.coef_) != len(layers) * width:
                continue
        out.append(probe)
    return out


def attach_probes(featurizer: Any, probes: Sequence[Any]) -> None:
    """Make ``featurizer`` compute each probe's feature (and pool the hidden layers a hidden-state probe reads)."""
    from features.sentence import HIDDEN_VECTOR

    featurizer.probes = list(probes)
    for probe in probes:
        if probe.input == HIDDEN_VECTOR:
            if featurizer.keep_vectors and featurizer.vector_layers and list(featurizer.vector_layers) != list(probe.layers):
                warnings.warn(f"keeping hidden vectors of the probe's layers {list(probe.layers)}, not "
                              f"{list(featurizer.vector_layers)}", UserWarning, stacklevel=4)
            featurizer.vector_layers = list(probe.layers)


def _warn_on_config_drift(agg: Any, current: Mapping[str, Any]) -> None:
    trained = (getattr(agg, "meta", None) or {}).get("scorer") or {}
    drift = [f"{k} {trained[k]!r} (now {current.get(k)!r})" for k in ("model", "alignment", "align_with_question", "lid_layers")
             if trained.get(k) is not None and current.get(k) is not None and trained.get(k) != current.get(k)]
    if drift:
        warnings.warn(
            "the aggregator was trained on features from a different scorer setup: " + ", ".join(drift)
            + "; its scores may be miscalibrated. Retrain with `syncheck train` on features from this setup.",
            UserWarning,
            stacklevel=4,
        )
