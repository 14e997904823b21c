"""Linear probes: a sentence's vector (pooled hidden states, per-head lookback ratios) -> P(faithful).

A probe turns a vector that no aggregator could take whole into one scalar
feature the aggregator combines with the rest:

- ``hidden_probe``: the mean hidden state of the sentence's tokens at a few
  middle layers (Azaria and Mitchell's SAPLMA idea, with a linear probe);
- ``lookback_lens``: the lookback ratio of every head (Lookback Lens).

A probe belongs to one model (its layers and hidden size). It is fitted only
on training rows: :func:`fit_probe` returns the probe fitted on all of them
*and* out-of-fold scores for the same rows (folds grouped by source), which
are what the aggregator is trained on, so the aggregator never sees a probe
score of a row that probe was fitted on. It is stored with its aggregator as
safetensors (no pickle); see :mod:`syncheck.aggregators.io`.

Sign convention of every probe feature: ``+`` (it is a probability of being faithful).
"""

from __future__ import annotations

import warnings
from typing import Any, Mapping, Sequence

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.utils.validation import check_is_fitted, validate_data

from features.registry import FEATURES
from syncheck.fitting import out_of_fold_predict, sigmoid

#: probe feature name -> the sentence vector it reads (:mod:`features.registry`).
PROBE_INPUTS = {f.name: f.vector for f in FEATURES if f.probe}
#: Relative depths of the layers the hidden-state probe reads (15, 18, 22 of SmolLM2's 30; 16, 19, 24 of 32).
PROBE_DEPTHS = (0.5, 0.6, 0.75)


def default_probe_layers(num_layers: int) -> list[int]:
    """Three middle-to-late layers (1-based) at :data:`PROBE_DEPTHS` of the model's depth."""
    return sorted({min(num_layers, max(1, int(d * num_layers))) for d in PROBE_DEPTHS})


class LinearProbe(ClassifierMixin, BaseEstimator):
    """Logistic regression on standardised vectors, with strong L2 regularisation (``C``).

    Args:
        name: the feature it produces (``hidden_probe`` or ``lookback_lens``).
        layers: for ``hidden_probe``, the hidden layers whose mean states are
            concatenated, in order (part of the probe: another layer order is another probe).
        C: inverse regularisation strength (vectors have hundreds of dimensions and
            training sets a few thousand sentences).

    Fitted state: ``mean_``, ``scale_``, ``coef_`` ``(d,)``, ``intercept_``;
    ``P(faithful) = sigmoid(((x - mean_) / scale_) @ coef_ + intercept_)``.
    """

    def __init__(self, name: str = "hidden_probe", layers: Sequence[int] | None = None, C: float = 0.003,
                 max_iter: int = 2000, random_state: int | None = 0) -> None:
        self.name = name
        self.layers = layers
        self.C = C
        self.max_iter = max_iter
        self.random_state = random_state

    @property
    def input(self) -> str:
        """The sentence vector this probe reads (see :func:`features.sentence_features.sentence_vectors`)."""
        try:
            return PROBE_INPUTS[self.name]
        except KeyError:
            raise ValueError(f"unknown probe {self.name!r}; choose from {sorted(PROBE_INPUTS)}") from None

    def fit(self, X: Any, y: Any) -> "LinearProbe":
        """``X`` ``(n, d)`` vectors, ``y`` ``(n,)`` 1 = faithful / 0 = unfaithful."""
        self.input  # validates the name
        X, y = validate_data(self, X, y, ensure_all_finite=True, dtype=np.float64)
        classes = np.unique(y)
        if set(classes.tolist()) != {0, 1}:
            raise ValueError(f"a probe needs labels 0 (unfaithful) and 1 (faithful), got {classes.tolist()}")
        self.classes_ = classes
        self.mean_ = X.mean(axis=0)
        scale = X.std(axis=0)
        self.scale_ = np.where(scale > 0, scale, 1.0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            lr = LogisticRegression(C=self.C, max_iter=self.max_iter, random_state=self.random_state)
            lr.fit((X - self.mean_) / self.scale_, y)
        self.coef_ = lr.coef_.ravel().astype(np.float64)
        self.intercept_ = float(lr.intercept_[0])
        return self

    def predict_proba(self, X: Any) -> np.ndarray:
        """``(n, d)`` -> ``(n, 2)``: P(unfaithful), P(faithful)."""
        check_is_fitted(self, "coef_")
        X = validate_data(self, X, reset=False, ensure_all_finite=True, dtype=np.float64)
        p1 = sigmoid(((X - self.mean_) / self.scale_) @ self.coef_ + self.intercept_)
        return np.column_stack([1.0 - p1, p1])

    def predict(self, X: Any) -> np.ndarray:
        return (self.predict_proba(X)[:, 1] >= 0.5).astype(np.int64)

    def score_vectors(self, vectors: Sequence[Mapping[str, np.ndarray]]) -> np.ndarray:
        """One P(faithful) per sentence, from each sentence's :attr:`input` vector."""
        if not vectors:
            return np.zeros(0, dtype=np.float64)
        missing = [i for i, v in enumerate(vectors) if self.input not in v]
        if missing:
            raise ValueError(f"sentence {missing[0] + 1} has no {self.input!r} vector for probe {self.name!r}")
        return self.predict_proba(np.stack([np.asarray(v[self.input], dtype=np.float64) for v in vectors]))[:, 1]

    def state(self) -> dict[str, np.ndarray]:
        """The fitted arrays, for safetensors."""
        return {"mean": self.mean_, "scale": self.scale_, "coef": self.coef_, "intercept": np.array([self.intercept_])}

    def config(self) -> dict[str, Any]:
        """What ``meta.json`` stores besides the arrays."""
        return {"name": self.name, "input": self.input, "layers": list(self.layers) if self.layers else None,
                **{k: v for k, v in self.get_params().items() if k not in ("name", "layers")}}

    @classmethod
    def from_state(cls, config: Mapping[str, Any], state: Mapping[str, np.ndarray]) -> "LinearProbe":
        params = {k: v for k, v in config.items() if k in ("name", "layers", "C", "max_iter", "random_state")}
        probe = cls(**params)
        probe.mean_, probe.scale_, probe.coef_ = state["mean"], state["scale"], state["coef"]
        probe.intercept_ = float(state["intercept"][0])
        probe.n_features_in_ = len(probe.coef_)
        probe.classes_ = np.array([0, 1])
        return probe


def fit_probe(probe: LinearProbe, X: np.ndarray, y: np.ndarray, groups: Sequence, folds: int = 5,
              seed: int = 0) -> tuple[LinearProbe, np.ndarray]:
    """The probe fitted on all rows, and its out-of-fold P(faithful) for each row
    (:func:`syncheck.fitting.out_of_fold_predict`: ``folds`` shuffled folds grouped by ``groups``, seeded
    by ``seed``).

    Rows that cannot be scored out of fold (fewer than two groups; a fold whose training part lacks a class) get 0.5.
    """
    from sklearn.base import clone

    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.int64)
    oof = out_of_fold_predict(lambda: clone(probe), X, y, groups, folds, seed, fill=0.5)
    return clone(probe).fit(X, y), oof
