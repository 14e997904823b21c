"""What every aggregator shares: input checks, scaling, the tuned threshold, prediction.

An aggregator maps a sentence's feature vector ``(d,)`` to the probability
that the sentence is faithful to its context. It is a binary scikit-learn
classifier (``fit`` / ``predict_proba`` / ``predict`` / ``classes_`` /
``get_params``) that

- standardises its inputs itself (the scaler is part of the fitted state);
- knows the feature names and order it expects (``feature_names_in_``: from a
  pandas DataFrame's columns, or from the ``feature_names`` parameter when it
  is fitted on a plain array);
- stores a decision threshold ``threshold_`` on ``P(classes_[1])``, chosen by
  :class:`sklearn.model_selection.TunedThresholdClassifierCV` (balanced
  accuracy on a stratified validation split of ``validation_fraction`` of
  the training rows; the model is then refitted on all rows). It is 0.5
  when that cannot be done: fewer than 5 rows of a class, or a model that is
  constant on the validation rows. ``predict`` applies ``threshold_``, so,
  as with scikit-learn's own tuned-threshold classifier, it need not agree
  with ``argmax(predict_proba)``;
- predicts from plain arrays it owns, so that :mod:`syncheck.aggregators.io`
  can save and restore it without pickle and predict identically.

Labels: ``1`` = faithful, ``0`` = unfaithful (any two labels work for
scikit-learn; syncheck's scorer needs 0/1).
"""

from __future__ import annotations

import warnings
from typing import Any, ClassVar, Sequence

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import TunedThresholdClassifierCV
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.multiclass import check_classification_targets, type_of_target
from sklearn.utils.validation import check_is_fitted, validate_data

from syncheck.aggregators.apply import score_sentences

#: Fewest rows per class for which the threshold is tuned on a validation split; below it, 0.5 is used.
MIN_ROWS_PER_CLASS_FOR_TUNING = 5


class BaseAggregator(ClassifierMixin, BaseEstimator):
    """Common machinery; subclasses set ``kind`` and implement the three hooks below.

    Subclass hooks:
        ``_make_model()``: an unfitted scikit-learn-style binary classifier
        working on standardised features.
        ``_export(model)``: copy the fitted model's parameters into ``*_``
        attributes of ``self`` (plain arrays, or an XGBoost booster).
        ``_positive_proba(Xs)``: ``(n, d)`` standardised features ->
        ``(n,)`` probability of ``classes_[1]``, from the exported state.
    """

    kind: ClassVar[str] = ""

    # ------------------------------------------------------------------ fitting
    def fit(self, X: Any, y: Any) -> "BaseAggregator":
        """Fit on ``X`` ``(n, d)`` (array or DataFrame) and binary labels ``y`` ``(n,)``."""
        X, y = validate_data(self, X, y, ensure_all_finite=True, dtype=np.float64)
        self._set_feature_names(X.shape[1])
        check_classification_targets(y)
        y_type = type_of_target(y, input_name="y", raise_unknown=True)
        classes = np.unique(y)
        if len(classes) < 2:
            raise ValueError(
                f"only one class ({classes[0]!r}) is present in y: an aggregator needs both faithful (1) and "
                "unfaithful (0) training sentences"
            )
        if y_type != "binary":
            raise ValueError(
                f"Only binary classification is supported. The type of the target is {y_type}; "
                "label sentences 1 (faithful) or 0 (unfaithful)."
            )
        self.classes_ = classes
        y01 = (y == classes[1]).astype(np.int64)
        pipe = Pipeline([("scale", StandardScaler()), ("model", self._make_model())])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)  # 300 epochs is the paper's budget, by design
            tuned = self._fit_tuned(pipe, X, y01) if self.tune_threshold else None
            if tuned is None:  # not asked for, too few rows, or a model constant on the validation rows
                pipe.fit(X, y01)
                self.threshold_ = 0.5
            else:
                pipe, self.threshold_ = tuned
        scaler: StandardScaler = pipe.named_steps["scale"]
        self.scaler_mean_ = np.asarray(scaler.mean_, dtype=np.float64)
        self.scaler_scale_ = np.asarray(scaler.scale_, dtype=np.float64)
        self._export(pipe.named_steps["model"])
        return self

    def _fit_tuned(self, pipe: Pipeline, X: np.ndarray, y01: np.ndarray) -> tuple[Pipeline, float] | None:
        """Fit with a threshold tuned on a validation split; ``None`` when that is impossible."""
        if np.bincount(y01).min() < MIN_ROWS_PER_CLASS_FOR_TUNING:
            return None
        tuner = TunedThresholdClassifierCV(
            clone(pipe),
            scoring="balanced_accuracy",
            cv=self.validation_fraction,
            refit=True,
            random_state=self.random_state,
        )
        try:
            tuner.fit(X, y01)
        except ValueError as exc:
            if "constant predictions" in str(exc):
                return None
            raise
        return tuner.estimator_, float(tuner.best_threshold_)

    def _set_feature_names(self, n_features: int) -> None:
        names = self.feature_names
        if names is None:
            return  # a DataFrame's columns (set by validate_data) or no names at all
        names = [str(n) for n in names]
        if len(names) != n_features:
            raise ValueError(f"feature_names lists {len(names)} names but X has {n_features} columns")
        seen = getattr(self, "feature_names_in_", None)
        if seen is not None and list(seen) != names:
            raise ValueError(f"X's columns {list(seen)} differ from feature_names {names}; pass one or the other")
        self.feature_names_in_ = np.asarray(names, dtype=object)

    # ------------------------------------------------------------------ predicting
    def predict_proba(self, X: Any) -> np.ndarray:
        """``(n, d)`` features -> ``(n, 2)``: ``P(classes_[0])``, ``P(classes_[1])`` (faithful)."""
        check_is_fitted(self, "threshold_")
        with warnings.catch_warnings():  # names given by the feature_names parameter: arrays are the normal input
            if self.feature_names is not None:
                warnings.filterwarnings("ignore", message="X does not have valid feature names")
            X = validate_data(self, X, reset=False, ensure_all_finite=True, dtype=np.float64)
        p1 = np.clip(self._positive_proba((X - self.scaler_mean_) / self.scaler_scale_), 0.0, 1.0)
        return np.column_stack([1.0 - p1, p1])

    def predict(self, X: Any) -> np.ndarray:
        """Labels: ``classes_[1]`` where ``P(classes_[1]) >= threshold_``."""
        p1 = self.predict_proba(X)[:, 1]
        return self.classes_[(p1 >= self.threshold_).astype(np.int64)]

    def score_features(self, features: Sequence[dict[str, float]]) -> np.ndarray:
        """``n`` sentence feature dicts -> ``(n,)`` P(faithful); see :func:`syncheck.aggregators.score_sentences`."""
        return score_sentences(self, features)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        return tags

    # ------------------------------------------------------------------ subclass hooks
    def _make_model(self) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def _export(self, model: Any) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _positive_proba(self, Xs: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError
