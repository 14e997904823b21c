"""Statistics shared by `syncheck calibrate` and the measurements: ROC AUC with a (cluster) bootstrap interval, and the
paired difference of two scores' ROC AUC on the same rows."""

from __future__ import annotations

from typing import Iterator, Sequence

import numpy as np
from scipy.stats import rankdata
from sklearn.metrics import roc_auc_score


def bootstrap_auroc(
    labels: Sequence[int], scores: Sequence[float], n: int = 1000, seed: int = 0, groups: Sequence | None = None
) -> tuple[float, float, float]:
    """ROC AUC with a 95% percentile-bootstrap interval: ``(auc, lo, hi)``.

    Args:
        labels: ``(N,)`` 0/1, 1 = the positive class (e.g. faithful).
        scores: ``(N,)`` higher = more likely positive.
        n: bootstrap resamples (of the N examples, with replacement); resamples
            holding one class only are redrawn.
        seed: RNG seed.
        groups: optional ``(N,)`` cluster ids (e.g. the source record): whole
            clusters are resampled, for examples that are not independent
            (the two responses of one record, the sentences of one response).
    """
    y = np.asarray(labels, dtype=np.int64)
    s = np.asarray(scores, dtype=np.float64)
    if y.shape != s.shape or y.ndim != 1:
        raise ValueError(f"labels and scores must be 1-D of one length, got {y.shape} and {s.shape}")
    if len(np.unique(y)) < 2:
        raise ValueError("ROC AUC needs both classes among the labels")
    auc = float(roc_auc_score(y, s))
    values = [_rank_auc(y[idx], s[idx]) for idx in _resamples(y, n, seed, groups)]
    lo, hi = np.percentile(values, [2.5, 97.5])
    return auc, float(lo), float(hi)


def bootstrap_auroc_difference(
    labels: Sequence[int], a: Sequence[float], b: Sequence[float], n: int = 1000, seed: int = 0,
    groups: Sequence | None = None,
) -> tuple[float, float, float]:
    """``AUROC(a) - AUROC(b)`` on the same rows, with a 95% paired percentile-bootstrap interval: ``(diff, lo, hi)``.

    Both scores are read on each resample (of rows, or of whole ``groups``, as :func:`bootstrap_auroc`), so the
    interval is that of the difference, narrower than comparing two intervals.
    """
    y = np.asarray(labels, dtype=np.int64)
    sa, sb = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if not y.shape == sa.shape == sb.shape or y.ndim != 1:
        raise ValueError(f"labels and the two scores must be 1-D of one length, got {y.shape}, {sa.shape}, {sb.shape}")
    if len(np.unique(y)) < 2:
        raise ValueError("ROC AUC needs both classes among the labels")
    diff = _rank_auc(y, sa) - _rank_auc(y, sb)
    values = [_rank_auc(y[idx], sa[idx]) - _rank_auc(y[idx], sb[idx]) for idx in _resamples(y, n, seed, groups)]
    lo, hi = np.percentile(values, [2.5, 97.5])
    return float(diff), float(lo), float(hi)


def _resamples(y: np.ndarray, n: int, seed: int, groups: Sequence | None) -> Iterator[np.ndarray]:
    """``n`` bootstrap index arrays over ``y``'s rows (whole ``groups`` when given), each holding both classes
    (a one-class resample is redrawn)."""
    rng = np.random.default_rng(seed)
    clusters = _clusters(groups, len(y)) if groups is not None else None
    kept = 0
    while kept < n:
        if clusters is None:
            idx = rng.integers(0, len(y), len(y))
        else:
            idx = np.concatenate([clusters[i] for i in rng.integers(0, len(clusters), len(clusters))])
        if y[idx].min() != y[idx].max():
            kept += 1
            yield idx


def _clusters(groups: Sequence, n: int) -> list[np.ndarray]:
    """Index arrays of the resampling units, one per group."""
    if len(groups) != n:
        raise ValueError(f"groups has {len(groups)} entries for {n} examples")
    index: dict = {}
    for i, g in enumerate(groups):
        index.setdefault(g, []).append(i)
    return [np.asarray(v) for v in index.values()]


def _rank_auc(y: np.ndarray, s: np.ndarray) -> float:
    """ROC AUC by the Mann-Whitney rank sum (ties count one half), equal to ``roc_auc_score`` and ~30x faster."""
    ranks = rankdata(s)
    n1 = int(y.sum())
    n0 = len(y) - n1
    return float((ranks[y == 1].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))
