"""The one training path: how syncheck fits the models that score faithfulness, and writes them.

Every fit of a saved model goes through these functions: ``syncheck calibrate``
(:mod:`syncheck.calibration.calibrate`), ``syncheck train`` and the scripts of the source repository that retrain
the shipped default aggregator, its response verdict and its final model.

- the sentence aggregator (:func:`fit_sentence_model`): the recipe of :mod:`syncheck.aggregators.recipe` (or another
  estimator kind) over scalar features, with linear probes on sentence vectors stacked under it
  (:mod:`syncheck.aggregators.stacked`); :func:`sentence_oof` gives its grouped out-of-fold scores;
- FOD's thresholds ``tau1`` / ``tau2`` (:func:`tune_decoding`), tuned on such out-of-fold scores;
- the final (whole-answer) model (:func:`fit_final_model`, :mod:`syncheck.aggregators.final`): the same recipe over the
  features and their deviations from the response's mean (``rel:<feature>``), reading the probe scores too;
- the response verdict (:func:`fit_response_verdict`, :mod:`syncheck.aggregators.response`), fitted on out-of-fold
  sentence scores against response labels.

Writing reuses the formats of :mod:`syncheck.aggregators.io` and :mod:`syncheck.aggregators.response`
(:func:`save_sentence_model`, :func:`save_final_model`, :func:`write_response_verdict`); :func:`label_counts`,
:func:`response_counts` and :func:`recipe_info` are the pieces of ``meta.json``'s ``training`` block that every
trainer writes. Seeds, parameters and row order pass through unchanged, so the same call fits the same model.

>>> probes = probe_templates(["hidden_probe"], layers=[15, 18, 22])
>>> model = fit_sentence_model(X, names, {"hidden_probe": H}, y, groups, probes=probes)      # doctest: +SKIP
>>> oof = sentence_oof(X, names, {"hidden_probe": H}, y, groups, probes=probes)             # doctest: +SKIP
>>> decoding = tune_decoding(y, oof, "out-of-fold scores")                                  # doctest: +SKIP
>>> save_sentence_model(model, "my-aggregator", training=label_counts(y), decoding=decoding)  # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from syncheck.aggregators.final import FINAL_DIR, FINAL_RELATIVE_FEATURES, relative_bases, relative_columns
from syncheck.aggregators.io import make_aggregator, save_aggregator
from syncheck.aggregators.recipe import DEFAULT_KIND, DEFAULT_PARAMS
from syncheck.aggregators.response import ResponseVerdict, pad_scores, save_response_model
from syncheck.aggregators.stacked import StackedModel, fit_stacked, out_of_fold_stacked
from syncheck.aggregators.thresholds import tune_thresholds
from syncheck.fitting import out_of_fold_predict
from syncheck.probes import LinearProbe

#: Folds of every out-of-fold score fitted here (grouped by source document or record).
FOLDS = 5


# ---------------------------------------------------------------------------- the sentence aggregator
def recipe_params(kind: str) -> dict[str, Any]:
    """The estimator parameters of the default recipe for ``kind``: its tuned ones for the recipe's own kind
    (boosted trees), the estimator's defaults (``{}``) for any other."""
    return dict(DEFAULT_PARAMS) if kind == DEFAULT_KIND else {}


def probe_templates(names: Sequence[str], layers: Sequence[int] | None = None) -> list[LinearProbe]:
    """Unfitted probes named ``names`` (``hidden_probe``, ``lookback_lens``); ``hidden_probe`` pools the hidden
    states of ``layers`` (1-based, in order: the layers the sentence vectors were pooled over)."""
    return [LinearProbe(name, layers=layers if name == "hidden_probe" else None) for name in names]


