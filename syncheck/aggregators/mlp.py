"""SynCheck-MLP: one hidden layer of 100 ReLU units (SynCheck, Appendix A.2).

Trained with scikit-learn's :class:`~sklearn.neural_network.MLPClassifier`
(Adam, learning rate 1e-3, batch 128, at most 300 epochs, L2 ``alpha``); the
weights are then kept as plain arrays and the forward pass runs in numpy, so
a model restored from safetensors predicts exactly as the trained one.
"""

from __future__ import annotations

import warnings
from typing import Any, Sequence

import numpy as np
from sklearn.neural_network import MLPClassifier

from syncheck.aggregators.base import BaseAggregator
from syncheck.fitting import sigmoid


class MLPAggregator(BaseAggregator):
    """Two-layer perceptron with the scaler and tuned threshold of :class:`BaseAggregator`.

    Fitted state: ``W1_`` ``(d, h)``, ``b1_`` ``(h,)``, ``W2_`` ``(h,)``,
    ``b2_`` (float); ``P(faithful) = sigmoid(relu(xs @ W1_ + b1_) @ W2_ + b2_)``
    on standardised ``xs``.
    """

    kind = "mlp"

    def __init__(
        self,
        feature_names: Sequence[str] | None = None,
        hidden_size: int = 100,
        learning_rate: float = 1e-3,
        batch_size: int = 128,
        max_iter: int = 300,
        alpha: float = 1e-4,
        tune_threshold: bool = True,
        validation_fraction: float = 0.2,
        random_state: int | None = 0,
    ) -> None:
        self.feature_names = feature_names
        self.hidden_size = hidden_size
        self.learning_rate = learning_rate
        self.batch_size = batch_size
        self.max_iter = max_iter
        self.alpha = alpha
        self.tune_threshold = tune_threshold
        self.validation_fraction = validation_fraction
        self.random_state = random_state

    def _make_model(self) -> Any:
        return _QuietMLP(
            hidden_layer_sizes=(self.hidden_size,),
            activation="relu",
            solver="adam",
            learning_rate_init=self.learning_rate,
            batch_size=self.batch_size,
            max_iter=self.max_iter,
            alpha=self.alpha,
            random_state=self.random_state,
        )

    def _export(self, model: Any) -> None:
        self.W1_ = np.asarray(model.coefs_[0], dtype=np.float64)
        self.b1_ = np.asarray(model.intercepts_[0], dtype=np.float64)
        self.W2_ = np.asarray(model.coefs_[1], dtype=np.float64).ravel()
        self.b2_ = float(np.ravel(model.intercepts_[1])[0])
        self.n_iter_ = int(model.n_iter_)

    def _positive_proba(self, Xs: np.ndarray) -> np.ndarray:
        hidden = np.maximum(Xs @ self.W1_ + self.b1_, 0.0)
        return sigmoid(hidden @ self.W2_ + self.b2_)


class _QuietMLP(MLPClassifier):
    """MLPClassifier that does not warn when ``batch_size`` exceeds a small training set (it clips it)."""

    def fit(self, X, y, **kw):  # type: ignore[override]
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*batch_size.*", category=UserWarning)
            return super().fit(X, y, **kw)
