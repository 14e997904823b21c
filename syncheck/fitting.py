"""What every fit on labelled sentences shares: the logistic link and grouped out-of-fold scores.

A leaf of ``syncheck`` (numpy and scikit-learn only): the aggregators, the probes and the calibration stage
all build on it.

Out-of-fold scores: every row scored by a model that never saw its group. A
*group* is what must never be split between the training and the test side of
a fold: a source document, a record, a response. Folds come from
scikit-learn's ``GroupKFold(shuffle=True, random_state=seed)``: the groups are
shuffled by ``seed`` and dealt into ``n_splits`` folds of about as many groups
each, so a run is repeatable and another seed gives other folds. The scores
themselves come from scikit-learn's ``cross_val_predict`` over those folds.

Degenerate inputs behave the same everywhere:

- fewer groups than ``n_splits``: one fold per group (``n_splits`` is lowered);
- fewer than two groups: nothing can be held out -- :class:`FoldError`, or every
  row gets ``fill`` when the caller gives one;
- a training part holding one class only (all faithful or all unfaithful):
  :class:`FoldError`, or that fold's test rows get ``fill``.

>>> oof = out_of_fold_predict(lambda: LogisticRegression(), X, y, groups, n_splits=5, seed=0)  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
from sklearn.base import BaseEstimator

#: (training row indices, test row indices) of one fold.
Fold = tuple[np.ndarray, np.ndarray]


class FoldError(ValueError):
    """Rows that cannot be scored out of fold; the message says what to add."""


def sigmoid(z: np.ndarray) -> np.ndarray:
    """Numerically stable logistic function."""
    z = np.asarray(z, dtype=np.float64)
    out = np.empty_like(z)
    pos = z >= 0
    out[pos] = 1.0 / (1.0 + np.exp(-z[pos]))
    ez = np.exp(z[~pos])
    out[~pos] = ez / (1.0 + ez)
    return out


def group_kfold(groups: Sequence[Any] | np.ndarray, n_splits: int = 5, seed: int = 0):
    """scikit-learn's shuffled ``GroupKFold`` with ``min(n_splits, number of groups)`` folds.

    Raises:
        FoldError: ``n_splits`` below 2, or fewer than two groups.
    """
    from sklearn.model_selection import GroupKFold

    if n_splits < 2:
        raise FoldError(f"out-of-fold scores need at least 2 folds, got n_splits={n_splits}")
    n_groups = len(np.unique(np.asarray(groups)))
    if n_groups < 2:
        raise FoldError(f"out-of-fold scores need rows from >= 2 groups (source documents or records), got "
                        f"{n_groups}: add rows from more records, or give each row its own 'record'/'id'")
    return GroupKFold(n_splits=min(n_splits, n_groups), shuffle=True, random_state=seed)


def grouped_folds(groups: Sequence[Any] | np.ndarray, n_splits: int = 5, seed: int = 0) -> list[Fold]:
    """``min(n_splits, number of groups)`` shuffled folds that never split a group.

    Args:
        groups: ``(n,)`` group of each row.
        n_splits: the number of folds wanted (at least 2).
        seed: shuffles the groups before they are dealt into folds.

    Raises:
        FoldError: ``n_splits`` below 2, or fewer than two groups.
    """
    groups = np.asarray(groups)
    return list(group_kfold(groups, n_splits, seed).split(np.zeros((len(groups), 1)), groups=groups))


class _HeldOutFit(BaseEstimator):
    """One fold of :func:`out_of_fold` as a scikit-learn estimator over row indices: ``fit`` keeps the training
    rows, ``predict`` calls ``fit_predict(train, test)`` (or gives ``fill`` when the training rows hold one class)."""

    def __init__(self, fit_predict: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
                 extra_labels: tuple = (), fill: float | None = None) -> None:
        self.fit_predict = fit_predict
        self.extra_labels = extra_labels
        self.fill = fill

    def fit(self, rows: np.ndarray, y: np.ndarray) -> _HeldOutFit:
        self.train_ = rows[:, 0]
        self.one_class_ = len(set(np.asarray(y).tolist()) | set(self.extra_labels)) < 2
        if self.one_class_ and self.fill is None:
            raise FoldError("a training fold holds one label only: add labelled rows of both kinds from more "
                            "groups (documents or records), so that every fold trains on faithful and "
                            "unfaithful sentences")
        return self

    def predict(self, rows: np.ndarray) -> np.ndarray:
        if self.one_class_:
            return np.full(len(rows), float(self.fill))
        return np.asarray(self.fit_predict(self.train_, rows[:, 0]), dtype=np.float64)


def out_of_fold(
    fit_predict: Callable[[np.ndarray, np.ndarray], np.ndarray],
    y: Sequence[int] | np.ndarray,
    groups: Sequence[Any] | np.ndarray,
    n_splits: int = 5,
    seed: int = 0,
    *,
    extra_labels: Sequence[int] | np.ndarray = (),
    fill: float | None = None,
    progress: bool = False,
) -> np.ndarray:
    """``(n,)`` scores of every row by ``fit_predict(train, test)``, over :func:`grouped_folds`
    (scikit-learn's ``cross_val_predict`` with ``groups``).

    Args:
        fit_predict: fits a fresh model on the rows ``train`` (indices) and returns its ``(len(test),)``
            scores of the rows ``test``.
        y: ``(n,)`` labels, 1 = faithful, 0 = unfaithful (checked per fold: a model needs both).
        groups: ``(n,)`` group of each row; a group's rows share a fold.
        extra_labels: labels of rows ``fit_predict`` adds to every training part (never scored); they count
            when checking that a training part holds both classes.
        fill: the score of rows that cannot be scored out of fold (every row when there are fewer than two
            groups; the test rows of a fold whose training part holds one class); ``None`` raises instead.
        progress: show a progress bar over the folds.

    Raises:
        FoldError: fewer than two groups, or a training part with one class, and ``fill`` is ``None``.
    """
    from sklearn.model_selection import cross_val_predict
    from tqdm import tqdm

    y = np.asarray(y)
    groups = np.asarray(groups)
    if len(y) != len(groups):
        raise ValueError(f"y has {len(y)} rows but groups {len(groups)}; give one group per row")
    try:
        cv = group_kfold(groups, n_splits, seed)
    except FoldError:
        if fill is None:
            raise
        return np.full(len(y), float(fill))
    bar = tqdm(total=cv.get_n_splits(), desc="held-out folds", disable=not progress)

    def fit_predict_counted(train: np.ndarray, test: np.ndarray) -> np.ndarray:
        scores = fit_predict(train, test)
        bar.update()
        return scores

    held_out = _HeldOutFit(fit_predict_counted, tuple(np.asarray(extra_labels).tolist()), fill)
    rows = np.arange(len(y))[:, None]
    with bar:
        return cross_val_predict(held_out, rows, y, groups=groups, cv=cv).astype(np.float64)


def out_of_fold_predict(
    make_estimator: Callable[[], Any],
    X: np.ndarray,
    y: Sequence[int] | np.ndarray,
    groups: Sequence[Any] | np.ndarray,
    n_splits: int = 5,
    seed: int = 0,
    *,
    extra: tuple[np.ndarray, np.ndarray] | None = None,
    fill: float | None = None,
) -> np.ndarray:
    """``(n,)`` P(faithful) of each row of ``X`` from an estimator that never saw its group.

    Args:
        make_estimator: builds a fresh unfitted classifier with ``fit(X, y)`` and ``predict_proba(X)``
            (column 1 = P(faithful)), e.g. ``lambda: make_aggregator("lr", ...)``.
        X, y: ``(n, d)`` features and ``(n,)`` labels (1 = faithful).
        groups, n_splits, seed, fill: as :func:`out_of_fold`.
        extra: ``(X_extra, y_extra)`` added to every training part and never scored.

    Raises:
        FoldError: as :func:`out_of_fold`.
    """
    X = np.asarray(X)
    y = np.asarray(y)

    def fit_predict(train: np.ndarray, test: np.ndarray) -> np.ndarray:
        X_train, y_train = X[train], y[train]
        if extra is not None:
            X_train, y_train = np.vstack([extra[0], X_train]), np.concatenate([extra[1], y_train])
        return make_estimator().fit(X_train, y_train).predict_proba(X[test])[:, 1]

    return out_of_fold(fit_predict, y, groups, n_splits, seed, fill=fill,
                       extra_labels=extra[1] if extra is not None else ())


__all__ = ["Fold", "FoldError", "group_kfold", "grouped_folds", "out_of_fold", "out_of_fold_predict", "sigmoid"]
