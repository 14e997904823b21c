"""Fit an aggregator together with the probes whose scores are among its features.

The probes are fitted first. The aggregator is then trained on each row's
*out-of-fold* probe score (folds grouped by source, :func:`syncheck.probes.fit_probe`)
beside its scalar features, so it learns how far to trust a probe on rows that
probe never saw -- which is how it will meet new text. The probes kept are
refitted on all rows.

>>> model = fit_stacked("lr", X, names, {"hidden_probe": H}, y, groups)   # doctest: +SKIP
>>> p_faithful = model.predict(X_test, {"hidden_probe": H_test})           # doctest: +SKIP
>>> save_aggregator(model.aggregator, "dir", probes=model.probes)          # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from syncheck.aggregators.base import BaseAggregator
from syncheck.aggregators.io import make_aggregator
from syncheck.fitting import out_of_fold
from syncheck.probes import LinearProbe, fit_probe


@dataclass
class StackedModel:
    """An aggregator over ``feature_names + [probe.name for probe in probes]``, and its probes."""

    aggregator: BaseAggregator
    probes: list[LinearProbe] = field(default_factory=list)

    def predict(self, X: np.ndarray, vectors: Mapping[str, np.ndarray] | None = None) -> np.ndarray:
        """P(faithful) of rows ``X`` ``(n, d)`` (scalar features in training order) with each probe's input
        matrix ``vectors[probe.name]`` ``(n, d_probe)``."""
        columns = [np.asarray(X, dtype=np.float64)]
        for probe in self.probes:
            columns.append(probe.predict_proba(_vectors_for(probe, vectors))[:, 1:])
        return self.aggregator.predict_proba(np.hstack(columns))[:, 1]


def _vectors_for(probe: LinearProbe, vectors: Mapping[str, np.ndarray] | None) -> np.ndarray:
    if not vectors or probe.name not in vectors:
        raise ValueError(f"probe {probe.name!r} needs its input vectors: pass vectors={{{probe.name!r}: (n, d) array}}")
    return np.asarray(vectors[probe.name], dtype=np.float64)


def fit_stacked(
    kind: str,
    X: np.ndarray,
    feature_names: Sequence[str],
    vectors: Mapping[str, np.ndarray] | None,
    y: np.ndarray,
    groups: Sequence,
    *,
    probes: Sequence[LinearProbe] | None = None,
    folds: int = 5,
    seed: int = 0,
    **params: Any,
) -> StackedModel:
    """Fit probes on ``vectors`` and a ``kind`` aggregator on ``X`` plus the probes' out-of-fold scores.

    Args:
        X: ``(n, d)`` scalar features, columns in ``feature_names`` order.
        vectors: ``{probe name: (n, d_probe)}``; a probe is fitted for each name present
            (``hidden_probe``, ``lookback_lens``), from ``probes`` when a template of that name is given.
        y: ``(n,)`` 1 = faithful, 0 = unfaithful.
        groups: ``(n,)`` source of each row (a document, a record): probe folds never split one.
        params: passed to the aggregator (e.g. ``tune_threshold=False``).
    """
    templates = {p.name: p for p in (probes or [])}
    columns = [np.asarray(X, dtype=np.float64)]
    names = list(feature_names)
    fitted: list[LinearProbe] = []
    for name, matrix in (vectors or {}).items():
        probe, oof = fit_probe(templates.get(name, LinearProbe(name=name)), matrix, y, groups, folds=folds, seed=seed)
        fitted.append(probe)
        columns.append(oof[:, None])
        names.append(name)
    agg = make_aggregator(kind, feature_names=names, random_state=seed, **params)
    agg.fit(np.hstack(columns), np.asarray(y, dtype=np.int64))
    return StackedModel(agg, fitted)


def out_of_fold_stacked(
    kind: str,
    X: np.ndarray,
    feature_names: Sequence[str],
    vectors: Mapping[str, np.ndarray] | None,
    y: np.ndarray,
    groups: Sequence,
    *,
    probes: Sequence[LinearProbe] | None = None,
    folds: int = 5,
    seed: int = 0,
    progress: bool = False,
    **params: Any,
) -> np.ndarray:
    """``(n,)`` P(faithful) of each row from a stacked model (probes refitted too) that never saw its group
    (:func:`syncheck.fitting.out_of_fold`: ``folds`` shuffled grouped folds, seeded by ``seed``).

    Raises:
        FoldError: fewer than two groups, or a training fold holding one label only.
    """
    y = np.asarray(y)
    groups = np.asarray(groups)
    vectors = dict(vectors or {})

    def fit_predict(train: np.ndarray, test: np.ndarray) -> np.ndarray:
        model = fit_stacked(kind, X[train], feature_names, {p: v[train] for p, v in vectors.items()}, y[train],
                            groups[train], probes=probes, folds=folds, seed=seed, tune_threshold=False, **params)
        return model.predict(X[test], {p: v[test] for p, v in vectors.items()})

    return out_of_fold(fit_predict, y, groups, folds, seed, progress=progress)
