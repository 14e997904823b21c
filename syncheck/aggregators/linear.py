"""SynCheck-LR: logistic regression on standardised sentence features."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from sklearn.linear_model import LogisticRegression

from syncheck.aggregators.base import BaseAggregator
from syncheck.fitting import sigmoid


class LogisticAggregator(BaseAggregator):
    """Logistic regression (L2, ``C``) with the scaler and tuned threshold of :class:`BaseAggregator`.

    Fitted state: ``coef_`` ``(d,)`` and ``intercept_`` (a float) on
    standardised features; ``P(faithful) = sigmoid(((x - mean) / scale) @ coef_ + intercept_)``.
    A positive ``coef_[j]`` means a higher feature ``j`` pushes towards faithful.
    """

    kind = "lr"

    def __init__(
        self,
        feature_names: Sequence[str] | None = None,
        C: float = 1.0,
        max_iter: int = 1000,
        tune_threshold: bool = True,
        validation_fraction: float = 0.2,
        random_state: int | None = 0,
    ) -> None:
        self.feature_names = feature_names
        self.C = C
        self.max_iter = max_iter
        self.tune_threshold = tune_threshold
        self.validation_fraction = validation_fraction
        self.random_state = random_state

    def _make_model(self) -> Any:
        return LogisticRegression(C=self.C, max_iter=self.max_iter, random_state=self.random_state)

    def _export(self, model: Any) -> None:
        self.coef_ = np.asarray(model.coef_, dtype=np.float64).ravel()
        self.intercept_ = float(np.ravel(model.intercept_)[0])
        self.n_iter_ = int(np.max(model.n_iter_))

    def _positive_proba(self, Xs: np.ndarray) -> np.ndarray:
        return sigmoid(Xs @ self.coef_ + self.intercept_)