def fit_sentence_model(
    X: np.ndarray,
    names: Sequence[str],
    vectors: Mapping[str, np.ndarray] | None,
    y: np.ndarray,
    groups: Sequence[Any] | np.ndarray,
    *,
    kind: str = DEFAULT_KIND,
    params: Mapping[str, Any] | None = None,
    probes: Sequence[LinearProbe] | None = None,
    seed: int = 0,
    **overrides: Any,
) -> StackedModel:
    """The sentence aggregator fitted on every row: a ``kind`` estimator over ``X`` (columns in ``names`` order) and
    the out-of-fold score of a probe fitted on each entry of ``vectors``
    (:func:`syncheck.aggregators.stacked.fit_stacked`).

    Args:
        vectors: ``{probe name: (n, d) vectors}``; ``probes`` gives the templates (layers) of those named.
        y: ``(n,)`` 1 = faithful, 0 = unfaithful.
        groups: ``(n,)`` source document or record of each row (probe folds never split one).
        params: the estimator's parameters (default: :func:`recipe_params` of ``kind``); ``overrides`` are laid over
            them (e.g. ``tune_threshold=False``).
    """
    base = recipe_params(kind) if params is None else dict(params)
    return fit_stacked(kind, X, names, vectors, y, groups, probes=probes, seed=seed, **{**base, **overrides})


def sentence_oof(
    X: np.ndarray,
    names: Sequence[str],
    vectors: Mapping[str, np.ndarray] | None,
    y: np.ndarray,
    groups: Sequence[Any] | np.ndarray,
    *,
    kind: str = DEFAULT_KIND,
    params: Mapping[str, Any] | None = None,
    probes: Sequence[LinearProbe] | None = None,
    seed: int = 0,
    progress: bool = False,
) -> np.ndarray:
    """``(n,)`` P(faithful) of every row from the model of :func:`fit_sentence_model` fitted without its group
    (:data:`FOLDS` shuffled grouped folds seeded by ``seed``; probes are refitted in each fold). Without
    ``vectors`` each fold fits the estimator alone, its threshold tuned as when it is fitted on every row.

    Raises:
        FoldError: fewer than two groups, or a training fold holding one label only.
    """
    base = recipe_params(kind) if params is None else dict(params)
    if vectors:
        return out_of_fold_stacked(kind, X, names, vectors, y, groups, probes=probes, folds=FOLDS, seed=seed,
                                   progress=progress, **base)

    def make() -> Any:
        return make_aggregator(kind, feature_names=list(names), random_state=seed, **base)

    return out_of_fold_predict(make, X, np.asarray(y), groups, n_splits=FOLDS, seed=seed)


def tune_decoding(labels: Sequence[int] | np.ndarray, scores: Sequence[float] | np.ndarray,
                  data: str) -> dict[str, Any]:
    """FOD's ``tau1`` / ``tau2`` for an aggregator from its held-out sentence ``scores`` (the ``decoding`` block of
    ``meta.json``, :func:`syncheck.aggregators.thresholds.tune_thresholds`), ``data`` saying which scores they were.

    Raises:
        ValueError: the labels hold one class only.
    """
    decoding = tune_thresholds(labels, scores)
    decoding["data"] = data
    return decoding


def save_sentence_model(model: StackedModel, directory: str | Path, *, training: Mapping[str, Any] | None = None,
                        scorer: Mapping[str, Any] | None = None,
                        decoding: Mapping[str, Any] | None = None) -> Path:
    """Write the sentence aggregator and its probes into ``directory``
    (:func:`syncheck.aggregators.io.save_aggregator`: a verdict or final model already there is removed)."""
    return save_aggregator(model.aggregator, directory, training=training, scorer=scorer, decoding=decoding,
                           probes=model.probes)


# ---------------------------------------------------------------------------- the final (whole-answer) model
@dataclass
class FinalModel:
    """A fitted final model: ``model`` reads ``names`` (the live features, then their ``rel:`` forms) and the probe
    scores; ``oof`` holds its out-of-fold scores of the training rows when they were asked for."""

    model: StackedModel
    names: list[str]
    oof: np.ndarray | None = None

    @property
    def relative(self) -> list[str]:
        """The features it reads relative to the response's mean, in order."""
        return relative_bases(self.names)


def final_design(X: np.ndarray, names: Sequence[str], response: np.ndarray,
                 bases: Sequence[str] = FINAL_RELATIVE_FEATURES) -> tuple[np.ndarray, list[str]]:
    """The final model's training matrix: ``X`` then, for each of ``bases`` among ``names``, that column minus its
    response's mean (``response`` ``(n,)`` names each row's response); and its column names."""
    rel = relative_columns({n: X[:, i] for i, n in enumerate(names)}, response, bases)
    return np.column_stack([X, *rel.values()]), list(names) + list(rel)


