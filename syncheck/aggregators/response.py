"""The learned response-level verdict: a response's sentence scores -> P(the whole response is faithful).

Without it, ``response_score`` is the minimum (or mean) of the sentence scores. The minimum punishes length: every
extra sentence is one more draw that can come out low, so long faithful answers look as doubtful as short
unfaithful ones. :class:`ResponseVerdict` learns the mapping instead, from response labels (RAGTruth's for the
shipped aggregators; ``syncheck calibrate`` fits one on yours): logistic regression over a few statistics of the
sentence scores
(:data:`STATS`), standardised, its weights bounded by :data:`SIGNS` so that the verdict never rises when a sentence's
score falls (an unconstrained fit put a negative weight on the minimum, collinear with the mean of the two
lowest, and did). Logistic regression's probability is close to calibrated (RESULTS.md in the source repository,
"Response verdict"); its weights are a handful of floats, saved as JSON (:func:`save_response_model`) beside the
aggregator whose sentence scores it reads, and restored by :func:`syncheck.aggregators.load_aggregator` as
``agg.response_model``.

Input: ``X`` ``(n_responses, width)``, one response per row, its sentence scores (P(faithful)) left-aligned and
padded with NaN (:func:`pad_scores`); any width works, a response longer than every training response included.
The statistics read only the scores, never the text, so every place a response score is computed (``Scorer``, the
live monitor, the server) can apply it to the scores it has.

>>> verdict = ResponseVerdict().fit(pad_scores(train_scores), train_labels)   # doctest: +SKIP
>>> verdict.predict_response([0.97, 0.41, 0.88])                              # doctest: +SKIP
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.multiclass import check_classification_targets, type_of_target
from sklearn.utils.validation import check_array, check_is_fitted, validate_data

from syncheck.build_info import without_machine_paths
from syncheck.fitting import sigmoid

FORMAT = "syncheck-response-verdict"
FORMAT_VERSION = 1
#: File name of a response model beside an aggregator's ``meta.json``.
RESPONSE_FILE = "response.json"
#: Statistics of a response's sentence scores, in column order:
#: ``min``, ``low2`` (mean of the two lowest; the min for one sentence), ``mean``, ``share_below`` and
#: ``count_below`` (sentences scored below ``tau``), ``log_sentences`` (log of 1 + the number of sentences).
STATS = ("min", "low2", "mean", "share_below", "count_below", "log_sentences")
#: Sign each statistic's weight is held to (0: free): each is monotone in every sentence score, so bounded weights
#: make the verdict non-decreasing in each sentence score. (The spread of the scores is left out: it is not.)
SIGNS = {"min": 1, "low2": 1, "mean": 1, "share_below": -1, "count_below": -1, "log_sentences": 0}
#: Scores of the ``min`` / ``low2`` / ``mean`` columns pass through logit(clip(p, EPS, 1 - EPS)) with ``link="logit"``.
EPS = 1e-4


def pad_scores(responses: Sequence[Sequence[float]]) -> np.ndarray:
    """Ragged sentence scores -> ``(n, longest)`` float64, each row left-aligned and padded with NaN."""
    width = max((len(r) for r in responses), default=0)
    out = np.full((len(responses), max(width, 1)), np.nan)
    for i, r in enumerate(responses):
        out[i, : len(r)] = np.asarray(r, dtype=np.float64)
    return out


def response_stats(X: np.ndarray, tau: float, link: str = "logit") -> np.ndarray:
    """``(n, width)`` NaN-padded sentence scores -> ``(n, len(STATS))`` statistics (see :data:`STATS`).

    Raises:
        ValueError: a row without any score, or an infinite score.
    """
    X = np.asarray(X, dtype=np.float64)
    if np.isinf(X).any():
        raise ValueError("sentence scores must be finite (NaN pads a response shorter than the widest)")
    valid = ~np.isnan(X)
    n = valid.sum(axis=1)
    if (n == 0).any():
        raise ValueError(f"row {int(np.flatnonzero(n == 0)[0])} holds no sentence score: a response needs at least "
                         "one scored sentence")
    ordered = np.sort(X, axis=1)  # NaN sorts last: the lowest scores come first
    low = ordered[:, 0]
    low2 = np.where(n > 1, (ordered[:, 0] + ordered[:, np.minimum(1, X.shape[1] - 1)]) / 2, low)
    filled = np.where(valid, X, 0.0)
    mean = filled.sum(axis=1) / n
    below = (valid & (filled < tau)).sum(axis=1).astype(np.float64)
    if link == "logit":
        low, low2, mean = (_logit(v) for v in (low, low2, mean))
    elif link != "identity":
        raise ValueError(f"link must be 'logit' or 'identity', got {link!r}")
    return np.column_stack([low, low2, mean, below / n, below, np.log1p(n)])


def _bounded_logistic(Z: np.ndarray, y: np.ndarray, C: float, max_iter: int) -> tuple[np.ndarray, float, int]:
    """L2 logistic regression (free intercept) with each weight's sign held to :data:`SIGNS`: (coef, intercept,
    iters)."""
    from scipy.optimize import minimize

    def loss(theta: np.ndarray) -> tuple[float, np.ndarray]:
        w, b = theta[:-1], theta[-1]
        z = Z @ w + b
        p = sigmoid(z)
        nll = np.sum(np.logaddexp(0.0, z) - y * z)
        grad = np.append(C * (Z.T @ (p - y)) + w, C * np.sum(p - y))
        return 0.5 * float(w @ w) + C * float(nll), grad

    bounds = [(0.0, None) if SIGNS[k] > 0 else (None, 0.0) if SIGNS[k] < 0 else (None, None) for k in STATS]
    res = minimize(loss, np.zeros(Z.shape[1] + 1), jac=True, method="L-BFGS-B", bounds=bounds + [(None, None)],
                   options={"maxiter": max_iter})
    return np.asarray(res.x[:-1], dtype=np.float64), float(res.x[-1]), int(res.nit)


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, EPS, 1.0 - EPS)
    return np.log(p) - np.log1p(-p)


class ResponseVerdict(ClassifierMixin, BaseEstimator):
    """P(response faithful) from its sentence scores: L2 logistic regression on standardised :data:`STATS`,
    sign-bounded.

    Args:
        tau: a sentence counts as doubtful below this score (``share_below``, ``count_below``); the
            default aggregator's FOD ``tau1`` is the natural choice.
        C: inverse L2 strength of the logistic regression (objective ``0.5 |w|^2 + C * sum(log loss)``, as
            scikit-learn's ``LogisticRegression``; weights bounded by :data:`SIGNS`, solved by L-BFGS-B).
        link: ``"logit"`` (default) or ``"identity"``: how ``min``, ``low2`` and ``mean`` enter.
        max_iter: solver iterations.

    Unlike most estimators it takes any number of columns at prediction (a response may be longer than every
    training response): scikit-learn's checks that predict refuses another width are expected to fail.

    Fitted state: ``stat_mean_``, ``stat_scale_``, ``coef_`` (``(len(STATS),)``), ``intercept_``, ``classes_``;
    ``P(classes_[1]) = sigmoid(((stats - stat_mean_) / stat_scale_) @ coef_ + intercept_)``. Labels: 1 = the response
    is faithful, 0 = it holds a hallucination.
    """

    def __init__(self, tau: float = 0.45, C: float = 1.0, link: str = "logit", max_iter: int = 1000) -> None:
        self.tau = tau
        self.C = C
        self.link = link
        self.max_iter = max_iter

    def fit(self, X: Any, y: Any) -> "ResponseVerdict":
        """Fit on ``X`` ``(n, width)`` NaN-padded sentence scores (:func:`pad_scores`) and labels ``y`` ``(n,)``."""
        X, y = validate_data(self, X, y, ensure_all_finite="allow-nan", dtype=np.float64)
        check_classification_targets(y)
        classes = np.unique(y)
        if len(classes) < 2:
            raise ValueError(f"only one class ({classes[0]!r}) is present in y: the response verdict needs faithful "
                             "(1) and hallucinated (0) responses")
        if type_of_target(y, input_name="y") != "binary":
            raise ValueError("Only binary classification is supported: label responses 1 (faithful) or 0 "
                             "(hallucinated).")
        self.classes_ = classes
        S = response_stats(X, self.tau, self.link)
        self.stat_mean_ = S.mean(axis=0)
        scale = S.std(axis=0)
        self.stat_scale_ = np.where(scale > 0, scale, 1.0)
        self.coef_, self.intercept_, self.n_iter_ = _bounded_logistic(
            (S - self.stat_mean_) / self.stat_scale_, (y == classes[1]).astype(np.float64), self.C, self.max_iter)
        return self

    def predict_proba(self, X: Any) -> np.ndarray:
        """``(n, width)`` NaN-padded sentence scores, any width -> ``(n, 2)``: P(classes_[0]), P(classes_[1])."""
        check_is_fitted(self, "coef_")
        X = check_array(X, ensure_all_finite="allow-nan", dtype=np.float64)
        p1 = sigmoid((response_stats(X, self.tau, self.link) - self.stat_mean_) / self.stat_scale_ @ self.coef_
                     + self.intercept_)
        return np.column_stack([1.0 - p1, p1])

    def predict(self, X: Any) -> np.ndarray:
        """Labels: ``classes_[1]`` where ``P(classes_[1]) >= 0.5``."""
        p1 = self.predict_proba(X)[:, 1]
        return self.classes_[(p1 >= 0.5).astype(np.int64)]

    def predict_response(self, scores: Sequence[float]) -> float:
        """One response's sentence scores -> P(the response is faithful)."""
        return float(self.predict_proba(pad_scores([list(scores)]))[0, 1])

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        tags.input_tags.allow_nan = True
        return tags


# ---------------------------------------------------------------------------- JSON, no pickle
def response_model_state(model: ResponseVerdict) -> dict[str, Any]:
    """A fitted verdict as JSON-able data (floats keep their repr digits, so the round trip is exact)."""
    check_is_fitted(model, "coef_")
    return {"format": FORMAT, "format_version": FORMAT_VERSION, "stats": list(STATS), "params": model.get_params(),
            "classes": [c.item() if hasattr(c, "item") else c for c in model.classes_],
            "stat_mean": model.stat_mean_.tolist(), "stat_scale": model.stat_scale_.tolist(),
            "coef": model.coef_.tolist(), "intercept": model.intercept_}


def response_model_from_state(state: Mapping[str, Any]) -> ResponseVerdict:
    """The verdict :func:`response_model_state` described."""
    if state.get("format") != FORMAT or int(state.get("format_version", 0)) > FORMAT_VERSION:
        raise ValueError(f"not a syncheck response verdict of a known version (format {state.get('format')!r}, "
                         f"version {state.get('format_version')!r}); upgrade syncheck to read it")
    if list(state["stats"]) != list(STATS):
        raise ValueError(f"the response verdict was fitted on statistics {state['stats']}, this syncheck computes "
                         f"{list(STATS)}; refit the aggregator with its verdict "
                         "(`syncheck calibrate --model M --data LABELLED.jsonl`)")
    model = ResponseVerdict(**state["params"])
    model.classes_ = np.asarray(state["classes"])
    model.stat_mean_ = np.asarray(state["stat_mean"], dtype=np.float64)
    model.stat_scale_ = np.asarray(state["stat_scale"], dtype=np.float64)
    model.coef_ = np.asarray(state["coef"], dtype=np.float64)
    model.intercept_ = float(state["intercept"])
    return model


def save_response_model(
    model: ResponseVerdict, directory: str | Path, training: Mapping[str, Any] | None = None
) -> Path:
    """Write ``response.json`` (weights and a description of the training data, its machine paths reduced to file
    names) into ``directory``; returns it."""
    state = response_model_state(model)
    if training:
        state["training"] = without_machine_paths(dict(training))
    path = Path(directory) / RESPONSE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(state, indent=1) + "\n", encoding="utf-8")
    return path


def load_response_model(directory: str | Path) -> ResponseVerdict | None:
    """The verdict stored in ``directory`` (an aggregator's), or ``None`` when it has none."""
    path = Path(directory) / RESPONSE_FILE
    if not path.is_file():
        return None
    state = json.loads(path.read_text(encoding="utf-8"))
    model = response_model_from_state(state)
    model.training_ = state.get("training", {})
    return model


__all__ = [
    "RESPONSE_FILE", "SIGNS", "STATS", "ResponseVerdict", "load_response_model", "pad_scores",
    "response_model_from_state", "response_model_state", "response_stats", "save_response_model",
]
