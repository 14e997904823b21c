"""Grouped out-of-fold scores: every row scored by a model that never saw its group.

The one place syncheck (and its measurements) cuts labelled rows into
cross-validation folds. A *group* is what must never be split between the
training and the test side of a fold: a source document, a record, a response.
Folds come from scikit-learn's ``GroupKFold(shuffle=True, random_state=seed)``:
the groups are shuffled by ``seed`` and dealt into ``n_splits`` folds of about
as many groups each, so a run is repeatable and another seed gives other folds.

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

#: (training row indices, test row indices) of one fold.
Fold = tuple[np.ndarray, np.ndarray]


class FoldError(ValueError):
    """Rows that cannot be scored out of fold; the message says what to add."""


def grouped_folds(groups: Sequence[Any] | np.ndarray, n_splits: int = 5, seed: int = 0) -> list[Fold]:
    """``min(n_splits, number of groups)`` shuffled folds that never split a group.

    Args:
        groups: ``(n,)`` group of each row.
        n_splits: the number of folds wanted (at least 2).
        seed: shuffles the groups before they are dealt into folds.

    Raises:
        FoldError: ``n_splits`` below 2, or fewer than two groups.
    """
    from sklearn.model_selection import GroupKFold

    groups = np.asarray(groups)
    if n_splits < 2:
        raise FoldError(f"out-of-fold scores need at least 2 folds, got n_splits={n_splits}")
    n_groups = len(np.unique(groups))
    if n_groups < 2:
        raise FoldError(f"out-of-fold scores need rows from >= 2 groups (source documents or records), got "
                        f"{n_groups}: add rows from more records, or give each row its own 'record'/'id'")
    splitter = GroupKFold(n_splits=min(n_splits, n_groups), shuffle=True, random_state=seed)
    return list(splitter.split(np.zeros((len(groups), 1)), groups=groups))


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
    """``(n,)`` scores of every row by ``fit_predict(train, test)``, over :func:`grouped_folds`.

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
    from tqdm import tqdm

    y = np.asarray(y)
    groups = np.asarray(groups)
    if len(y) != len(groups):
        raise ValueError(f"y has {len(y)} rows but groups {len(groups)}; give one group per row")
    out = np.full(len(y), np.nan if fill is None else float(fill))
    try:
        folds = grouped_folds(groups, n_splits, seed)
    except FoldError:
        if fill is None:
            raise
        return out
    extra = set(np.asarray(extra_labels).tolist())
    for train, test in tqdm(folds, desc="held-out folds", disable=not progress):
        if len(set(y[train].tolist()) | extra) < 2:
            if fill is None:
                raise FoldError("a training fold holds one label only: add labelled rows of both kinds from more "
                                "groups (documents or records), so that every fold trains on faithful and "
                                "unfaithful sentences")
            continue
        out[test] = fit_predict(train, test)
    return out


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


__all__ = ["Fold", "FoldError", "grouped_folds", "out_of_fold", "out_of_fold_predict"]