def fit_final_model(
    X: np.ndarray,
    names: Sequence[str],
    response: np.ndarray,
    vectors: Mapping[str, np.ndarray] | None,
    y: np.ndarray,
    groups: Sequence[Any] | np.ndarray,
    *,
    kind: str = DEFAULT_KIND,
    params: Mapping[str, Any] | None = None,
    seed: int = 0,
    bases: Sequence[str] = FINAL_RELATIVE_FEATURES,
    out_of_fold: bool = False,
    progress: bool = False,
) -> FinalModel:
    """Fit the final model on every sentence: :func:`fit_sentence_model` over :func:`final_design` of ``X``. It reads
    the probe scores of ``vectors`` as the live aggregator does, trained on their out-of-fold scores and applied to
    the score of the probe saved beside that aggregator. With ``out_of_fold``, its :func:`sentence_oof` scores first
    (for the verdict over final scores)."""
    X_final, final_names = final_design(X, names, response, bases)
    oof = (sentence_oof(X_final, final_names, vectors, y, groups, kind=kind, params=params, seed=seed,
                        progress=progress) if out_of_fold else None)
    model = fit_sentence_model(X_final, final_names, vectors, y, groups, kind=kind, params=params, seed=seed)
    return FinalModel(model, final_names, oof)


def save_final_model(final: FinalModel, parent: str | Path, *, training: Mapping[str, Any] | None = None,
                     scorer: Mapping[str, Any] | None = None) -> Path:
    """Write the final model into ``parent/final`` beside the aggregator whose features it reads (its probes stay
    with that aggregator); returns that directory."""
    return save_aggregator(final.model.aggregator, Path(parent) / FINAL_DIR, training=training, scorer=scorer)


# ---------------------------------------------------------------------------- the response verdict
def fit_response_verdict(scores: np.ndarray | Sequence[Sequence[float]], labels: Sequence[int] | np.ndarray,
                         tau: float, **params: Any) -> ResponseVerdict:
    """The response verdict fitted on each response's sentence scores (ragged lists, or NaN-padded rows as
    :func:`~syncheck.aggregators.response.pad_scores` gives) against its label (1 = faithful); ``tau``: FOD's
    ``tau1`` of the aggregator whose scores it reads."""
    X = scores if isinstance(scores, np.ndarray) else pad_scores(scores)
    return ResponseVerdict(tau=tau, **params).fit(X, labels)


def write_response_verdict(scores: np.ndarray | Sequence[Sequence[float]], labels: Sequence[int] | np.ndarray,
                           tau: float, directory: str | Path, *, data: str, command: str,
                           **more: Any) -> ResponseVerdict:
    """:func:`fit_response_verdict`, written as ``response.json`` into ``directory`` with its training block
    (``data``, :func:`response_counts`, ``command``, then ``more``)."""
    verdict = fit_response_verdict(scores, labels, tau)
    save_response_model(verdict, directory, {"data": data, **response_counts(labels), "command": command, **more})
    return verdict


# ---------------------------------------------------------------------------- meta.json's training block
def label_counts(y: Sequence[int] | np.ndarray) -> dict[str, int]:
    """``sentences``, ``faithful`` and ``unfaithful`` of sentence labels ``y``."""
    y = np.asarray(y)
    return {"sentences": int(len(y)), "faithful": int(y.sum()), "unfaithful": int(len(y) - y.sum())}


def response_counts(y: Sequence[int] | np.ndarray) -> dict[str, int]:
    """``responses`` and ``faithful`` of response labels ``y``."""
    y = np.asarray(y)
    return {"responses": int(len(y)), "faithful": int(y.sum())}


def recipe_info(kind: str, params: Mapping[str, Any], **more: Any) -> dict[str, Any]:
    """The ``recipe`` entry of a training block: the estimator ``kind``, its ``params``, then ``more`` (``probes``,
    ``features``, ``relative``, ``probes_read``)."""
    return {"kind": kind, "params": params, **more}


__all__ = [
    "FOLDS", "FinalModel", "final_design", "fit_final_model", "fit_response_verdict", "fit_sentence_model",
    "label_counts", "probe_templates", "recipe_info", "recipe_params", "response_counts", "save_final_model",
    "save_sentence_model", "sentence_oof", "tune_decoding", "write_response_verdict",
]
